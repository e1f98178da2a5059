"""The enrichment job: LLM note construction, typed link decisions and memory evolution.

One job per note (``kind = "enrich"``); it reads the note's *current* payload when it runs:

1. construct (fast model): title, context, keywords, tags -> ``apply_fields(..., reembed)``;
2. permanent notes only: decide links (fast model) over the note's nearest permanent notes
   in its project -> typed links through ``memory.link``;
3. permanent notes only: evolution (hard model) of each *older* linked note whose
   similarity is at least ``evolve_threshold``: its context (and keywords/tags where the
   model says) is rewritten and re-embedded.

Graph mutations of the job go to the in-memory graph and are flushed once at the end.

Every step is idempotent, so re-running a job a killed process left half done finishes it
without duplicates: construct is skipped when the note is already ``enriched_by = llm:*``
(every user write resets it to ``heuristic``); links are a set keyed by target (``link``
never adds a target twice); an older note records the notes that evolved it
(``evolved_by``) and is not evolved twice by the same note.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from brain.errors import NoteNotFound
from brain.llm import prompts as note_builder
from brain.llm.prompts import Router
from brain.memory import NOTE_FILTER, MemoryService
from brain.memory.enrich import enrich
from brain.notes import RELATIONS, point_id
from brain.trust import tenancy
from brain.vector_store import Match, VectorStore

log = logging.getLogger(__name__)

Outcome = Literal["enriched", "skipped", "superseded"]


class StepFailed(Exception):
    """An LLM step gave nothing usable: heuristic enrichment stays, the job is retried."""


class Paused(Exception):
    """The daily token cap is reached: the job waits without spending an attempt."""


class Interrupted(Exception):
    """The service is stopping: the job goes back to pending and resumes at next start."""


@dataclass(slots=True)
class EnrichConfig:
    link_candidates: int = 5
    evolve_threshold: float = 0.6


class ChatRouter(Router, Protocol):
    """The chat models behind enrichment: ModelRouter, or OfflineRouter when none is set."""

    fast_model: str
    hard_model: str

    @property
    def configured(self) -> bool: ...

    def status(self) -> dict[str, Any]: ...


class Enricher:
    def __init__(
        self,
        memory: MemoryService,
        store: VectorStore,
        router: ChatRouter,
        config: EnrichConfig,
        *,
        save_graph: Callable[[], None],
        on_changed: Callable[[str], None] = lambda _z: None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.memory = memory
        self.store = store
        self.save_graph = save_graph
        self.stopping = stopping
        self.router = router
        self.cfg = config
        self.on_changed = on_changed
        self._lock = threading.Lock()
        self.counters = {
            "constructed": 0,
            "links_added": 0,
            "evolved": 0,
            "fallbacks": 0,
        }

    # -- the job ----------------------------------------------------------------------------
    def run(self, zk_id: str) -> Outcome:
        memory = self.memory
        try:
            note = memory.get_payload(zk_id)
        except NoteNotFound:
            return "skipped"  # forgotten or gone since the job was queued
        if note.get("memory_type") not in ("permanent", "fleeting"):
            return "skipped"  # archived: not worth tokens
        try:
            if not str(note.get("enriched_by", "")).startswith("llm:"):
                updated = self._construct(note)
                if updated is None:
                    return "superseded"
                note = updated
            if note["memory_type"] == "permanent":
                decided, similarity = self._links(note)
                self._evolve(note, decided, similarity)
        finally:
            self.save_graph()  # one flush of the job's graph mutations
        return "enriched"

    # -- steps ------------------------------------------------------------------------------
    def _construct(self, note: dict[str, Any]) -> dict[str, Any] | None:
        fields = note_builder.construct_note(self.router, note["content"])
        self._checkpoint()
        if fields is None:
            self._failed("construct_note")
        assert fields is not None
        memory = self.memory
        # Holding the write lock makes "content unchanged" and the write one step: an update
        # that landed meanwhile has its own pending job, which will enrich the new content.
        with memory._write_lock:
            try:
                current = memory.get_payload(note["zk_id"])
            except NoteNotFound:
                return None
            if current["content"] != note["content"]:
                return None
            heuristic = set(enrich(current["content"], current["note_kind"]).tags)
            given = [t for t in current.get("tags", []) if t not in heuristic]
            tags = list(dict.fromkeys([*given, *fields.tags]))[: max(5, len(given))]
            updated = memory.apply_fields(
                note["zk_id"],
                {
                    "title": fields.title,
                    "context": fields.context,
                    "keywords": fields.keywords,
                    "tags": tags or current.get("tags", []),
                    "enriched_by": f"llm:{self.router.fast_model}",
                },
                reembed=True,
            )
        self._count("constructed")
        self.on_changed(note["zk_id"])
        return updated

    def _links(self, note: dict[str, Any]) -> tuple[list[tuple[str, str]], dict[str, float]]:
        store = self.store
        pts = store.retrieve([point_id(note["zk_id"])], with_vectors=True)
        if not pts or pts[0].dense is None:
            return [], {}
        flt = NOTE_FILTER.and_(Match("project", note["project"]), Match("memory_type", "permanent"),
                               *tenancy.conditions(self.memory.identity),
                               *tenancy.linkable(note.get("visibility", "shared")))
        hits = store.query_dense(pts[0].dense, flt, self.cfg.link_candidates + 1)
        hits = [h for h in hits if h.payload.get("zk_id") != note["zk_id"]]
        hits = hits[: self.cfg.link_candidates]
        if not hits:
            return [], {}
        similarity = {h.payload["zk_id"]: h.score for h in hits}
        decided = note_builder.decide_links(self.router, note, [h.payload for h in hits])
        self._checkpoint()
        if decided is None:
            self._failed("decide_links")
        assert decided is not None
        types = note.get("link_types", {})
        for dst, relation in decided:
            relation = relation if relation in RELATIONS else "related"
            if dst in note.get("links", []) and types.get(dst) == relation:
                continue  # already there (a re-run of a half-finished job)
            try:
                self.memory.link(note["zk_id"], dst, relation)
            except NoteNotFound:
                continue
            self._count("links_added")
        if decided:
            self.on_changed(note["zk_id"])
            for dst, _ in decided:
                self.on_changed(dst)
        return decided, similarity

    def _evolve(
        self,
        note: dict[str, Any],
        decided: list[tuple[str, str]],
        similarity: dict[str, float],
    ) -> None:
        memory = self.memory
        for dst, _relation in decided:
            if similarity.get(dst, 0.0) < self.cfg.evolve_threshold:
                continue
            try:
                old = memory.get_payload(dst)
            except NoteNotFound:
                continue
            if float(old.get("created_ts", 0.0)) >= float(note.get("created_ts", 0.0)):
                continue  # only strictly older notes evolve (never both of a pair)
            if note["zk_id"] in old.get("evolved_by", []):
                continue
            evolution = note_builder.evolve_context(self.router, note, old)
            self._checkpoint()
            if evolution is None:
                self._fallback()
                continue  # evolution is best effort: the job still completes
            fields: dict[str, Any] = {
                "context": evolution.context,
                "evolved_by": [*old.get("evolved_by", []), note["zk_id"]][-50:],
            }
            if evolution.keywords:
                fields["keywords"] = evolution.keywords
            if evolution.tags:
                fields["tags"] = evolution.tags
            memory.apply_fields(dst, fields, reembed=True)
            self._count("evolved")
            self.on_changed(dst)

    # -- accounting -------------------------------------------------------------------------
    def _checkpoint(self) -> None:
        """No store write after close began: the store may already be closed."""
        if self.stopping():
            raise Interrupted("service stopping")

    def _failed(self, step: str) -> None:
        self._fallback()
        if self.router.status()["paused_by_cap"]:
            raise Paused(f"{step}: daily token cap reached")
        raise StepFailed(f"{step}: no usable reply ({self.router.status()['last_error']})")

    def _fallback(self) -> None:
        self._count("fallbacks")
        if self.router.status()["paused_by_cap"]:
            raise Paused("daily token cap reached")

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] += n
