"""The background work of the sources: one sync queue, the watcher, the interval timer.

Every sync-shaped job goes through the one queue (see queue.py), whoever asked: a tool, the
watcher of ``auto`` sources (debounced file changes) or the timer of ``interval`` sources.
Jobs run for no caller: the local path policy applies to them. The platform-wide auto-sync
mode (``[sync] auto``, brain/sources/auto.py) decides which sources the watcher, the timer and
the catch-up at start may sync; manual jobs run in every mode.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.clock import Clock, iso
from brain.errors import Forbidden
from brain.search.policy import SearchPolicy
from brain.sources import auto
from brain.sources.arguments import parse_ts
from brain.sources.filters import SourceFilter
from brain.sources.indexer import SOURCE_KINDS, Indexer
from brain.sources.queue import Job, SyncQueue
from brain.sources.registry import Registry, SourceRecord
from brain.sources.watcher import SourceWatcher, Watched
from brain.trust.paths import LOCAL, PathPolicy
from brain.vector_store import Filter, Match, MatchAny, VectorStore

log = logging.getLogger(__name__)

_FULL_AFTER_PATHS = 5000  # a watcher batch larger than this becomes a full reconcile


@dataclass(frozen=True, slots=True)
class SourcesConfig:
    """What the sources read of the settings (``[sync]`` and a few shared knobs)."""

    default_project: str  # [memory] default_project: of a source whose folder names none
    concurrency: int
    max_scan_files: int
    debounce_s: float
    poll_interval_s: float
    embed_batch: int
    grep_timeout_s: float
    exact_max_points: int  # [retrieval]: how fs_search ranks
    policy: SearchPolicy  # [retrieval]: the ranking every search shares
    auto: str = "on"  # [sync] auto: on | off | packages-only


class SyncScheduler:
    """Runs the queue's jobs and feeds it from the watcher and the interval timer."""

    def __init__(
        self,
        registry: Registry,
        indexer: Indexer,
        store: VectorStore,
        paths: PathPolicy,
        clock: Clock,
        cfg: SourcesConfig,
    ) -> None:
        self.registry = registry
        self.indexer = indexer
        self.store = store
        self.paths = paths
        self.clock = clock
        self.cfg = cfg
        self.queue = SyncQueue(self.run_job, cfg.concurrency, registry)
        self.watcher = SourceWatcher(self.watched, self.on_changes, int(cfg.debounce_s * 1000))
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self._started = False
        self.auto_mode = auto.check_mode(cfg.auto)

    def background_ok(self, rec: SourceRecord) -> bool:
        """Whether the auto-sync mode lets background work sync ``rec`` now."""
        return auto.background_ok(self.auto_mode, self.store, rec)

    def set_auto_mode(self, mode: str) -> list[str]:
        """Switch the auto-sync mode at run time; the ``auto`` sources it newly lets through
        catch up with a sync (as at start). Returns their names."""
        before = {r.id for r in self.registry.list() if self.background_ok(r)}
        self.auto_mode = auto.check_mode(mode)
        log.info("auto-sync mode is now %s", mode)
        self.watcher.refresh()
        caught = []
        for rec in self.registry.list():
            if rec.trigger == "auto" and rec.id not in before and self.background_ok(rec):
                self.queue.submit(rec.id, rec.project, "sync", reason="auto mode")
                caught.append(rec.name)
        return caught

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._stop.clear()
        self.queue.start()
        self.watcher.start()
        self._timer = threading.Thread(target=self._timer_loop, name="sync-scheduler", daemon=True)
        self._timer.start()
        for data in self.registry.unfinished_jobs():  # left by a stop or a crash
            self.queue.resume(data)
        for rec in self.registry.list():  # catch up with changes made while we were down
            if rec.trigger == "auto" and self.background_ok(rec):
                self.queue.submit(rec.id, rec.project, "sync", reason="startup")

    def stop(self) -> None:
        if not self._started:
            return
        self._stop.set()
        self.watcher.stop()
        self.queue.stop()
        if self._timer is not None:
            self._timer.join(timeout=5)
        self._started = False

    # ------------------------------------------------------------------ jobs
    def run_job(self, job: Job) -> dict[str, Any]:
        if job.kind == "purge":
            return self._purge(job.source_id)
        rec = self.registry.find(job.source_id)
        if rec is None:
            return {"skipped": "source removed"}
        try:  # background work belongs to no caller: the local policy applies
            self.paths.check_source(rec.root, LOCAL)
        except Forbidden as exc:
            log.warning("source %s not synced: %s", rec.name, exc.message)
            return {"skipped": exc.message}
        started = iso(self.clock.now())
        # packages-only: a sync may find (or drop) the package content that pins the source.
        repin = self.auto_mode == "packages-only" and rec.trigger == "auto" and rec.pinned is None
        was_pinned = repin and auto.holds_packages(self.store, rec.id)
        paths = job.paths if job.kind == "targeted" else None
        mode = {"rescan": "rescan", "reembed": "reembed"}.get(job.kind, "sync")
        stats = self.indexer.run(rec, job, paths=paths, mode=mode, scope=job.scope)
        result = stats.to_dict()
        status = "cancelled" if stats.cancelled else "done"
        self.registry.patch(
            rec.id,
            last_run={
                "job_id": job.id,
                "kind": job.kind,
                "status": status,
                "started": started,
                "finished": iso(self.clock.now()),
                "stats": result,
            },
        )
        if repin and auto.holds_packages(self.store, rec.id) != was_pinned:
            self.watcher.refresh()
        return result

    def _purge(self, source_id: str) -> dict[str, Any]:
        flt = Filter(must=(Match("source_id", source_id), MatchAny("kind", SOURCE_KINDS)))
        n = self.store.count(flt)
        self.store.delete_by_filter(flt)
        self.registry.clear_states(source_id)
        return {"deleted": n}

    # ------------------------------------------------------------------ watcher
    def watched(self) -> list[Watched]:
        return [
            Watched(r.id, r.root, SourceFilter(Path(r.root), r.exclude, r.include, r.use_gitignore))
            for r in self.registry.list()
            if r.trigger == "auto" and self.paths.source_ok(r.root, LOCAL) and self.background_ok(r)
        ]

    def on_changes(self, source_id: str, rels: set[str], full: bool) -> None:
        rec = self.registry.find(source_id)
        if rec is None or rec.trigger != "auto" or not self.background_ok(rec):
            return
        if full or len(rels) > _FULL_AFTER_PATHS:
            self.queue.submit(rec.id, rec.project, "sync", reason="watcher-reconcile")
        else:
            self.queue.submit(rec.id, rec.project, "targeted", paths=rels, reason="watcher")

    # ------------------------------------------------------------------ timer
    def tick(self) -> list[str]:
        """Enqueue every interval source that is due; returns their names."""
        now = self.clock.now().timestamp()
        due = []
        for rec in self.registry.list():
            if rec.trigger != "interval" or not self.background_ok(rec):
                continue
            interval = rec.interval_s or 3600.0
            last = parse_ts(rec.last_run.get("finished")) if rec.last_run else None
            if last is None or now - last >= interval:
                self.queue.submit(rec.id, rec.project, "sync", reason="interval")
                due.append(rec.name)
        return due

    def _timer_loop(self) -> None:
        while not self._stop.wait(self.cfg.poll_interval_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - retried on the next tick
                log.exception("sync scheduler tick failed")

    def wait_idle(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.queue.idle():
                return True
            time.sleep(0.05)
        return False
