"""Selective forgetting: decay scores, stale-note archival, salience decay and reclamation.

The decay score of a note is ``0.6 * recency + 0.4 * importance``, both in [0, 1]:

- ``recency = 0.5 ** (idle_days / stale_days)``: ``idle_days`` counts from the last access
  (or from creation when the note was never accessed). A note untouched for exactly
  ``stale_days`` (45 by default) has recency 0.5.
- ``importance = min(1, log(1 + access_count) / log(1 + importance_cap))``: log scale, so the
  first accesses count most; ``importance_cap`` (10) accesses reach 1.

So a never-accessed note idle for exactly 45 days scores exactly 0.3, the archival threshold,
and is kept; one second later it is below and (idle > 45 days, < 2 accesses) archived.

``archive_stale_notes`` archives (never deletes) notes that are idle for more than
``stale_days`` AND have fewer than ``stale_accesses`` accesses AND score below
``score_threshold``. Pinned notes and the active session handoff never archive.

Salience (the ``min_salience`` filter) halves every ``half_life_days`` of no access,
computed when it is read (brain/memory/salience.py), never by rewriting notes;
``MemoryService.stamp_access`` boosts it on each access. The ``decay`` worker only re-keys
the notes' ``salience_key`` when the half-life changed (or for a store from before keys).
Reclamation turns forgotten notes past their grace period into payload-only ``retired``
points, so their ids stay taken and are never reused.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from brain.clock import Clock, iso
from brain.errors import InvalidArgument
from brain.memory import MemoryService, hype, salience
from brain.memory.graph import LinkGraph
from brain.notes import point_id
from brain.store.meta import StoreMeta
from brain.trust import tenancy
from brain.vector_store import Filter, Match, MatchAny, Point, Range, VectorStore, scroll_all

log = logging.getLogger(__name__)

DAY = 86_400.0
RECENCY_WEIGHT = 0.6
IMPORTANCE_WEIGHT = 0.4
LIVE_TYPES = ("permanent", "fleeting")
LIST_CAP = 200


@dataclass(frozen=True, slots=True)
class DecayPolicy:
    stale_days: float = 45.0
    stale_accesses: int = 2
    score_threshold: float = 0.3
    half_life_days: float = 30.0
    importance_cap: int = 10
    grace_days: float = 7.0


@dataclass(frozen=True, slots=True)
class Score:
    score: float
    recency: float
    importance: float
    idle_s: float


def decay_score(payload: dict[str, Any], now_ts: float, policy: DecayPolicy) -> Score:
    idle = max(0.0, now_ts - salience.last_touch_ts(payload))
    recency = 0.5 ** (idle / (policy.stale_days * DAY))
    accesses = max(0, int(payload.get("access_count") or 0))
    importance = min(1.0, math.log1p(accesses) / math.log1p(policy.importance_cap))
    score = RECENCY_WEIGHT * recency + IMPORTANCE_WEIGHT * importance
    return Score(score, recency, importance, idle)


LIVE_FILTER = Filter(must=(Match("kind", "note"), MatchAny("memory_type", LIVE_TYPES)))
NOTE_POINTS = Filter(must=(Match("kind", "note"),))


class DecayService:
    def __init__(
        self,
        memory: MemoryService,
        store: VectorStore,
        graph: LinkGraph,
        meta: StoreMeta,
        clock: Clock,
        policy: DecayPolicy | Callable[[], DecayPolicy] | None = None,
    ) -> None:
        self.memory = memory
        self.store = store
        self.graph = graph
        self.meta = meta
        self.clock = clock
        self._policy = policy if policy is not None else DecayPolicy()

    @property
    def policy(self) -> DecayPolicy:
        """The policy given, or the one its source gives now (settings are read on each use)."""
        return self._policy if isinstance(self._policy, DecayPolicy) else self._policy()

    def _now(self) -> datetime:
        return self.clock.now()

    def _scan(
        self, page_size: int, *, unpinned: bool, everyone: bool = False
    ) -> Iterator[dict[str, Any]]:
        """Live notes, paged: the caller's own (tenancy), or ``everyone``'s for the
        process's own upkeep (workers, the weekly CLI routine), never for a tool."""
        if not isinstance(page_size, int) or page_size < 1:
            raise InvalidArgument("page_size must be a positive integer", field="page_size")
        flt = LIVE_FILTER
        if not everyone:
            flt = flt.and_(*tenancy.conditions(self.memory.identity))
        # forgotten / pinned are checked here, not in the filter: boolean matches are not
        # reliable on every backend (qdrant-edge-py 0.9 turns True into 1).
        self.memory.flush_stamps()  # access counts decide archival
        for pt in scroll_all(self.store, flt, page=page_size):
            p = pt.payload
            if not p.get("forgotten") and not (unpinned and p.get("pinned")):
                yield p

    def is_stale(self, payload: dict[str, Any], s: Score) -> bool:
        p = self.policy
        return (
            not payload.get("pinned")
            and payload.get("thread_state") != "active"
            and s.idle_s > p.stale_days * DAY
            and int(payload.get("access_count") or 0) < p.stale_accesses
            and s.score < p.score_threshold
        )

    # ------------------------------------------------------------------ archival
    def archive_stale_notes(
        self, dry_run: bool = True, page_size: int = 512, *, everyone: bool = False
    ) -> dict[str, Any]:
        """Archive every stale note of the caller (see the module doc; ``everyone``: of
        every user, for the weekly routine), paging through the store."""
        now_ts = self._now().timestamp()
        stale: list[dict[str, Any]] = []
        scanned = 0
        for payload in self._scan(page_size, unpinned=True, everyone=everyone):
            scanned += 1
            s = decay_score(payload, now_ts, self.policy)
            if self.is_stale(payload, s):
                stale.append(_row(payload, s))
        # Archive after the scan so changing payloads never disturbs the paging.
        archived = 0
        if not dry_run:
            for row in stale:
                self.memory.archive(row["zk_id"])
                archived += 1
            self.store.flush()
        return {
            "dry_run": dry_run,
            "scanned": scanned,
            "stale": len(stale),
            "archived": archived,
            "notes": stale[:LIST_CAP],
            "truncated": len(stale) > LIST_CAP,
            "rule": self.rule(),
        }

    def rule(self) -> str:
        p = self.policy
        return (
            f"idle > {p.stale_days:g} days AND access_count < {p.stale_accesses} AND "
            f"decay_score < {p.score_threshold:g}; pinned notes never archive"
        )

    def decay_report(self, limit: int = 20, page_size: int = 512) -> dict[str, Any]:
        """The ``limit`` live notes with the lowest decay scores (pinned ones included)."""
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 500:
            raise InvalidArgument("limit must be 1..500", field="limit")
        now_ts = self._now().timestamp()
        rows = []
        for payload in self._scan(page_size, unpinned=False):
            s = decay_score(payload, now_ts, self.policy)
            rows.append((s.score, payload["zk_id"], payload, s))
        lowest = heapq.nsmallest(limit, rows, key=lambda r: (r[0], r[1]))
        notes = [{**_row(p, s), "would_archive": self.is_stale(p, s)} for _, _, p, s in lowest]
        return {"notes": notes, "count": len(notes), "scanned": len(rows), "rule": self.rule()}

    # ------------------------------------------------------------------ workers
    def decay_salience(self, page_size: int = 512) -> dict[str, Any]:
        """Salience decays on read (brain/memory/salience.py): a normal pass writes nothing.

        The pass only re-keys, when the notes' ``salience_key`` was computed with another
        half-life than ``half_life_days`` (the setting changed), or the store has not
        recorded one (a store from before keys: this is its migration; a new store's notes
        already carry the right key, so its first pass only reads). Re-keying writes
        ``salience_key`` alone, for the notes whose key differs, then records the half-life.
        A second, read-only scan catches a note written or accessed with the old half-life
        while the first one ran."""
        target = self.policy.half_life_days
        recorded = self.meta.salience_half_life_days
        if recorded == target:
            return {"scanned": 0, "decayed": 0, "rekeyed": 0, "half_life_days": target}
        scanned, rekeyed = self._rekey(target * DAY, page_size)
        self.meta.set(salience_half_life_days=target)  # new writes and stamps key with it
        more = self._rekey(target * DAY, page_size)
        if rekeyed + more[1]:
            self.store.flush()
        log.info("salience keys: %d of %d notes re-keyed for a half-life of %g days "
                 "(was %s)", rekeyed + more[1], scanned, target, recorded)
        return {"scanned": scanned, "decayed": 0, "rekeyed": rekeyed + more[1],
                "half_life_days": target}

    def _rekey(self, half_life_s: float, page_size: int) -> tuple[int, int]:
        """(notes scanned, notes whose salience_key was written): every live, archived or
        forgotten note, so a restored one is keyed too."""
        if not isinstance(page_size, int) or page_size < 1:
            raise InvalidArgument("page_size must be a positive integer", field="page_size")
        self.memory.flush_stamps()
        scanned = written = 0
        due: list[str] = []
        for pt in scroll_all(self.store, NOTE_POINTS, page=page_size):
            scanned += 1
            if salience.needs_key(pt.payload, half_life_s):
                due.append(pt.id)
        # Written after the scan, so changing payloads never disturbs the paging.
        for i in range(0, len(due), page_size):
            written += self.memory.stamps.rekey(self.store, due[i : i + page_size], half_life_s)
        return scanned, written

    def reclaim_forgotten(self) -> dict[str, Any]:
        """Remove forgotten notes past the grace period for good; their ids stay retired."""
        now = self._now()
        cutoff = now.timestamp() - self.policy.grace_days * DAY
        # forgotten_ts > 0 only while a note is forgotten (restore resets it to 0).
        flt = Filter(must=(Match("kind", "note"), Range("forgotten_ts", gt=0.0, lt=cutoff)))
        due = [
            p.payload["zk_id"]
            for p in scroll_all(self.store, flt)
            if p.payload.get("forgotten") is True
        ]
        retired = []
        # The memory service's write lock keeps a concurrent restore from racing the removal.
        with self.memory._write_lock:
            for zk in due:
                pts = self.store.retrieve([point_id(zk)])
                if not pts or not pts[0].payload.get("forgotten"):
                    continue  # restored meanwhile
                self._unlink_everywhere(zk)
                hype.drop(self.store, [zk])
                tomb = {
                    "kind": "retired",
                    "zk_id": zk,
                    "retired_at": iso(now),
                    "retired_ts": now.timestamp(),
                }
                self.store.upsert([Point(point_id(zk), tomb)])
                self.graph.remove_node(zk)
                retired.append(zk)
        if retired:
            self.store.flush()
        return {"retired": retired, "count": len(retired)}

    def _unlink_everywhere(self, zk: str) -> None:
        flt = Filter(must=(Match("kind", "note"), Match("links", zk)))
        for pt in list(scroll_all(self.store, flt)):
            p = pt.payload
            links = [z for z in p.get("links", []) if z != zk]
            types = {k: v for k, v in p.get("link_types", {}).items() if k != zk}
            self.meta.mark_graph_dirty()
            self.store.set_payload([pt.id], {"links": links, "link_types": types})
            self.graph.set_links(p["zk_id"], links, types)


def _row(payload: dict[str, Any], s: Score) -> dict[str, Any]:
    return {
        "zk_id": payload["zk_id"],
        "title": payload.get("title", ""),
        "project": payload.get("project"),
        "note_kind": payload.get("note_kind"),
        "memory_type": payload.get("memory_type"),
        "pinned": bool(payload.get("pinned")),
        "access_count": int(payload.get("access_count") or 0),
        "idle_days": round(s.idle_s / DAY, 3),
        "decay_score": round(s.score, 6),
        "recency": round(s.recency, 6),
        "importance": round(s.importance, 6),
    }
