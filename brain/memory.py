"""The memory service: writing, finding, linking and the lifecycle of notes.

Everything here is plain, blocking Python; the MCP layer runs it in worker threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

from brain import tenancy
from brain.bm25 import BM25Encoder
from brain.clock import Clock, iso
from brain.embedder import Embedder, embed_passages
from brain.enrich import enrich
from brain.errors import Conflict, InvalidArgument, NoteNotFound
from brain.graph import LinkGraph
from brain.identity import Identity
from brain.limits import (
    MAX_AGE_DAYS,
    MAX_FILTER_VALUES,
    MAX_FILTERS,
    MAX_LABEL_CHARS,
    MAX_QUERY_CHARS,
    check_filter_key,
    check_filter_value,
    check_number,
    check_tags,
    check_text,
)
from brain.notes import (
    CONTEXTUAL_KINDS,
    MEMORY_TYPES,
    NOTE_KINDS,
    RELATIONS,
    ZK_ID_RE,
    new_zk_id,
    normalise_zk_id,
    point_id,
    public_note,
)
from brain.redact import redact, redact_tags, redact_tree
from brain.rerank import Reranker
from brain.retrieval import Candidate, hybrid, looks_like_code
from brain.store_meta import StoreMeta
from brain.vector_store import (
    Filter,
    HasId,
    Match,
    MatchAny,
    Point,
    Range,
    VectorStore,
    scroll_all,
)

log = logging.getLogger(__name__)

NOTE_FILTER = Filter(must=(Match("kind", "note"),), must_not=(Match("forgotten", True),))
MAX_TOP_K = 100


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    max_content_chars: int = 50_000
    link_threshold: float = 0.55
    link_candidates: int = 5
    redact_secrets: bool = True
    default_project: str = "general"
    fusion: str = "dbsf"
    dense_weight: float = 0.45
    code_dense_weight: float | None = 0.8
    pool_long_text: bool = True
    rrf_k: int = 60
    candidates: int = 50
    graph_decay: float = 0.85
    related_decay: float = 0.5
    rerank_candidates: int = 30
    exact_max_points: int = 20_000
    user_id: str = "default"
    agent_id: str = "default"


@dataclass(slots=True)
class RecallFilter:
    """Per-request narrowing of a search; every field is AND-combined."""

    project: str | None = None
    include_fleeting: bool = False
    include_contextual: bool = False
    note_kinds: Sequence[str] = ()
    tags: Sequence[str] = ()
    max_age_days: float | None = None
    min_salience: float | None = None
    confidence_min: float | None = None
    fingerprint_match: bool = True
    custom: Sequence[dict[str, Any]] = ()
    include_siblings: bool = False
    all_projects: bool = False


@dataclass(slots=True)
class WriteResult:
    note: dict[str, Any]
    redacted: tuple[str, ...] = ()
    linked: list[dict[str, str]] = field(default_factory=list)


def _require_text(value: str, name: str, cap: int) -> str:
    # Blank means no visible character: NUL-only or whitespace-only text is refused too.
    return check_text(value, name, cap, "Split it into several notes, or raise "
                      "BRAIN__MEMORY__MAX_CONTENT_CHARS.")


def _require_enum(value: str, allowed: Sequence[str], name: str) -> str:
    if value not in allowed:
        raise InvalidArgument(
            f"{name}={value!r} is not valid; use one of: {', '.join(allowed)}", field=name
        )
    return value


def check_top_k(top_k: int, upper: int = MAX_TOP_K) -> int:
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= upper:
        raise InvalidArgument(f"top_k={top_k!r} is out of range: use 1..{upper}", field="top_k")
    return top_k


def check_project(project: str) -> str:
    project = (project or "").strip()
    if not project or len(project) > MAX_LABEL_CHARS:
        raise InvalidArgument(
            f"project must be a non-empty name of at most {MAX_LABEL_CHARS} characters",
            field="project")
    return project


def embed_text(payload: dict[str, Any]) -> str:
    """What the dense vector of a note encodes: content plus its context (A-MEM), when the
    context says something (given by the caller or written by the LLM); the heuristic
    placeholder ("Decision note in shop") would only add noise."""
    text = payload["content"]
    context = payload.get("context", "")
    meaningful = payload.get("context_by") == "caller" or not str(
        payload.get("enriched_by", "heuristic")).startswith("heuristic")
    return f"{text}\n{context}" if context and meaningful else text


def keyword_text(payload: dict[str, Any]) -> str:
    """What the BM25 vector of a note indexes: title, content, keywords and tags."""
    parts = [payload.get("title", ""), payload["content"], " ".join(payload.get("keywords", [])),
             " ".join(payload.get("tags", []))]
    return "\n".join(p for p in parts if p)


class MemoryService:
    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        graph: LinkGraph,
        meta: StoreMeta,
        config: MemoryConfig,
        clock: Clock | None = None,
        bm25: BM25Encoder | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.graph = graph
        self.meta = meta
        self.cfg = config
        self.clock = clock or Clock()
        self.bm25 = bm25 or BM25Encoder()
        self.reranker: Reranker | None = None  # set by Brain.open when [rerank] is enabled
        self._write_lock = threading.RLock()
        self._stamp_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending_stamps: dict[str, tuple[int, str, float, float]] = {}
        # Called after a note is durably written: (event, payload). The enrichment queue and
        # the Obsidian mirror subscribe here.
        self.listeners: list[Callable[[str, dict[str, Any]], None]] = []

    # ------------------------------------------------------------------ helpers
    @property
    def identity(self) -> Identity:
        return tenancy.caller(Identity(self.cfg.user_id, self.cfg.agent_id))

    def _emit(self, event: str, payload: dict[str, Any]) -> None:
        for listener in self.listeners:
            try:
                listener(event, payload)
            except Exception:  # noqa: BLE001 - a listener never breaks a write
                log.exception("listener failed on %s", event)

    def embed_notes(self, payloads: Sequence[dict[str, Any]]) -> np.ndarray:
        """Dense vectors of notes (embed_text of each; long ones pooled over the window)."""
        return embed_passages(self.embedder, [embed_text(p) for p in payloads],
                              self.cfg.pool_long_text)

    def _vectors(self, payload: dict[str, Any]) -> tuple[list[float], Any]:
        dense = self.embed_notes([payload])[0]
        return dense.tolist(), self.bm25.document(keyword_text(payload))

    def _now(self) -> tuple[str, float]:
        now = self.clock.now()
        return iso(now), now.timestamp()

    def get_payload(self, zk_id: str, *, include_forgotten: bool = False) -> dict[str, Any]:
        self.flush_stamps()
        if not isinstance(zk_id, str) or not ZK_ID_RE.match(normalise_zk_id(zk_id)):
            raise InvalidArgument(f"{zk_id!r} is not a note id: ids look like ZK-1A2B3C4D",
                                  field="zk_id")
        zk_id = normalise_zk_id(zk_id)
        pts = self.store.retrieve([point_id(zk_id)])
        if not pts or pts[0].payload.get("kind") != "note":
            raise NoteNotFound(f"no note {zk_id}: check the id (search_memory lists ids)",
                               zk_id=zk_id)
        payload = pts[0].payload
        if tenancy.in_call() and not self.visible(payload):
            # A caller with its own identity (HTTP token, proxied agent) never reaches
            # another user's notes or a sibling agent's private ones, even by id.
            raise NoteNotFound(f"no note {zk_id}: check the id (search_memory lists ids)",
                               zk_id=zk_id)
        if payload.get("forgotten") and not include_forgotten:
            raise NoteNotFound(f"note {zk_id} was forgotten; restore_note brings it back "
                               "within the grace period", zk_id=zk_id)
        return payload

    def _unused_id(self) -> str:
        while True:
            zk = new_zk_id()
            if not self.store.retrieve([point_id(zk)]):
                return zk

    def prepare_content(self, content: str, name: str = "content") -> tuple[str, tuple[str, ...]]:
        content = _require_text(content, name, self.cfg.max_content_chars)
        if not self.cfg.redact_secrets:
            return content, ()
        red = redact(content)
        return red.text, red.kinds

    # ------------------------------------------------------------------ writes
    def new_payload(
        self,
        content: str,
        project: str | None = None,
        memory_type: str = "permanent",
        note_kind: str = "general",
        tags: Sequence[str] | None = None,
        pinned: bool = False,
        visibility: str = "shared",
        context: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """A validated, redacted, heuristically enriched note payload (zk_id not yet drawn),
        and the kinds of secrets redacted. Shared by add and the bulk importer."""
        project = check_project(project or self.cfg.default_project)
        _require_enum(memory_type, ("fleeting", "permanent"), "memory_type")
        _require_enum(note_kind, NOTE_KINDS, "note_kind")
        tenancy.check_visibility(visibility)
        tags = check_tags(tags)
        content, redacted = self.prepare_content(content)
        if tags and self.cfg.redact_secrets:  # a tag is stored, indexed and exported too
            tags, tag_kinds = redact_tags(list(tags))
            redacted = tuple(sorted(set(redacted) | set(tag_kinds)))
        if context is not None and context.strip():
            context, more = self.prepare_content(context, "context")
            redacted = tuple(sorted(set(redacted) | set(more)))
        else:
            context = None
        enr = enrich(content, note_kind, project)
        now, ts = self._now()
        ident = self.identity
        payload: dict[str, Any] = {
            "kind": "note",
            "zk_id": "",
            "title": enr.title,
            "content": content,
            "is_code": looks_like_code(content),
            "context": context or enr.context,
            "context_by": "caller" if context else "heuristic",
            "keywords": enr.keywords,
            "tags": _merge_tags(list(tags or []), enr.tags),
            "links": [],
            "link_types": {},
            "memory_type": memory_type,
            "note_kind": note_kind,
            "pinned": bool(pinned),
            "project": project,
            "created": now,
            "updated": now,
            "created_ts": ts,
            "updated_ts": ts,
            "access_count": 0,
            "last_accessed": "",
            "last_accessed_ts": 0.0,
            "user_id": ident.user_id,
            "agent_id": ident.agent_id,
            "visibility": visibility,
            "salience": 1.0 if pinned else 0.5,
            "embed_model": self.meta.model,
            "enriched_by": "heuristic",
            "forgotten": False,
            **(extra or {}),
        }
        return payload, redacted

    def add(
        self,
        content: str,
        project: str | None = None,
        memory_type: str = "permanent",
        note_kind: str = "general",
        tags: Sequence[str] | None = None,
        pinned: bool = False,
        visibility: str = "shared",
        extra: dict[str, Any] | None = None,
        links: Sequence[tuple[str, str]] = (),
        autolink: bool = True,
        context: str | None = None,
    ) -> WriteResult:
        targets = []
        for target, relation in links:
            _require_enum(relation, RELATIONS, "relation")
            targets.append(self.get_payload(target))
        payload, redacted = self.new_payload(
            content, project, memory_type, note_kind, tags, pinned, visibility, context, extra)
        if not all(tenancy.may_link(payload, t) for t in targets):
            raise InvalidArgument("a shared note cannot link to a private one (its readers "
                                  "would learn the id); make this note private too",
                                  field="visibility")
        project = payload["project"]
        with self._write_lock:
            zk_id = self._unused_id()
            payload["zk_id"] = zk_id
            dense, sparse = self._vectors(payload)
            linked: list[dict[str, str]] = []
            for target, relation in links:
                payload["links"].append(target)
                payload["link_types"][target] = relation
            if memory_type == "permanent" and autolink:
                for hit in self._link_candidates(dense, project, zk_id, visibility):
                    z = hit.payload["zk_id"]
                    if z not in payload["links"]:
                        payload["links"].append(z)
                        payload["link_types"][z] = "related"
            if payload["links"]:
                self.meta.mark_graph_dirty()
            self.store.upsert([Point(point_id(zk_id), payload, dense, sparse)])
            if payload["links"]:
                linked = self._backlink(zk_id, payload)
            self.graph.upsert_node(zk_id, payload["title"], project)
            self._sync_graph(zk_id, payload)
        self._emit("added", payload)
        return WriteResult(public_note(payload), redacted, linked)

    def _tenancy(self) -> tuple[Any, ...]:
        """Conditions that keep the caller to what it may see (brain/tenancy.py)."""
        return tenancy.conditions(self.identity)

    def visible(self, payload: dict[str, Any]) -> bool:
        return tenancy.visible(payload, self.identity)

    def _link_candidates(
        self, dense: Sequence[float], project: str, exclude: str, visibility: str = "shared"
    ) -> list[Any]:
        flt = NOTE_FILTER.and_(Match("project", project), Match("memory_type", "permanent"),
                               *self._tenancy(), *tenancy.linkable(visibility))
        hits = self.store.query_dense(dense, flt, self.cfg.link_candidates + 1)
        return [h for h in hits if h.payload.get("zk_id") != exclude
                and h.score >= self.cfg.link_threshold][: self.cfg.link_candidates]

    def _backlink(self, zk_id: str, payload: dict[str, Any]) -> list[dict[str, str]]:
        """Make every link of ``zk_id`` bidirectional (same relation on the way back for
        symmetric ones, ``related`` for directed ones)."""
        linked = []
        self.meta.mark_graph_dirty()
        targets = self.store.retrieve([point_id(z) for z in payload["links"]])
        now, ts = self._now()
        for tgt in targets:
            p = tgt.payload
            relation = payload["link_types"].get(p["zk_id"], "related")
            linked.append({"zk_id": p["zk_id"], "relation": relation, "title": p.get("title", "")})
            if zk_id in p.get("links", []) or not tenancy.may_link(p, payload):
                continue
            back = relation if relation in ("related", "contradicts") else "related"
            new_links = [*p.get("links", []), zk_id]
            new_types = {**p.get("link_types", {}), zk_id: back}
            self.store.set_payload([tgt.id], {"links": new_links, "link_types": new_types})
            self._sync_graph(p["zk_id"], {**p, "links": new_links, "link_types": new_types})
        return linked

    def _sync_graph(self, zk_id: str, payload: dict[str, Any]) -> None:
        self.meta.mark_graph_dirty()
        self.graph.set_links(zk_id, list(payload.get("links", [])), dict(payload.get("link_types", {})))

    def link(self, src: str, dst: str, relation: str = "related") -> None:
        """Add one typed link src -> dst (and the way back)."""
        _require_enum(relation, RELATIONS, "relation")
        with self._write_lock:
            p = self.get_payload(src)
            if not tenancy.may_link(p, self.get_payload(dst)):
                return  # a shared note never names a private one
            links = list(p.get("links", []))
            types = dict(p.get("link_types", {}))
            if dst not in links:
                links.append(dst)
            types[dst] = relation
            self.meta.mark_graph_dirty()
            self.store.set_payload([point_id(src)], {"links": links, "link_types": types})
            new = {**p, "links": links, "link_types": types}
            self._sync_graph(src, new)
            self._backlink(src, new)

    def update(self, zk_id: str, new_content: str) -> WriteResult:
        content, redacted = self.prepare_content(new_content, "new_content")
        with self._write_lock:
            old = self.get_payload(zk_id)
            enr = enrich(content, old.get("note_kind", "general"), old.get("project", ""))
            now, ts = self._now()
            payload = {
                **old,
                "content": content,
                "is_code": looks_like_code(content),
                "title": enr.title,
                "keywords": enr.keywords,
                "tags": _merge_tags([t for t in old.get("tags", []) if t not in old.get("keywords", [])], enr.tags),
                "updated": now,
                "updated_ts": ts,
                "enriched_by": "heuristic",
                "embed_model": self.meta.model,
            }
            dense, sparse = self._vectors(payload)
            self.store.upsert([Point(point_id(payload["zk_id"]), payload, dense, sparse)])
            self.graph.upsert_node(payload["zk_id"], payload["title"], payload["project"])
        self._emit("updated", payload)
        return WriteResult(public_note(payload), redacted)

    def apply_fields(self, zk_id: str, fields: dict[str, Any], reembed: bool) -> dict[str, Any]:
        """Overwrite some fields of a note (enrichment, evolution); re-embed when asked."""
        if self.cfg.redact_secrets:  # an LLM's title, context or tags are text entering too
            fields = redact_tree(fields)
        with self._write_lock:
            old = self.get_payload(zk_id, include_forgotten=True)
            now, ts = self._now()
            if "content" in fields:
                fields = {**fields, "is_code": looks_like_code(str(fields["content"]))}
            payload = {**old, **fields, "updated": now, "updated_ts": ts}
            if reembed:
                dense, sparse = self._vectors(payload)
                payload["embed_model"] = self.meta.model
                self.store.upsert([Point(point_id(old["zk_id"]), payload, dense, sparse)])
            else:
                self.store.set_payload([point_id(old["zk_id"])], {**fields, "updated": now,
                                                                   "updated_ts": ts})
            if "title" in fields:
                self.graph.upsert_node(old["zk_id"], payload["title"], payload["project"])
        return payload

    def set_state(self, zk_id: str, **fields: Any) -> dict[str, Any]:
        """Set lifecycle fields without touching vectors or the updated stamp."""
        with self._write_lock:
            p = self.get_payload(zk_id, include_forgotten=True)
            self.store.set_payload([point_id(p["zk_id"])], fields)
            return {**p, **fields}

    def distill(self, zk_id: str) -> WriteResult:
        with self._write_lock:
            p = self.get_payload(zk_id)
            if p["memory_type"] != "fleeting":
                raise Conflict(f"note {p['zk_id']} is {p['memory_type']}, not fleeting: only "
                               "fleeting notes are distilled", zk_id=p["zk_id"])
            enr = enrich(p["content"], p["note_kind"], p["project"])
            fields = {"memory_type": "permanent", "title": enr.title, "keywords": enr.keywords,
                      "tags": _merge_tags(p.get("tags", []), enr.tags), "enriched_by": "heuristic"}
            payload = self.apply_fields(p["zk_id"], fields, reembed=True)
            dense = self.embed_notes([payload])[0].tolist()
            links = list(payload.get("links", []))
            types = dict(payload.get("link_types", {}))
            for hit in self._link_candidates(dense, payload["project"], p["zk_id"],
                                             payload.get("visibility", "shared")):
                z = hit.payload["zk_id"]
                if z not in links:
                    links.append(z)
                    types[z] = "related"
            linked: list[dict[str, str]] = []
            if links != payload.get("links", []):
                self.meta.mark_graph_dirty()
                self.store.set_payload([point_id(p["zk_id"])], {"links": links, "link_types": types})
                payload = {**payload, "links": links, "link_types": types}
                self._sync_graph(p["zk_id"], payload)
                linked = self._backlink(p["zk_id"], payload)
        self._emit("distilled", payload)
        return WriteResult(public_note(payload), (), linked)

    def forget(self, zk_id: str) -> dict[str, Any]:
        now, ts = self._now()
        p = self.set_state(zk_id, forgotten=True, forgotten_ts=ts, forgotten_at=now)
        self._emit("forgotten", p)
        return p

    def restore(self, zk_id: str) -> dict[str, Any]:
        with self._write_lock:
            p = self.get_payload(zk_id, include_forgotten=True)
            if p.get("forgotten"):
                p = self.set_state(p["zk_id"], forgotten=False, forgotten_ts=0.0, forgotten_at="")
                restored = "forgotten"
            elif p["memory_type"] == "archived":
                back = p.get("archived_from") or "permanent"
                p = self.set_state(p["zk_id"], memory_type=back, archived_at="")
                restored = "archived"
            else:
                raise Conflict(f"note {p['zk_id']} is neither archived nor forgotten; nothing "
                               "to restore", zk_id=p["zk_id"])
        self._emit("restored", p)
        return {**public_note(p), "restored_from": restored}

    def archive(self, zk_id: str) -> dict[str, Any]:
        now, _ = self._now()
        p = self.get_payload(zk_id)
        if p["memory_type"] == "archived":
            return p
        return self.set_state(zk_id, memory_type="archived", archived_from=p["memory_type"],
                              archived_at=now)

    # ------------------------------------------------------------------ reads
    def build_filter(self, rf: RecallFilter) -> Filter:
        must: list[Any] = []
        must_not: list[Any] = []
        # No search crosses projects unless asked: without a project, the default one.
        project = rf.project or (None if rf.all_projects else self.cfg.default_project)
        if project and not rf.all_projects:
            must.append(Match("project", project))
        types = ["permanent", "fleeting"] if rf.include_fleeting else ["permanent"]
        must.append(MatchAny("memory_type", tuple(types)))
        if not rf.include_contextual and not set(rf.note_kinds) & set(CONTEXTUAL_KINDS):
            must_not.append(MatchAny("note_kind", CONTEXTUAL_KINDS))
        if rf.note_kinds:
            for k in rf.note_kinds:
                _require_enum(k, NOTE_KINDS, "note_kind")
            must.append(MatchAny("note_kind", tuple(rf.note_kinds)))
        for tag in check_tags(list(rf.tags), "tags filter"):
            must.append(Match("tags", tag))
        if rf.max_age_days is not None:
            days = check_number(rf.max_age_days, "max_age_days", lo=0, hi=MAX_AGE_DAYS,
                                lo_open=True)
            since = self.clock.now() - timedelta(days=days)
            must.append(Range("created_ts", gte=since.timestamp()))
        if rf.min_salience is not None:
            must.append(Range("salience", gte=check_number(rf.min_salience, "min_salience",
                                                           lo=0, hi=1)))
        if rf.confidence_min is not None:  # applied after retrieval; checked here, before
            check_number(rf.confidence_min, "confidence_min", lo=-1, hi=1)
        if len(rf.custom) > MAX_FILTERS:
            raise InvalidArgument(f"at most {MAX_FILTERS} custom filters", field="custom")
        if rf.fingerprint_match:
            must.append(Match("embed_model", self.meta.model))
        # Private notes of sibling agents stay invisible unless asked for.
        must.extend(tenancy.conditions(self.identity, siblings=rf.include_siblings))
        for rule in rf.custom:
            must.append(_custom_condition(rule))
        base = NOTE_FILTER
        return Filter(must=base.must + tuple(must), must_not=base.must_not + tuple(must_not))

    def search(
        self,
        query: str,
        top_k: int = 5,
        rf: RecallFilter | None = None,
        stamp: bool = True,
        query_vector: Sequence[float] | None = None,
    ) -> list[dict[str, Any]]:
        query = _require_text(query, "query", MAX_QUERY_CHARS)
        check_top_k(top_k)
        rf = rf or RecallFilter()
        flt = self.build_filter(rf)
        qvec = query_vector if query_vector is not None else self.embedder.embed_query(query).tolist()
        cands = self.recall(qvec, query, flt, top_k, rf.confidence_min)
        if stamp:
            self.stamp_access([c.payload["zk_id"] for c in cands])
        return [_hit(c) for c in cands]

    def recall(
        self,
        qvec: Sequence[float],
        query: str,
        flt: Filter,
        limit: int,
        confidence_min: float | None = None,
    ) -> list[Candidate]:
        """The fused (and reranked) candidates of one search, without those whose dense
        similarity is below ``confidence_min`` (a hit the dense leg did not see has none)."""
        cands = self._retrieve(qvec, query, flt, limit)
        if confidence_min is None:
            return cands
        return [c for c in cands if c.similarity is not None and c.similarity >= confidence_min]

    def _retrieve(self, qvec: Sequence[float], query: str, flt: Filter, limit: int) -> list[Candidate]:
        # Notes are searched through the index: the bench's "no exact search" ablation gave the
        # same recall, while exact search of a filtered scope cost ~8 ms more at 10k notes.
        reranker = self.reranker
        n = max(limit, self.cfg.rerank_candidates) if reranker is not None else limit
        cands = hybrid(
            self.store, qvec, self.bm25.query(query), flt, n,
            candidates=self.cfg.candidates, method=self.cfg.fusion,
            dense_weight=self.cfg.dense_weight, rrf_k=self.cfg.rrf_k,
            code_dense_weight=self.cfg.code_dense_weight,
        )
        if reranker is not None and len(cands) > 1:
            scores = reranker.scores(query, [embed_text(c.payload) for c in cands])
            for c, score in zip(cands, scores, strict=True):
                c.rerank = score
            cands.sort(key=lambda c: (-(c.rerank or 0.0), c.id))
        return cands[:limit]

    def stamp_access(self, zk_ids: Sequence[str], boost: float = 0.05) -> None:
        """access_count + 1 and last_accessed = now on each note (decay tracking).

        Stamps are coalesced in memory and written by :meth:`flush_stamps` (a background
        thread every 0.2 s, and every reader of access data), so a search does not pay one
        store write per hit: that was ~10 ms of a 35 ms search at 10 hits."""
        if not zk_ids:
            return
        now, ts = self._now()
        with self._pending_lock:
            for z in dict.fromkeys(zk_ids):
                n = self._pending_stamps.get(z, (0, "", 0.0, 0.0))[0]
                self._pending_stamps[z] = (n + 1, now, ts, boost)

    def flush_stamps(self) -> int:
        """Write the coalesced access stamps; returns how many notes were stamped."""
        with self._stamp_lock:
            with self._pending_lock:
                pending, self._pending_stamps = self._pending_stamps, {}
            if not pending:
                return 0
            for pt in self.store.retrieve([point_id(z) for z in pending]):
                p = pt.payload
                n, now, ts, boost = pending[p["zk_id"]]
                self.store.set_payload([pt.id], {
                    "access_count": int(p.get("access_count", 0)) + n,
                    "last_accessed": now,
                    "last_accessed_ts": ts,
                    "salience": min(1.0, float(p.get("salience", 0.5)) + boost * n),
                })
            return len(pending)

    def related(self, zk_id: str, depth: int = 1) -> dict[str, Any]:
        if not isinstance(depth, int) or not 1 <= depth <= 3:
            raise InvalidArgument("depth must be 1, 2 or 3", field="depth")
        root = self.get_payload(zk_id)
        found = self._walk(root["zk_id"], depth)
        out = [{**public_note(p), "hops": hops, "via": via, "relation": rel}
               for hops, via, rel, p in found.values() if not p.get("forgotten")]
        out.sort(key=lambda n: (n["hops"], n["zk_id"]))
        return {"note": public_note(root), "related": out}

    def _walk(self, start: str, depth: int) -> dict[str, tuple[int, str, str, dict[str, Any]]]:
        """Notes within ``depth`` hops of ``start`` (either direction), stepping only on notes
        the caller may see: a path through a sibling's private note would name it (via)
        and reveal what it links."""
        found: dict[str, tuple[int, str, str, dict[str, Any]]] = {}
        frontier = [start]
        for hop in range(1, depth + 1):
            offers: dict[str, tuple[int, str, str]] = {}
            for node in frontier:
                for nb, rel, _ in self.graph.neighbours(node):
                    if nb != start and nb not in found and nb not in offers:
                        offers[nb] = (hop, node, rel)
            frontier = []
            for pt in self.store.retrieve([point_id(z) for z in offers]):
                p = pt.payload
                if p.get("kind") == "note" and self.visible(p):
                    found[p["zk_id"]] = (*offers[p["zk_id"]], p)
                    frontier.append(p["zk_id"])
        return found

    def notes(self, flt: Filter | None = None, page: int = 512) -> Any:
        """Every note (forgotten ones included) matching ``flt``, paged."""
        self.flush_stamps()
        base = Filter(must=(Match("kind", "note"),))
        if flt is not None:
            base = Filter(must=base.must + flt.must, must_not=flt.must_not, should=flt.should)
        return (p.payload for p in scroll_all(self.store, base, page=page))

    def stats(self) -> dict[str, Any]:
        """Counts of the calling tool's notes (another user's are none of its business); the
        CLI, outside any call, counts every note."""
        scope = self._tenancy() if tenancy.in_call() else ()
        mine = Filter(must=(Match("kind", "note"), *scope))
        by_type = {t: self.store.count(Filter(must=(*mine.must, Match("memory_type", t)),
                                              must_not=(Match("forgotten", True),)))
                   for t in MEMORY_TYPES}
        live = Filter(must=mine.must, must_not=(Match("forgotten", True),
                                                Match("memory_type", "archived")))
        by_kind = {k: self.store.count(live.and_(Match("note_kind", k))) for k in NOTE_KINDS}
        forgotten = self.store.count(Filter(must=(*mine.must, Match("forgotten", True))))
        return {
            "notes": sum(by_type.values()),
            "by_memory_type": by_type,
            "by_note_kind": {k: v for k, v in by_kind.items() if v},
            "forgotten_pending": forgotten,
            "graph": self.graph.stats(),
        }


def _merge_tags(given: list[str], derived: list[str], cap: int = 5) -> list[str]:
    out: list[str] = []
    for t in [*given, *derived]:
        t = t.strip().lower()
        if t and t not in out:
            out.append(t)
    return out[: max(cap, len(given))]


def _hit(c: Candidate) -> dict[str, Any]:
    extra: dict[str, Any] = {"score": round(c.score, 6)}
    if c.similarity is not None:
        extra["similarity"] = round(c.similarity, 6)
    if c.rerank is not None:
        extra["rerank_score"] = round(c.rerank, 6)
    return public_note(c.payload, **extra)


_RULE_FIELDS = frozenset({"key", "value", "any", "gte", "gt", "lte", "lt"})


def _custom_condition(rule: dict[str, Any]) -> Any:
    if not isinstance(rule, dict) or "key" not in rule or set(rule) - _RULE_FIELDS:
        raise InvalidArgument("each custom filter is {key, value} | {key, any: [...]} | "
                              "{key, gte/lte/gt/lt}", field="custom")
    key = check_filter_key(rule["key"])
    if key in ("kind", "forgotten", "user_id") :
        raise InvalidArgument(f"custom filters cannot override {key!r}", field="custom")
    if "value" in rule:
        return Match(key, check_filter_value(rule["value"], key))
    if "any" in rule:
        values = rule["any"]
        if not isinstance(values, list) or not 0 < len(values) <= MAX_FILTER_VALUES:
            raise InvalidArgument(f"custom filter on {key!r}: any must be a list of 1 to "
                                  f"{MAX_FILTER_VALUES} values", field="custom")
        return MatchAny(key, tuple(check_filter_value(v, key) for v in values))
    bounds: dict[str, float] = {}
    for bound in ("gte", "gt", "lte", "lt"):
        if bound in rule:
            bounds[bound] = check_number(rule[bound], f"custom filter {key!r} {bound}",
                                         lo=-1e300, hi=1e300)
    if bounds:
        return Range(key, **bounds)
    raise InvalidArgument(f"custom filter on {key!r} needs value, any, or a range bound",
                          field="custom")


__all__ = ["HasId", "MemoryConfig", "MemoryService", "RecallFilter", "WriteResult", "check_top_k"]
