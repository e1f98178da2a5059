"""SourcesService: folders indexed into the brain, kept current, searchable three ways.

The service is the API the tools call (add, list, update, remove, sync, jobs, search...).
Its background work (the sync queue's workers, the watcher of ``auto`` sources and the
timer of ``interval`` sources) is the :class:`~brain.sources.scheduler.SyncScheduler`;
``start(brain)`` / ``stop(brain)`` run it. app.py builds the service from
:class:`SourcesDeps` and a :class:`~brain.sources.scheduler.SourcesConfig`.
"""

from __future__ import annotations

import builtins
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from brain import projects
from brain.clock import Clock, iso
from brain.embedding.bm25 import BM25Encoder
from brain.embedding.credential import search_warnings
from brain.embedding.lanes import Lanes
from brain.embedding.registry import Embedder
from brain.errors import Conflict, Forbidden, InvalidArgument, PathOutsideSource, SourceNotFound
from brain.search.presentation import search_page
from brain.sources import search as fs
from brain.sources import upkeep
from brain.sources.arguments import check_fields, guard_home, parse_ts, rel_or_none
from brain.sources.filters import is_floored
from brain.sources.indexer import SOURCE_KINDS, FilesChanged, FileWritten, Indexer
from brain.sources.queue import Job, SyncQueue
from brain.sources.registry import EDITABLE_FIELDS, Registry, SourceRecord, new_source_id
from brain.sources.scheduler import SourcesConfig, SyncScheduler
from brain.sources.walker import resolve_in_source
from brain.sources.watcher import SourceWatcher, Watched
from brain.trust import tenancy
from brain.trust.identity import Identity
from brain.trust.limits import MAX_QUERY_CHARS, check_glob, check_patterns, check_tags, too_large
from brain.trust.paths import PathPolicy, hint, real_path
from brain.vector_store import Filter, Match, MatchAny, VectorStore, scroll_all

DEFAULT_LIMIT = 10  # fs_search rows without a limit

__all__ = ["SourcesConfig", "SourcesDeps", "SourcesService", "start", "stop"]


@dataclass(frozen=True, slots=True)
class SourcesDeps:
    """Everything the sources touch besides their settings (app.py builds it)."""

    store: VectorStore
    embedder: Embedder
    bm25: BM25Encoder
    paths: PathPolicy  # every folder a caller names goes through it
    clock: Clock
    identity: Identity  # who acts outside a tool call (the settings identity)
    model_id: str  # the model that built the store: stamped on every point
    home: Path  # the data dir: sources.db lives in it, and no source indexes it
    on_file_written: FileWritten | None = None  # the hot-file counter (brain/health)
    on_files_changed: FilesChanged | None = None  # the citations' re-check (brain/citations)
    lanes: Lanes | None = None  # tool calls before a sync's batches (the brain's own)


