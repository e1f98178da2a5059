"""SourcesService: folders indexed into the brain, kept current, searchable three ways.

``build(brain)`` makes the service; ``start(brain)`` / ``stop(brain)`` run its background
work: the sync queue's workers, the watcher of ``auto`` sources and the scheduler of
``interval`` sources. Every sync-shaped job goes through the one queue (see queue.py).
"""

from __future__ import annotations

import builtins
import logging
import os
import random
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from brain import tenancy
from brain.clock import iso
from brain.errors import Conflict, Forbidden, InvalidArgument, PathOutsideSource, SourceNotFound
from brain.identity import Identity
from brain.limits import (
    MAX_LABEL_CHARS,
    MAX_QUERY_CHARS,
    check_glob,
    check_patterns,
    check_tags,
    too_large,
)
from brain.paths import LOCAL, SETTING_HINT, real_path
from brain.sources import search as fs
from brain.sources.filters import SourceFilter, is_floored
from brain.sources.indexer import SOURCE_KINDS, Indexer
from brain.sources.queue import Job, SyncQueue
from brain.sources.registry import TRIGGERS, Registry, SourceRecord, new_source_id
from brain.sources.walker import read_text_capped, resolve_in_source
from brain.sources.watcher import SourceWatcher, Watched
from brain.vector_store import Filter, Match, MatchAny, scroll_all

log = logging.getLogger(__name__)

_FULL_AFTER_PATHS = 5000  # a watcher batch larger than this becomes a full reconcile
_MIN_INTERVAL_S = 10.0


