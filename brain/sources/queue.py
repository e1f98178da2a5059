"""The one queue every sync-shaped job goes through (scheduled, watcher, manual, rescan,
re-embed, purge).

- Bounded concurrency: ``concurrency`` worker threads.
- Fair: projects take turns (round robin), so one big source never starves another
  project; two jobs of the same source never run at once.
- Folded: a request for a source that already has a queued job joins it (targeted paths
  merge; a full sync absorbs targeted ones).
- Cancellable: each job has a ``cancel`` event the runner checks between files and between
  embedding batches, so a cancel takes effect within about a second. A cancelled run is not
  an error; what it indexed stays.
- Durable ids: with a :class:`JobRecords` (sources.db), every job is recorded when queued,
  started and finished, so ``sync_status(job_id)`` answers after a restart; jobs a stopped or
  killed process left queued or running are resumed under their ids (:meth:`resume`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

KINDS = ("sync", "targeted", "rescan", "reembed", "purge")
FINAL = ("done", "cancelled", "failed")
_FULL = ("sync", "rescan")
_HISTORY = 200


@dataclass(slots=True)
class Job:
    id: str
    source_id: str
    project: str
    kind: str
    paths: set[str] | None = None
    scope: str | None = None
    reason: str = "manual"
    status: str = "queued"
    progress: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.id,
            "source_id": self.source_id,
            "project": self.project,
            "kind": self.kind,
            "scope": self.scope,
            "reason": self.reason,
            "status": self.status,
            "progress": dict(self.progress),
            "result": dict(self.result),
            "error": self.error,
            "paths": sorted(self.paths)[:50] if self.paths else None,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
        }


Runner = Callable[[Job], dict[str, Any]]


class JobRecords(Protocol):
    """Where jobs are recorded (brain/sources/registry.py)."""

    def save_job(self, job: dict[str, Any]) -> None: ...

    def load_job(self, job_id: str) -> dict[str, Any] | None: ...


def job_from(data: dict[str, Any]) -> Job:
    """A recorded job, as it was when recorded (targeted paths beyond 50 are not kept)."""
    return Job(
        id=str(data["job_id"]), source_id=str(data["source_id"]), project=str(data["project"]),
        kind=str(data["kind"]), paths=set(data["paths"]) if data.get("paths") else None,
        scope=data.get("scope"), reason=str(data.get("reason") or "manual"),
        status=str(data["status"]), progress=dict(data.get("progress") or {}),
        result=dict(data.get("result") or {}), error=data.get("error"),
        created=float(data["created"]), started=data.get("started"),
        finished=data.get("finished"),
    )


class SyncQueue:
    def __init__(self, runner: Runner, concurrency: int = 2,
                 records: JobRecords | None = None) -> None:
        self._runner = runner
        self._records = records
        self._concurrency = max(1, concurrency)
        self._cv = threading.Condition()
        self._queues: dict[str, deque[Job]] = {}
        self._turns: deque[str] = deque()  # projects in round-robin order
        self._running: dict[str, Job] = {}  # source_id -> job
        self._jobs: dict[str, Job] = {}
        self._finished: deque[str] = deque()
        self._threads: list[threading.Thread] = []
        self._stopping = False

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        with self._cv:
            if self._threads:
                return
            self._stopping = False
            for i in range(self._concurrency):
                t = threading.Thread(target=self._work, name=f"sync-worker-{i}", daemon=True)
                t.start()
                self._threads.append(t)

    def stop(self, timeout: float = 10.0) -> None:
        with self._cv:
            self._stopping = True
            for q in self._queues.values():
                for job in q:
                    self._finish(job, "cancelled")
            self._queues.clear()
            self._turns.clear()
            for job in self._running.values():
                job.cancel.set()
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()

    # -- requests --------------------------------------------------------------------------
    def submit(
        self,
        source_id: str,
        project: str,
        kind: str = "sync",
        paths: set[str] | None = None,
        scope: str | None = None,
        reason: str = "manual",
    ) -> Job:
        if kind not in KINDS:
            raise ValueError(f"unknown job kind {kind!r}")
        with self._cv:
            queued = self._queued_for(source_id)
            folded = self._fold(queued, kind, paths, scope) if queued else None
            if folded is not None:
                return folded
            job = Job(
                id="job-" + uuid.uuid4().hex[:10],
                source_id=source_id,
                project=project,
                kind=kind,
                paths=set(paths) if paths is not None else None,
                scope=scope,
                reason=reason,
            )
            if kind == "purge":  # a purge makes every queued job of the source moot
                for old in list(queued):
                    self._drop(old)
            self._enqueue(job)
            return job

    def resume(self, data: dict[str, Any]) -> Job:
        """Queue again, under its id, a recorded job a previous process never finished. A
        targeted job resumes as a full sync (its recorded paths may be cut)."""
        job = job_from(data)
        job.status, job.started, job.reason = "queued", None, "resumed"
        if job.kind == "targeted":
            job.kind, job.paths = "sync", None
        with self._cv:
            self._enqueue(job)
        return job

    def _enqueue(self, job: Job) -> None:
        self._jobs[job.id] = job
        self._queues.setdefault(job.project, deque()).append(job)
        if job.project not in self._turns:
            self._turns.append(job.project)
        self._record(job)
        self._cv.notify_all()

    def _record(self, job: Job) -> None:
        # A job a stop cancels stays recorded as it was, so the next start resumes it.
        if self._records is None or (self._stopping and job.status == "cancelled"):
            return
        try:
            self._records.save_job(job.to_dict())
        except Exception:  # noqa: BLE001 - the queue runs on without the record
            log.exception("recording sync job %s failed", job.id)

    def _fold(
        self, queued: list[Job], kind: str, paths: set[str] | None, scope: str | None
    ) -> Job | None:
        for job in queued:
            if job.kind == "purge":
                return job
            if kind == "targeted" and job.kind in (*_FULL, "targeted"):
                if job.kind == "targeted":
                    assert job.paths is not None
                    job.paths |= paths or set()
                return job
            if kind in _FULL and job.kind in (*_FULL, "targeted"):
                if job.kind == "targeted" or kind == "rescan":
                    job.kind, job.paths = kind, None
                return job
            if kind == "reembed" and job.kind == "reembed" and job.scope == scope:
                return job
        return None

    def _queued_for(self, source_id: str) -> list[Job]:
        return [j for q in self._queues.values() for j in q if j.source_id == source_id]

    def _drop(self, job: Job) -> None:
        q = self._queues.get(job.project)
        if q is not None and job in q:
            q.remove(job)
        self._finish(job, "cancelled")

    def cancel(self, job_id: str) -> Job | None:
        with self._cv:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            if job.status == "queued":
                self._drop(job)
            elif job.status == "running":
                job.cancel.set()
            return job

    def cancel_source(self, source_id: str) -> list[Job]:
        with self._cv:
            hit = self._queued_for(source_id)
            for job in hit:
                self._drop(job)
            running = self._running.get(source_id)
            if running is not None:
                running.cancel.set()
                hit.append(running)
            return hit

    # -- reads -----------------------------------------------------------------------------
    def get(self, job_id: str) -> Job | None:
        with self._cv:
            job = self._jobs.get(job_id)
        if job is None and self._records is not None:
            data = self._records.load_job(job_id)  # a job of a previous process
            job = job_from(data) if data is not None else None
        return job

    def jobs(self, source_id: str | None = None) -> list[Job]:
        with self._cv:
            out = [j for j in self._jobs.values() if source_id in (None, j.source_id)]
        return sorted(out, key=lambda j: j.created)

    def running(self, source_id: str) -> Job | None:
        with self._cv:
            return self._running.get(source_id)

    def idle(self) -> bool:
        with self._cv:
            return not self._running and not any(self._queues.values())

    # -- workers ---------------------------------------------------------------------------
    def _next(self) -> Job | None:
        """The next runnable job, taking projects in turn; None when nothing can run."""
        for _ in range(len(self._turns)):
            project = self._turns[0]
            self._turns.rotate(-1)
            q = self._queues.get(project)
            if not q:
                continue
            for job in q:
                if job.source_id not in self._running:
                    q.remove(job)
                    if not q:
                        self._queues.pop(project, None)
                        self._turns.remove(project)
                    return job
        return None

    def _work(self) -> None:
        while True:
            with self._cv:
                job = None
                while not self._stopping and (job := self._next()) is None:
                    self._cv.wait(1.0)
                if self._stopping or job is None:
                    return
                job.status, job.started = "running", time.time()
                self._running[job.source_id] = job
                self._record(job)
            status, result, error = "done", {}, None
            try:
                result = self._runner(job) or {}
                if job.cancel.is_set():
                    status = "cancelled"
            except Exception as exc:  # noqa: BLE001 - a failed job is reported, not raised
                log.exception("sync job %s failed", job.id)
                status, error = "failed", f"{type(exc).__name__}: {exc}"
            with self._cv:
                self._running.pop(job.source_id, None)
                job.result, job.error = result, error
                self._finish(job, status)
                self._cv.notify_all()

    def _finish(self, job: Job, status: str) -> None:
        job.status, job.finished = status, time.time()
        job.done.set()
        self._record(job)
        self._finished.append(job.id)
        while len(self._finished) > _HISTORY:
            self._jobs.pop(self._finished.popleft(), None)
