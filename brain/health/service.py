"""HealthService: stats, integrity scan, duplicates, hot files, GC and repair, per caller.

Every report covers what the caller may see (brain/trust/tenancy.py), optionally one project; a
scan ``everyone=True`` (the CLI and the scheduled GC: the process's own work) covers the
whole store. GC and repair are destructive and dry runs by default.

Runs never overlap per project: a GC or repair asked for while another holds the project
(or holds every project) gets ``ActionInProgress``; the scheduled GC that meets a manual run
skips and tries again at the scheduler's next tick. Every GC and repair run is logged with who
started it (the caller's identity, or ``schedule``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from brain.embedding.bm25 import BM25Encoder
from brain.errors import ActionInProgress, InvalidArgument
from brain.health import collection
from brain.health import gc as gc_mod
from brain.health.duplicates import duplicates as find_duplicates
from brain.health.hot_files import HotFiles
from brain.health.repair import Embedders, repair
from brain.health.scan import Records, ScanResult, scan
from brain.memory.graph import LinkGraph
from brain.trust import tenancy
from brain.trust.identity import Identity
from brain.vector_store import Filter, Match, MatchAny, VectorStore
from brain.vector_store.base import QUANTIZATION_MODES

log = logging.getLogger(__name__)

ALL = "*"  # the lock key of a run over every project
KIND_NAMES = ("note", "retired", "file", "chunk", "doc_chunk", "hype", "meta")
MAX_REPAIR = 100_000


@dataclass(frozen=True, slots=True)
class HealthConfig:
    sample_ids: int = 20
    duplicate_threshold: float = 0.97
    duplicates_max_points: int = 2000


class Progress(Protocol):
    def __call__(self, n: int) -> None: ...


@dataclass(frozen=True, slots=True)
class HealthDeps:
    store: VectorStore
    graph: LinkGraph
    bm25: BM25Encoder
    identity: Identity  # who acts outside a tool call
    records: Callable[[], Records]  # read fresh for each scan (sources.db, files, graph)
    embedders: Callable[[], Embedders]
    queues: Callable[[], dict[str, Any]]  # queue depths (agentic, sync, files)
    model: Callable[[], dict[str, Any]]  # active / pending model
    graph_changed: Callable[[], None]  # marks the graph cache dirty (store meta)
    save_graph: Callable[[], None]
    hot_files: HotFiles
    quantization: str = "none"  # [index] quantization: the mode the store should have
    # The store meta's record of the mode (read, and written after a switch).
    recorded_quantization: Callable[[], str | None] = lambda: None
    record_quantization: Callable[[str], None] = lambda mode: None


class HealthService:
    def __init__(self, deps: HealthDeps, cfg: HealthConfig) -> None:
        self.deps = deps
        self.cfg = cfg
        self.store = deps.store
        self._held: dict[str, str] = {}  # lock key -> who holds it
        self._lock = threading.Lock()

    @property
    def caller(self) -> Identity:
        return tenancy.caller(self.deps.identity)

    # ------------------------------------------------------------------ scope and lock
    def _scope(self, project: str | None, everyone: bool) -> tuple[Any, ...]:
        if project is not None and not project.strip():
            raise InvalidArgument("project is empty; name a project or leave it out",
                                  field="project")
        conds: tuple[Any, ...] = () if everyone else tenancy.conditions(self.caller)
        return conds + ((Match("project", project),) if project else ())

    @contextmanager
    def _exclusive(self, action: str, project: str | None, who: str) -> Iterator[None]:
        key = project or ALL
        with self._lock:
            clash = [k for k in self._held if k == key or ALL in (k, key)]
            if clash:
                raise ActionInProgress(
                    f"a {self._held[clash[0]]} is already running for "
                    f"{'every project' if clash[0] == ALL else 'project ' + repr(clash[0])}; "
                    "wait for it to finish and retry", project=project)
            self._held[key] = action
        try:
            log.info("health %s started by %s (project %s)", action, who, key)
            yield
        finally:
            with self._lock:
                self._held.pop(key, None)

    def _who(self, trigger: str) -> str:
        c = self.caller
        return trigger if trigger != "manual" else f"{c.user_id}/{c.agent_id}"

    # ------------------------------------------------------------------ reports
    def stats(self, project: str | None = None) -> dict[str, Any]:
        """Cheap counts: points per kind, models, queue depths. No full pass."""
        scope = self._scope(project, False)
        kinds = {k: self.store.count(Filter(must=(*scope, Match("kind", k))))
                 for k in KIND_NAMES if k != "meta"}
        total = self.store.count(Filter(must=scope) if scope else None)
        kinds["other"] = max(0, total - sum(kinds.values()))
        forgotten = self.store.count(Filter(must=(*scope, Match("kind", "note"),
                                                  Match("forgotten", True))))
        fleeting = self.store.count(Filter(must=(*scope, Match("kind", "note"),
                                                 MatchAny("memory_type", ("fleeting",)))))
        return {"project": project, "points": total, "by_kind": kinds,
                "notes": {"forgotten": forgotten, "fleeting": fleeting},
                "model": self.deps.model(), "queues": self.deps.queues(),
                "hot_files": self.deps.hot_files.report(self.caller, project)["count"]}

    def _scan(self, project: str | None, everyone: bool,
              progress: Progress | None = None) -> ScanResult:
        return scan(self.store, self.deps.records(), self._scope(project, everyone),
                    self.deps.bm25, sample=self.cfg.sample_ids, everyone=everyone,
                    progress=progress)

    def scan(self, project: str | None = None, *, everyone: bool = False,
             progress: Progress | None = None) -> dict[str, Any]:
        """The integrity scan (read-only): counts and sample ids of each kind of damage."""
        return {"project": project, **self._scan(project, everyone, progress).report()}

    def duplicates(self, project: str | None = None, threshold: float | None = None,
                   max_points: int | None = None, *, everyone: bool = False,
                   progress: Progress | None = None) -> dict[str, Any]:
        t = self.cfg.duplicate_threshold if threshold is None else float(threshold)
        if not 0 < t <= 1:
            raise InvalidArgument(f"threshold={t} is outside (0, 1]", field="threshold")
        return {"project": project, **find_duplicates(
            self.store, self._scope(project, everyone), threshold=t,
            max_points=max_points or self.cfg.duplicates_max_points, progress=progress)}

    def hot_files(self, project: str | None = None, *, everyone: bool = False) -> dict[str, Any]:
        return {"project": project,
                **self.deps.hot_files.report(None if everyone else self.caller, project)}

    # ------------------------------------------------------------------ destructive
    def gc(self, dry_run: bool = True, project: str | None = None,
           expect: Sequence[str] | None = None, *, everyone: bool = False,
           trigger: str = "manual", progress: Progress | None = None) -> dict[str, Any]:
        """Delete orphan points; ``expect`` (a dry run's ids) bounds what is deleted."""
        who = self._who(trigger)
        with self._exclusive("gc", project, who):
            res = self._scan(project, everyone, progress)
            out = gc_mod.collect(self.store, res, dry_run=dry_run, expect=expect)
        log.info("health gc by %s (project %s): %s %d orphan points", who, project or ALL,
                 "would delete" if dry_run else "deleted", out["count"])
        return {"project": project, "started_by": who, **out}

    def repair(self, dry_run: bool = True, project: str | None = None, limit: int = 10_000,
               *, everyone: bool = False, trigger: str = "manual",
               progress: Progress | None = None) -> dict[str, Any]:
        if not 1 <= limit <= MAX_REPAIR:
            raise InvalidArgument(f"limit={limit} is outside 1..{MAX_REPAIR}", field="limit")
        who = self._who(trigger)
        with self._exclusive("repair", project, who):
            res = self._scan(project, everyone)
            out = repair(self.store, self.deps.graph, self.deps.bm25, self.deps.embedders(),
                         res, dry_run=dry_run, limit=limit, on_batch=progress)
            if not dry_run:
                self.deps.graph_changed()  # the cache is saved with a new seq
                self.deps.save_graph()
        log.info("health repair by %s (project %s): dry_run=%s %s", who, project or ALL,
                 dry_run, {k: v for k, v in out.items() if k != "not_repaired"})
        return {"project": project, "started_by": who, **out}

    # ------------------------------------------------------------------ collection
    def collection(self, project: str | None = None, *,
                   everyone: bool = False) -> dict[str, Any]:
        """Read-only: payload indexes missing or configured differently, quantization against
        the setting, points missing their BM25 vector (those counted in the caller's scope)."""
        d = self.deps
        return {"project": project, **collection.report(
            self.store, self._scope(project, everyone), d.bm25, d.quantization,
            d.recorded_quantization())}

    def rebuild_indexes(self, dry_run: bool = True, *, trigger: str = "manual",
                        progress: Progress | None = None) -> dict[str, Any]:
        """Create again, with its declared schema, each payload index that is missing or
        configured differently. The whole store: it holds every project."""
        who = self._who(trigger)
        with self._exclusive("rebuild_indexes", None, who):
            out = collection.rebuild_indexes(self.store, dry_run, progress)
        log.info("health rebuild_indexes by %s: dry_run=%s %s", who, dry_run,
                 out["rebuilt"] if not dry_run else out["count"])
        return {"started_by": who, **out}

    def apply_quantization(self, mode: str | None = None, dry_run: bool = True, *,
                           trigger: str = "manual") -> dict[str, Any]:
        """Switch the store's quantization to ``mode`` (default: the setting) and record it
        in the store meta. Rebuilds the store's segments: seconds to minutes."""
        target = self.deps.quantization if mode is None else mode
        if target not in QUANTIZATION_MODES:
            raise InvalidArgument(f"mode={target!r} is not one of {', '.join(QUANTIZATION_MODES)}",
                                  field="mode")
        who = self._who(trigger)
        with self._exclusive("quantization", None, who):
            current = self.store.quantization()
            out: dict[str, Any] = {"dry_run": dry_run, "from": current, "to": target,
                                   "started_by": who}
            state = collection.quantization_state(self.store, target,
                                                  self.deps.recorded_quantization())
            needed = bool(state["differs"] or state.get("incomplete"))
            if current is None:
                out["note"] = state["note"]
            if dry_run:
                return {**out, "would_change": needed}
            if needed or current is None:  # local mode: NotSupported says what to do
                out.update(self.store.set_quantization(target))
            out["changed"] = needed
            self.deps.record_quantization(target)
        log.info("health quantization by %s: %s -> %s (%s)", who, current, target,
                 {k: v for k, v in out.items() if k not in ("from", "to", "started_by")})
        return out

    def scheduled_gc(self) -> dict[str, Any]:
        """The GC worker's run: every project, every owner. While a manual run holds a
        project it skips, and the scheduler's next tick tries again."""
        try:
            return self.gc(dry_run=False, everyone=True, trigger="schedule")
        except ActionInProgress as exc:
            log.info("scheduled gc skipped: %s", exc.message)
            return {"skipped": True, "reason": exc.message, "retry_next_tick": True}