class SourcesService:
    def __init__(self, brain: Any) -> None:
        self.brain = brain
        s = brain.settings
        self.settings = s
        self.registry = Registry(Path(brain.home) / "sources.db", tenancy.settings_identity(s))
        self.indexer = Indexer(
            brain.store,
            brain.embedder,
            brain.bm25,
            self.registry,
            model_id=brain.meta.model,
            user_id=s.identity.user_id,
            embed_batch=s.sync.embed_batch,
            max_scan_files=s.sync.max_scan_files,
        )
        self.queue = SyncQueue(self._run_job, s.sync.concurrency)
        self.watcher = SourceWatcher(self._watched, self._on_changes, int(s.sync.debounce_s * 1000))
        self._stop = threading.Event()
        self._scheduler: threading.Thread | None = None
        self._started = False
        # Removed sources, so their jobs stay visible to their owner and no one else.
        self._gone: dict[str, SourceRecord] = {}

    @property
    def caller(self) -> Identity:
        """Who is asking: every source it names or lists is filtered for it (tenancy.py)."""
        return tenancy.resolve(self.settings)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._stop.clear()
        self.queue.start()
        self.watcher.start()
        self._scheduler = threading.Thread(
            target=self._schedule_loop, name="sync-scheduler", daemon=True
        )
        self._scheduler.start()
        for rec in self.registry.list():  # catch up with changes made while we were down
            if rec.trigger == "auto":
                self.queue.submit(rec.id, rec.project, "sync", reason="startup")

    def stop(self) -> None:
        if not self._started:
            return
        self._stop.set()
        self.watcher.stop()
        self.queue.stop()
        if self._scheduler is not None:
            self._scheduler.join(timeout=5)
        self._started = False

    # ------------------------------------------------------------------ sources
    def add(
        self,
        path: str,
        name: str | None = None,
        project: str | None = None,
        trigger: str = "manual",
        exclude: list[str] | None = None,
        include: list[str] | None = None,
        max_scan_files: int | None = None,
        interval_s: float | None = None,
        use_gitignore: bool = True,
        sync: bool = True,
        visibility: str = tenancy.SHARED,
    ) -> dict[str, Any]:
        who, visibility = self.caller, tenancy.check_visibility(visibility)
        real = self.brain.paths.source_root(path)  # Forbidden outside the caller's roots
        if not Path(real).is_dir():
            raise InvalidArgument(
                f"{path} is not a folder; pass the path of an existing folder.", path=str(path)
            )
        if is_floored(real.lstrip("/")):
            raise InvalidArgument(
                f"{real} is a credential store or browser profile, which is never indexed; "
                "add the project folder instead.",
                path=real,
            )
        exclude = self._guard_home(real, check_patterns(exclude, "exclude"))
        include = check_patterns(include, "include")
        name = (name or Path(real).name or "root").strip()
        self._check_fields(trigger, max_scan_files, interval_s, name)
        for rec in self.registry.list(self.caller):  # others' names and roots are not taken
            if rec.name == name:
                raise Conflict(f"a source named {name!r} exists; pick another name.", name=name)
            if os.path.realpath(rec.root) == real:
                raise Conflict(f"{real} is already the source {rec.name!r}.", source=rec.name)
        now = iso(self.brain.clock.now())
        rec = SourceRecord(
            id=new_source_id(),
            name=name,
            root=real,
            project=project or self.settings.memory.default_project,
            trigger=trigger,
            exclude=exclude,
            include=list(include or []),
            max_scan_files=max_scan_files,
            interval_s=interval_s,
            use_gitignore=use_gitignore,
            created=now,
            updated=now,
            user_id=who.user_id,
            agent_id=who.agent_id,
            visibility=visibility,
        )
        self.registry.save(rec)
        if trigger == "auto":
            self.watcher.refresh()
        job = self.queue.submit(rec.id, rec.project, "sync", reason="added") if sync else None
        return {"source": self.describe(rec), "job": job.to_dict() if job else None}

    def _guard_home(self, root: str, exclude: list[str]) -> list[str]:
        """Add the data dir to the excludes when it lies inside the source: never index it."""
        home = os.path.realpath(self.brain.home)
        if home.startswith(root + os.sep):
            pattern = "/" + Path(os.path.relpath(home, root)).as_posix() + "/"
            if pattern not in exclude:
                exclude = [*exclude, pattern]
        return exclude

    def _check_fields(
        self, trigger: str, max_scan_files: int | None, interval_s: float | None, name: str
    ) -> None:
        if trigger not in TRIGGERS:
            raise InvalidArgument(f"trigger must be one of {list(TRIGGERS)}, not {trigger!r}.")
        if not name or len(name) > MAX_LABEL_CHARS or "/" in name:
            raise InvalidArgument(
                f"name must be 1-{MAX_LABEL_CHARS} characters without '/'.", name=name
            )
        if max_scan_files is not None and max_scan_files < 1:
            raise InvalidArgument("max_scan_files must be at least 1 (or null for the default).")
        if interval_s is not None and interval_s < _MIN_INTERVAL_S:
            raise InvalidArgument(f"interval_s must be at least {_MIN_INTERVAL_S:g} seconds.")

    def get(self, key: str) -> SourceRecord:
        """A source the caller may see; another's is reported exactly as a missing one."""
        rec = self.registry.find(key, self.caller)
        if rec is None:
            names = [r.name for r in self.registry.list(self.caller)]
            raise SourceNotFound(
                f"no source {key!r}; known sources: {names or 'none'} (add one with add_source).",
                source=key,
            )
        if not self.brain.paths.reaches(rec.root):
            raise Forbidden(
                f"the source {rec.name!r} lies outside the folders this caller may reach; "
                f"{SETTING_HINT}.",
                source=key,
            )
        return rec

    def describe(self, rec: SourceRecord) -> dict[str, Any]:
        running = self.queue.running(rec.id)
        return {
            "id": rec.id,
            "name": rec.name,
            "root": rec.root,
            "project": rec.project,
            "trigger": rec.trigger,
            "exclude": rec.exclude,
            "include": rec.include,
            "max_scan_files": rec.max_scan_files,
            "effective_max_scan_files": rec.max_scan_files or self.settings.sync.max_scan_files,
            "interval_s": rec.interval_s if rec.trigger == "interval" else None,
            "use_gitignore": rec.use_gitignore,
            "visibility": rec.visibility,
            "created": rec.created,
            "updated": rec.updated,
            "snapshot": rec.snapshot,
            "last_run": rec.last_run,
            "running_job": running.id if running else None,
        }

    def list(self, project: str | None = None) -> list[dict[str, Any]]:
        return [
            self.describe(r)
            for r in self.registry.list(self.caller)
            if project in (None, r.project) and self.brain.paths.reaches(r.root)
        ]

    def update(self, key: str, **changes: Any) -> dict[str, Any]:
        rec = self.get(key)
        allowed = {
            "name",
            "project",
            "trigger",
            "exclude",
            "include",
            "max_scan_files",
            "interval_s",
            "use_gitignore",
        }
        bad = set(changes) - allowed
        if bad:
            raise InvalidArgument(f"cannot update {sorted(bad)}; updatable: {sorted(allowed)}.")
        changes = {k: v for k, v in changes.items() if v is not None or k == "max_scan_files"}
        merged = {**rec.to_dict(), **changes}
        self._check_fields(
            merged["trigger"], merged["max_scan_files"], merged["interval_s"], merged["name"]
        )
        if "name" in changes:
            other = self.registry.find(changes["name"], self.caller)
            if other is not None and other.id != rec.id:
                raise Conflict(f"a source named {changes['name']!r} exists.", name=changes["name"])
        for key_ in ("exclude", "include"):
            if key_ in changes:
                changes[key_] = check_patterns(changes[key_], key_)
        if "exclude" in changes:
            changes["exclude"] = self._guard_home(rec.root, changes["exclude"])
        # patch, not save: a running job may be writing the snapshot meanwhile
        new = self.registry.patch(rec.id, **changes, updated=iso(self.brain.clock.now()))
        if new is None:
            raise SourceNotFound(f"source {key!r} was removed meanwhile.", source=key)
        if "project" in changes and changes["project"] != rec.project:
            self._retag_project(new)
        self.watcher.refresh()
        job = None
        refilter = ("exclude", "include", "use_gitignore", "max_scan_files")
        if any(k in changes for k in refilter) or (
            changes.get("trigger") == "auto" and rec.trigger != "auto"
        ):
            job = self.queue.submit(new.id, new.project, "sync", reason="source updated")
        return {"source": self.describe(new), "job": job.to_dict() if job else None}

    def _retag_project(self, rec: SourceRecord) -> None:
        flt = Filter(must=(Match("source_id", rec.id), MatchAny("kind", SOURCE_KINDS)))
        ids = [p.id for p in scroll_all(self.brain.store, flt)]
        for i in range(0, len(ids), 512):
            self.brain.store.set_payload(ids[i : i + 512], {"project": rec.project})

    def remove(self, key: str, purge: bool = False) -> dict[str, Any]:
        rec = self.get(key)
        for job in self.queue.cancel_source(rec.id):
            job.done.wait(30)  # a running job must not write after the record is gone
        self.registry.delete(rec.id)
        self._gone[rec.id] = rec
        self.watcher.refresh()
        result: dict[str, Any] = {"removed": rec.name, "source_id": rec.id, "purged": False}
        if purge:
            job = self.queue.submit(rec.id, rec.project, "purge", reason="remove")
            job.done.wait(60)
            result.update(purged=job.status == "done", points_deleted=job.result.get("deleted"))
        else:
            result["note"] = (
                "its points stay searchable by nothing and count as orphans; "
                "run repair_orphans to delete them"
            )
        return result

    # ------------------------------------------------------------------ jobs
    def sync(
        self,
        key: str,
        *,
        paths: builtins.list[str] | None = None,
        wait: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        rec = self.get(key)
        job = (
            self.queue.submit(rec.id, rec.project, "targeted", paths=set(paths))
            if paths
            else self.queue.submit(rec.id, rec.project, "sync")
        )
        if wait:
            job.done.wait(timeout)
        return job.to_dict()

    def rescan(self, key: str, wait: bool = False) -> dict[str, Any]:
        rec = self.get(key)
        job = self.queue.submit(rec.id, rec.project, "rescan", reason="rescan")
        if wait:
            job.done.wait()
        return job.to_dict()

    def reset_state(self, key: str) -> dict[str, Any]:
        """Forget what the last sync saw (cancelling a running job); deletes no vector."""
        rec = self.get(key)
        cancelled = [j.id for j in self.queue.cancel_source(rec.id)]
        for j in cancelled:
            job = self.queue.get(j)
            if job is not None:
                job.done.wait(10)
        cleared = self.registry.clear_states(rec.id)
        self.registry.patch(rec.id, state_complete=False)
        return {"source": rec.name, "states_cleared": cleared, "cancelled_jobs": cancelled}

    def _mine(self, job: Job | None) -> Job | None:
        """The job when its source is one the caller may see (removed ones included)."""
        if job is None:
            return None
        rec = self.registry.find(job.source_id) or self._gone.get(job.source_id)
        if rec is None or rec.id != job.source_id:
            return None
        return job if tenancy.visible(rec.to_dict(), self.caller) else None

    def job(self, job_id: str) -> dict[str, Any]:
        job = self._mine(self.queue.get(job_id))
        if job is None:
            raise InvalidArgument(
                f"no job {job_id!r} (finished jobs are kept for a while).", job_id=job_id
            )
        return job.to_dict()

    def jobs(self, key: str | None = None) -> builtins.list[dict[str, Any]]:
        source_id = self.get(key).id if key else None
        return [j.to_dict() for j in self.queue.jobs(source_id) if self._mine(j) is not None]

    def wait(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        job = self.queue.get(job_id)
        if job is None:
            return self.job(job_id)
        job.done.wait(timeout)
        return job.to_dict()

    def cancel(self, job_id: str | None = None, source: str | None = None) -> dict[str, Any]:
        if job_id:
            if self._mine(self.queue.get(job_id)) is None:
                return self.job(job_id)  # the error an unknown job gets
            job = self.queue.cancel(job_id)
            if job is None:
                return self.job(job_id)
            return job.to_dict()
        if source:
            rec = self.get(source)
            return {"cancelled": [j.id for j in self.queue.cancel_source(rec.id)]}
        raise InvalidArgument("pass job_id or source to cancel.")

    def _run_job(self, job: Job) -> dict[str, Any]:
        if job.kind == "purge":
            return self._purge(job.source_id)
        rec = self.registry.find(job.source_id)
        if rec is None:
            return {"skipped": "source removed"}
        try:  # background work belongs to no caller: the local policy applies
            self.brain.paths.check_source(rec.root, LOCAL)
        except Forbidden as exc:
            log.warning("source %s not synced: %s", rec.name, exc.message)
            return {"skipped": exc.message}
        started = iso(self.brain.clock.now())
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
                "finished": iso(self.brain.clock.now()),
                "stats": result,
            },
        )
        return result

    def _purge(self, source_id: str) -> dict[str, Any]:
        flt = Filter(must=(Match("source_id", source_id), MatchAny("kind", SOURCE_KINDS)))
        n = self.brain.store.count(flt)
        self.brain.store.delete_by_filter(flt)
        self.registry.clear_states(source_id)
        return {"deleted": n}

    # ------------------------------------------------------------------ controls
    def reembed(
        self, key: str, path: str | None = None, confirm: bool = False, sample: int = 16
    ) -> dict[str, Any]:
        """Embed a source, folder or file again; without ``confirm`` only estimate the time."""
        rec = self.get(key)
        scope = None
        if path:
            real = resolve_in_source(Path(rec.root), path)
            scope = Path(os.path.relpath(real, rec.root)).as_posix()
            scope = None if scope == "." else scope
        states = self.registry.file_states(rec.id)
        chosen = {
            r: s
            for r, s in states.items()
            if scope is None or r == scope or r.startswith(scope + "/")
        }
        chunks = sum(s.n_chunks for s in chosen.values())
        if not confirm:
            per_chunk = self._sample_seconds(rec, list(chosen), sample)
            low, high = chunks * per_chunk * 0.7, chunks * per_chunk * 1.6
            return {
                "source": rec.name,
                "scope": scope or "/",
                "files": len(chosen),
                "chunks": chunks,
                "estimate_s": [round(low, 1), round(high, 1)],
                "confirm_required": True,
                "note": "nothing was embedded; call again with confirm=true to run",
            }
        job = self.queue.submit(rec.id, rec.project, "reembed", scope=scope, reason="reembed")
        return {
            "source": rec.name,
            "scope": scope or "/",
            "files": len(chosen),
            "chunks": chunks,
            "job": job.to_dict(),
        }

    def _sample_seconds(self, rec: SourceRecord, rels: builtins.list[str], n: int) -> float:
        """Seconds per chunk: chunk and embed a random sample of files in scope."""
        if not rels:
            return 0.0
        texts: builtins.list[str] = []
        for rel in random.Random(0).sample(rels, min(n, len(rels))):
            try:
                text, _ = read_text_capped(Path(rec.root) / rel, 20_000, root=rec.root)
            except OSError:
                continue
            if text and text.strip():
                texts.extend(p.text for p in self.indexer.chunk(text)[:4])
        if not texts:
            return 0.0
        texts = texts[:32]
        t0 = time.perf_counter()
        self.brain.embedder.embed_documents(texts)
        return (time.perf_counter() - t0) / len(texts) * 1.15  # + indexing overhead

    def repair_orphans(self, dry_run: bool = True) -> dict[str, Any]:
        """Points of sources that no longer exist: count them, delete unless ``dry_run``."""
        known = tuple(r.id for r in self.registry.list())
        mine = tenancy.conditions(self.caller)  # only the caller's orphans, seen or deleted
        flt = Filter(
            must=(MatchAny("kind", SOURCE_KINDS), *mine),
            must_not=(MatchAny("source_id", known),) if known else (),
        )
        by_source: dict[str, int] = {}
        for p in scroll_all(
            self.brain.store, Filter(must=(Match("kind", "file"), *mine), must_not=flt.must_not)
        ):
            sid = str(p.payload.get("source_id"))
            by_source[sid] = by_source.get(sid, 0) + 1
        points = self.brain.store.count(flt)
        if not dry_run and points:
            self.brain.store.delete_by_filter(flt)
        return {
            "dry_run": dry_run,
            "orphan_points": points,
            "orphan_files_by_source": by_source,
            "deleted": 0 if dry_run else points,
        }

    # ------------------------------------------------------------------ search
    def search(
        self,
        query: str,
        search_mode: str = "semantic",
        *,
        project: str | None = None,
        source: str | None = None,
        folder: str | None = None,
        path_glob: str | None = None,
        category: builtins.list[str] | None = None,
        tags: builtins.list[str] | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
        modified_after: str | None = None,
        modified_before: str | None = None,
        limit: int = 10,
        fixed: bool = False,
        case_insensitive: bool = False,
    ) -> dict[str, Any]:
        if search_mode not in fs.MODES:
            raise InvalidArgument(f"search_mode must be one of {list(fs.MODES)}.")
        if not 1 <= limit <= 200:
            raise InvalidArgument("limit must be between 1 and 200.", limit=limit)
        if search_mode != "filter" and not (query or "").strip():
            raise InvalidArgument(f"{search_mode} search needs a query.")
        if len(query or "") > MAX_QUERY_CHARS:
            raise too_large("query", len(query), MAX_QUERY_CHARS, "Search for fewer words.")
        scope = self._scope(project, source, folder)
        scope.path_glob = check_glob(path_glob) if path_glob else None
        scope.categories = tuple(check_tags(category, "category"))
        scope.tags = tuple(check_tags(tags))
        scope.created_after, scope.created_before = _ts(created_after), _ts(created_before)
        scope.modified_after, scope.modified_before = _ts(modified_after), _ts(modified_before)
        base = {"mode": search_mode, "sources": [s.name for s in scope.sources]}
        if not scope.sources:
            return {**base, "results": [], "count": 0}
        deps = self._deps()
        extra: dict[str, Any] = {}
        if search_mode == "semantic":
            results = fs.semantic(deps, scope, query, limit)
        elif search_mode == "filter":
            results = fs.filter_mode(deps, scope, query, limit)
        else:
            results, extra = fs.grep_mode(
                deps, scope, query, limit, fixed=fixed, case_insensitive=case_insensitive
            )
        return {**base, **extra, "results": results, "count": len(results)}

    def _deps(self) -> fs.SearchDeps:
        r = self.settings.retrieval
        return fs.SearchDeps(
            self.brain.store,
            self.brain.embedder,
            self.brain.bm25,
            self.registry,
            r.exact_max_points,
            r.rrf_k,
            r.candidates,
            self.settings.sync.grep_timeout_s,
        )

    def _scope(self, project: str | None, source: str | None, folder: str | None) -> fs.Scope:
        scope = self._scope_of(project, source, folder)
        scope.who = self.caller  # the store filter checks each point's owner too
        return scope

    def _scope_of(self, project: str | None, source: str | None, folder: str | None) -> fs.Scope:
        recs = [self.get(source)] if source else self.registry.list(self.caller)
        if source:  # grep reads the live files: the root must still be what was added
            self.brain.paths.check_source(recs[0].root)
        recs = [r for r in recs if self.brain.paths.source_ok(r.root)]
        if project:
            recs = [r for r in recs if r.project == project]
        if not folder:
            return fs.Scope(recs)
        if not Path(folder).is_absolute():
            if len(recs) != 1:
                raise InvalidArgument(
                    "a relative folder needs source=...; or pass an absolute folder path.",
                    folder=folder,
                )
            real = resolve_in_source(Path(recs[0].root), folder)
            return fs.Scope(recs, _rel_or_none(recs[0].root, real))
        real = Path(real_path(folder))
        owners = [r for r in recs if real == Path(r.root) or Path(r.root) in real.parents]
        if not owners:
            raise PathOutsideSource(
                f"{folder} is not inside any source in scope; add it with "
                "add_source or pick a folder inside one.",
                path=folder,
            )
        rec = max(owners, key=lambda r: len(r.root))
        return fs.Scope([rec], _rel_or_none(rec.root, real))

    # ------------------------------------------------------------------ background
    def _watched(self) -> builtins.list[Watched]:
        return [
            Watched(r.id, r.root, SourceFilter(Path(r.root), r.exclude, r.include, r.use_gitignore))
            for r in self.registry.list()
            if r.trigger == "auto" and self.brain.paths.source_ok(r.root, LOCAL)
        ]

    def _on_changes(self, source_id: str, rels: set[str], full: bool) -> None:
        rec = self.registry.find(source_id)
        if rec is None or rec.trigger != "auto":
            return
        if full or len(rels) > _FULL_AFTER_PATHS:
            self.queue.submit(rec.id, rec.project, "sync", reason="watcher-reconcile")
        else:
            self.queue.submit(rec.id, rec.project, "targeted", paths=rels, reason="watcher")

    def scheduler_tick(self) -> builtins.list[str]:
        """Enqueue every interval source that is due; returns their names."""
        now = self.brain.clock.now().timestamp()
        due = []
        for rec in self.registry.list():
            if rec.trigger != "interval":
                continue
            interval = rec.interval_s or 3600.0
            last = _ts(rec.last_run.get("finished")) if rec.last_run else None
            if last is None or now - last >= interval:
                self.queue.submit(rec.id, rec.project, "sync", reason="interval")
                due.append(rec.name)
        return due

    def _schedule_loop(self) -> None:
        while not self._stop.wait(self.settings.sync.poll_interval_s):
            try:
                self.scheduler_tick()
            except Exception:  # noqa: BLE001 - retried on the next tick
                log.exception("sync scheduler tick failed")

    def idle(self) -> bool:
        return self.queue.idle()

    def wait_idle(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.queue.idle():
                return True
            time.sleep(0.05)
        return False


def _rel_or_none(root: str, real: Path) -> str | None:
    rel = Path(os.path.relpath(real, root)).as_posix()
    return None if rel == "." else rel


def _ts(value: str | None) -> float | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidArgument(
            f"bad date {value!r}: use ISO 8601 like 2026-01-31 or 2026-01-31T12:00:00Z.",
            value=value,
        ) from exc
    if dt.tzinfo is None:
        from datetime import UTC

        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def build(brain: Any) -> SourcesService:
    return SourcesService(brain)


def start(brain: Any) -> None:
    brain.sources.start()


def stop(brain: Any) -> None:
    svc = brain.__dict__.get("sources")  # never build the service just to stop it
    if svc is not None:
        svc.stop()
        svc.registry.close()