class SourcesService:
    def __init__(self, deps: SourcesDeps, cfg: SourcesConfig) -> None:
        self.deps = deps
        self.cfg = cfg
        self.store = deps.store
        self.paths = deps.paths
        self.clock = deps.clock
        self.registry = Registry(Path(deps.home) / "sources.db", deps.identity)
        self.indexer = Indexer(
            deps.store,
            deps.embedder,
            deps.bm25,
            self.registry,
            model_id=deps.model_id,
            user_id=deps.identity.user_id,
            embed_batch=cfg.embed_batch,
            max_scan_files=cfg.max_scan_files,
            on_file_written=deps.on_file_written,
            on_files_changed=deps.on_files_changed,
            lanes=deps.lanes,
        )
        self.scheduler = SyncScheduler(
            self.registry, self.indexer, deps.store, deps.paths, deps.clock, cfg
        )
        # Removed sources, so their jobs stay visible to their owner and no one else.
        self._gone: dict[str, SourceRecord] = {}

    def use_model(self, model_id: str) -> None:
        """After a model switch's swap: stamp, and reuse vectors of, the new model only."""
        self.deps = replace(self.deps, model_id=model_id)
        self.indexer.model_id = model_id
        self.registry.restamp_model(model_id)

    @property
    def caller(self) -> Identity:
        """Who is asking: every source it names or lists is filtered for it (tenancy.py)."""
        return tenancy.caller(self.deps.identity)

    @property
    def queue(self) -> SyncQueue:
        return self.scheduler.queue

    @property
    def watcher(self) -> SourceWatcher:
        return self.scheduler.watcher

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.scheduler.start()

    def stop(self) -> None:
        self.scheduler.stop()

    def scheduler_tick(self) -> builtins.list[str]:
        """Enqueue every interval source that is due; returns their names."""
        return self.scheduler.tick()

    def _on_changes(self, source_id: str, rels: set[str], full: bool) -> None:
        """What the watcher sends for a batch of changed paths (tests call it directly)."""
        self.scheduler.on_changes(source_id, rels, full)

    def _watched(self) -> builtins.list[Watched]:
        """The sources the watcher follows (tests check who is left out)."""
        return self.scheduler.watched()

    @property
    def auto_mode(self) -> str:
        """The platform-wide auto-sync mode: on | off | packages-only (brain/sources/auto.py)."""
        return self.scheduler.auto_mode

    def set_auto_mode(self, mode: str) -> builtins.list[str]:
        """Switch the auto-sync mode now (the process's own setting, not a caller's)."""
        return self.scheduler.set_auto_mode(mode)

    def idle(self) -> bool:
        return self.queue.idle()

    def wait_idle(self, timeout: float = 60.0) -> bool:
        return self.scheduler.wait_idle(timeout)

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
        pinned: bool | None = None,
        consent: bool = False,
    ) -> dict[str, Any]:
        """``consent``: the user registers this folder (the CLI, the sources tool): a local
        caller may then add a folder outside the allowed roots, recorded in the data dir's
        policy so every process on it reaches the source (brain/trust/recorded.py)."""
        who, visibility = self.caller, tenancy.check_visibility(visibility)
        real = self.paths.source_root(path, consent)  # Forbidden outside the caller's roots
        granted = not self.paths.reaches(real)  # only by the consent: record it
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
        exclude = guard_home(self.deps.home, real, check_patterns(exclude, "exclude"))
        include = check_patterns(include, "include")
        name = (name or Path(real).name or "root").strip()
        check_fields(trigger, max_scan_files, interval_s, name)
        for rec in self.registry.list(self.caller):  # others' names and roots are not taken
            if rec.name == name:
                raise Conflict(f"a source named {name!r} exists; pick another name.", name=name)
            if os.path.realpath(rec.root) == real:
                raise Conflict(f"{real} is already the source {rec.name!r}.", source=rec.name)
        now = iso(self.clock.now())
        rec = SourceRecord(
            id=new_source_id(),
            name=name,
            root=real,
            project=project or projects.of_folder(real, self.cfg.default_project),
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
            pinned=None if pinned is None else bool(pinned),
        )
        if granted:
            self.paths.grant(real, rec.id)
        self.registry.save(rec)
        if trigger == "auto":
            self.watcher.refresh()
        job = self.queue.submit(rec.id, rec.project, "sync", reason="added") if sync else None
        out: dict[str, Any] = {"source": self.describe(rec), "job": job.to_dict() if job else None}
        if granted:
            out["granted_root"] = real
        return out

    def ensure_workspace(self, path: str, project: str | None = None) -> dict[str, Any]:
        """The folder a client names as its workspace, as a source of ``project``: added
        (watched, synced now) unless a source the caller sees already holds it. Within the
        caller's allowed roots only (no consent is implied)."""
        real = self.paths.source_root(path)
        if not Path(real).is_dir():
            raise InvalidArgument(f"{path} is not a folder.", path=str(path))
        mine = self.registry.list(self.caller)
        for rec in mine:
            if real == rec.root or Path(rec.root) in Path(real).parents:
                return {"source": rec.name, "added": False}
        taken = {r.name for r in mine}
        base = Path(real).name or "workspace"
        name = next(n for n in (base, *(f"{base}-{i}" for i in range(2, 1000)))
                    if n not in taken)
        res = self.add(real, name, project, "auto")
        return {"source": res["source"]["name"], "added": True,
                "job": (res["job"] or {}).get("job_id")}

    def unreachable(self, project: str | None = None) -> builtins.list[dict[str, str]]:
        """The caller's sources this process cannot read now, each with why: outside its
        path policy, or its folder gone or unmounted. fs_search leaves them out, saying so."""
        out = []
        for rec in self.registry.list(self.caller):
            if project not in (None, rec.project):
                continue
            why = self.paths.unreachable(rec.root)
            if why is not None:
                out.append({"name": rec.name, "kind": why[0], "reason": why[1]})
        return out

    def get(self, key: str) -> SourceRecord:
        """A source the caller may see; another's is reported exactly as a missing one."""
        rec = self.registry.find(key, self.caller)
        if rec is None:
            names = [r.name for r in self.registry.list(self.caller)]
            raise SourceNotFound(
                f"no source {key!r}; known sources: {names or 'none'} (add one with 'brain "
                "source add' or the sources tool's add action).",
                source=key,
            )
        if not self.paths.reaches(rec.root):
            raise Forbidden(
                f"the source {rec.name!r} lies outside the folders this caller may reach; "
                f"{hint()}.",
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
            "effective_max_scan_files": rec.max_scan_files or self.cfg.max_scan_files,
            "interval_s": rec.interval_s if rec.trigger == "interval" else None,
            "use_gitignore": rec.use_gitignore,
            "visibility": rec.visibility,
            "pinned": rec.pinned,
            # Whether the watcher or the timer syncs it now, under [sync] auto (auto.py).
            "background_sync": rec.trigger != "manual" and self.scheduler.background_ok(rec),
            "created": rec.created,
            "updated": rec.updated,
            "snapshot": rec.snapshot,
            "last_run": rec.last_run,
            "running_job": running.id if running else None,
        }

    def file_count(self, source_id: str) -> int:
        """Indexed files of one source the caller may see (the web explorer's sources page)."""
        return self.store.count(Filter(must=(Match("kind", "file"), Match("source_id", source_id),
                                             *tenancy.conditions(self.caller))))

    def list(self, project: str | None = None) -> list[dict[str, Any]]:
        return [
            self.describe(r)
            for r in self.registry.list(self.caller)
            if project in (None, r.project) and self.paths.reaches(r.root)
        ]

    def update(self, key: str, **changes: Any) -> dict[str, Any]:
        rec = self.get(key)
        allowed = set(EDITABLE_FIELDS)
        bad = set(changes) - allowed
        if bad:
            raise InvalidArgument(f"cannot update {sorted(bad)}; updatable: {sorted(allowed)}.")
        changes = {k: v for k, v in changes.items() if v is not None or k == "max_scan_files"}
        merged = {**rec.to_dict(), **changes}
        check_fields(
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
            changes["exclude"] = guard_home(self.deps.home, rec.root, changes["exclude"])
        # patch, not save: a running job may be writing the snapshot meanwhile
        new = self.registry.patch(rec.id, **changes, updated=iso(self.clock.now()))
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
        ids = [p.id for p in scroll_all(self.store, flt)]
        for i in range(0, len(ids), 512):
            self.store.set_payload(ids[i : i + 512], {"project": rec.project})

    def remove(self, key: str, purge: bool = False) -> dict[str, Any]:
        rec = self.get(key)
        for job in self.queue.cancel_source(rec.id):
            job.done.wait(30)  # a running job must not write after the record is gone
        self.registry.delete(rec.id)
        self.paths.revoke(rec.id)
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

    # ------------------------------------------------------------------ upkeep
    def reembed(
        self, key: str, path: str | None = None, confirm: bool = False, sample: int = 16
    ) -> dict[str, Any]:
        """Embed a source, folder or file again; without ``confirm`` only estimate the time."""
        rec = self.get(key)
        return upkeep.reembed(rec, self.registry, self.queue, self.indexer, path, confirm, sample)

    def repair_orphans(self, dry_run: bool = True) -> dict[str, Any]:
        """Points of sources that no longer exist: count them, delete unless ``dry_run``."""
        return upkeep.repair_orphans(self.store, self.registry, self.caller, dry_run)

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
        limit: int | None = None,
        fixed: bool = False,
        case_insensitive: bool = False,
    ) -> dict[str, Any]:
        """``limit`` None: up to 10 rows, and a clear single semantic answer alone (the
        relevance band, brain/search/presentation.py); given: that many rows."""
        explicit, limit = limit is not None, DEFAULT_LIMIT if limit is None else limit
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
        scope.created_after, scope.created_before = (
            parse_ts(created_after),
            parse_ts(created_before),
        )
        scope.modified_after, scope.modified_before = (
            parse_ts(modified_after),
            parse_ts(modified_before),
        )
        base: dict[str, Any] = {"mode": search_mode, "sources": [s.name for s in scope.sources]}
        if scope.unreachable:  # never a silent empty page: say what could not be read
            base["unreachable"] = scope.unreachable
        if not scope.sources:  # nothing to search: say why and how to fix it
            empty = {**base, "results": [], "count": 0, **self._nothing_hint(project, source)}
            return {**empty, "answer": "none"} if search_mode == "semantic" else empty
        deps = self._deps()
        extra: dict[str, Any] = {}
        if search_mode == "semantic":
            page: dict[str, Any] = {**base, "results": fs.semantic(deps, scope, query, limit)}
            page["count"] = len(page["results"])
            band = deps.policy.relevance_band
            out = page if band is None else search_page(
                page, band, explicit=explicit, warnings=search_warnings(deps.embedder))
        else:
            if search_mode == "filter":
                results = fs.filter_mode(deps, scope, query, limit)
            else:
                results, extra = fs.grep_mode(
                    deps, scope, query, limit, fixed=fixed, case_insensitive=case_insensitive
                )
            out = {**base, **extra, "results": results, "count": len(results)}
        if not out["results"] and (never := [r.name for r in scope.sources if not r.last_run]):
            # an empty page from a source nothing has indexed yet is not "nothing there"
            names = ", ".join(never[:10])
            out["hint"] = (f"not indexed yet: {names}; index with 'brain sync {never[0]}' "
                           "(the sources tool's sync action), then search again.")
        return out

    def _nothing_hint(self, project: str | None, source: str | None) -> dict[str, str]:
        """Why a search had no source to read: none added yet, or none of ``project`` (a
        folder added under another project is a common slip: say which and how to move it).
        Unreachable sources are listed by the page itself."""
        if source:
            return {}
        mine = self.registry.list(self.caller)
        if not mine:
            return {"hint": "no folder is indexed yet: add one with the sources tool's add "
                            "action or 'brain source add PATH'."}
        if not project or any(r.project == project for r in mine):
            return {}
        others = ", ".join(f"{r.name} (project {r.project})" for r in mine[:10])
        return {"hint": f"no source belongs to project {project!r}; yours: {others}. Search "
                        "without project, name one with source=..., or move it: 'brain "
                        f"source update NAME --project {project}' (the sources tool's update "
                        "action)."}

    def _deps(self) -> fs.SearchDeps:
        c = self.cfg
        return fs.SearchDeps(
            self.store,
            self.deps.embedder,
            self.deps.bm25,
            self.registry,
            c.policy,
            c.exact_max_points,
            c.grep_timeout_s,
        )

    def _scope(self, project: str | None, source: str | None, folder: str | None) -> fs.Scope:
        scope = self._scope_of(project, source, folder)
        scope.who = self.caller  # the store filter checks each point's owner too
        if scope.folder and not tenancy.path_readable(scope.folder, scope.who):
            raise Forbidden(f"{scope.folder} is another agent's private subtree; search "
                            "outside it, or as that agent.", path=scope.folder)
        return scope

    def _scope_of(self, project: str | None, source: str | None, folder: str | None) -> fs.Scope:
        recs = [self.get(source)] if source else self.registry.list(self.caller)
        if source:  # grep reads the live files: the root must still be what was added
            self.paths.check_source(recs[0].root)
        if project:
            recs = [r for r in recs if r.project == project]
        kept, unreachable = [], []
        for rec in recs:
            why = self.paths.unreachable(rec.root)
            if why is not None:
                unreachable.append({"name": rec.name, "kind": why[0], "reason": why[1]})
            else:
                kept.append(rec)
        recs = kept
        if not folder:
            return fs.Scope(recs, unreachable=unreachable)
        if not Path(folder).is_absolute():
            if len(recs) != 1:
                raise InvalidArgument(
                    "a relative folder needs source=...; or pass an absolute folder path.",
                    folder=folder,
                )
            real = resolve_in_source(Path(recs[0].root), folder)
            return fs.Scope(recs, rel_or_none(recs[0].root, real))
        real = Path(real_path(folder))
        owners = [r for r in recs if real == Path(r.root) or Path(r.root) in real.parents]
        if not owners:
            raise PathOutsideSource(
                f"{folder} is not inside any source in scope; add it with "
                "'brain source add' (the sources tool's add action) or pick a folder inside one.",
                path=folder,
            )
        rec = max(owners, key=lambda r: len(r.root))
        return fs.Scope([rec], rel_or_none(rec.root, real))


class _HasSources(Protocol):
    """The application as its start and stop hooks see it."""

    __dict__: dict[str, Any]

    @property
    def sources(self) -> SourcesService: ...


def start(brain: _HasSources) -> None:
    brain.sources.start()


def stop(brain: _HasSources) -> None:
    svc = brain.__dict__.get("sources")  # never build the service just to stop it
    if svc is not None:
        svc.stop()
        svc.registry.close()
