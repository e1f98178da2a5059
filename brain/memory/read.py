"""The reads of notes: a search (hybrid retrieval, optional rerank, confidence floor), the
notes linked to one, and every note of a scope.

Module functions over a :class:`~brain.memory.core.NoteCore` (``m``); MemoryService exposes
them as its methods.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from brain.embedding.credential import query_vector as query_vector_of
from brain.errors import InvalidArgument
from brain.memory import hype, supersede
from brain.memory.core import NoteCore, check_top_k, embed_text, require_text
from brain.memory.filters import RecallFilter, build_filter, on_another_branch
from brain.notes import point_id
from brain.search.fusion import Candidate, leg_fields, matched_by
from brain.search.policy import rank
from brain.trust import tenancy
from brain.trust.limits import MAX_QUERY_CHARS
from brain.vector_store import Filter, Match, scroll_all


def search(
    m: NoteCore,
    query: str,
    top_k: int = 5,
    rf: RecallFilter | None = None,
    stamp: bool = True,
    query_vector: Sequence[float] | None = None,
) -> list[dict[str, Any]]:
    query = require_text(query, "query", MAX_QUERY_CHARS)
    check_top_k(top_k)
    rf = rf or RecallFilter()
    flt = build_filter(m, rf)
    qvec = query_vector if query_vector is not None else query_vector_of(m.embedder, query)
    cands = recall(m, qvec, query, flt, top_k, rf.confidence_min)
    if stamp:
        m.stamp_access([c.payload["zk_id"] for c in cands])
    return [_hit(m, c) for c in cands]


def recall(
    m: NoteCore,
    qvec: Sequence[float] | None,
    query: str,
    flt: Filter,
    limit: int,
    confidence_min: float | None = None,
) -> list[Candidate]:
    """The fused (and reranked) candidates of one search, without those whose dense
    similarity is below ``confidence_min`` (a hit the dense leg did not see has none).
    ``qvec`` None: keywords (BM25) alone, the embedding credential being unusable."""
    cands = _retrieve(m, qvec, query, flt, limit, absolute=confidence_min is None)
    if confidence_min is None:
        return cands
    return [c for c in cands if c.similarity is not None and c.similarity >= confidence_min]


def empty_project(m: NoteCore, rf: RecallFilter) -> str | None:
    """The project a search of ``rf`` reads when it holds no note the caller may see (any
    kind, fleeting too): a search there answers nothing whatever the query, which usually
    means a guessed project name. None when it holds some, or the search crosses projects.
    One count."""
    if rf.all_projects:
        return None
    project = rf.project or m.cfg.default_project
    whole = RecallFilter(project=project, include_fleeting=True, include_contextual=True,
                         branch="*")
    return project if m.store.count(build_filter(m, whole)) == 0 else None


def _retrieve(m: NoteCore, qvec: Sequence[float] | None, query: str, flt: Filter,
              limit: int, *, absolute: bool = True) -> list[Candidate]:
    # Notes are searched through the index: the bench's "no exact search" ablation gave the
    # same recall, while exact search of a filtered scope cost ~8 ms more at 10k notes.
    n = max(limit, m.cfg.policy.reranking.candidates) if m.reranker is not None else limit
    # Notes matched through their hypothetical questions (HyPE), under the same filter.
    fields = leg_fields(m.cfg.policy.neighbour_weight)
    extra = hype.parent_hits(m.store, qvec, flt, max(n, m.cfg.policy.candidates),
                             owner=tenancy.conditions(m.identity, siblings=True),
                             model=m.meta.model,
                             fields=fields) if qvec is not None and m.has_hype() else []
    cands = rank(m.store, qvec, m.bm25.query(query), flt, n, m.cfg.policy, extra_dense=extra,
                 query=query, text=embed_text, absolute=absolute)
    if m.citer is not None:  # cited code changed or gone: below an equal fresh note
        cands = m.citer.demote(cands)
    return cands[:limit]


def _hit(m: NoteCore, c: Candidate) -> dict[str, Any]:
    extra: dict[str, Any] = {"score": round(c.score, 6), "matched": matched_by(c)}
    if c.similarity is not None:
        extra["similarity"] = round(c.similarity, 6)
    if c.rerank is not None:
        extra["rerank_score"] = round(c.rerank, 6)
    return m.public(c.payload, **extra)


def get(m: NoteCore, zk_id: str) -> dict[str, Any]:
    """One whole note the caller may see, access-stamped (the ``get_note`` tool), with the
    notes it superseded (``history``, when it has any)."""
    payload = m.get_payload(zk_id)
    m.stamp_access([payload["zk_id"]])
    if m.citer is not None:
        m.citer.refresh([payload])
    past = supersede.history(m, payload) if payload.get("supersedes") else []
    return m.public(payload, history=past) if past else m.public(payload)


def related(m: NoteCore, zk_id: str, depth: int = 1) -> dict[str, Any]:
    if not isinstance(depth, int) or not 1 <= depth <= 3:
        raise InvalidArgument("depth must be 1, 2 or 3", field="depth")
    root = m.get_payload(zk_id)
    found = _walk(m, root["zk_id"], depth)
    out = [{**m.public(p), "hops": hops, "via": via, "relation": rel}
           for hops, via, rel, p in found.values() if not p.get("forgotten")]
    out.sort(key=lambda n: (n["hops"], n["zk_id"]))
    return {"note": m.public(root), "related": out}


def _walk(m: NoteCore, start: str, depth: int) -> dict[str, tuple[int, str, str, dict[str, Any]]]:
    """Notes within ``depth`` hops of ``start`` (either direction), stepping only on notes
    the caller may see: a path through a sibling's private note would name it (via)
    and reveal what it links; nor through a note still open on another git branch."""
    found: dict[str, tuple[int, str, str, dict[str, Any]]] = {}
    frontier = [start]
    for hop in range(1, depth + 1):
        offers: dict[str, tuple[int, str, str]] = {}
        for node in frontier:
            for nb, rel, _ in m.graph.neighbours(node):
                if nb != start and nb not in found and nb not in offers:
                    offers[nb] = (hop, node, rel)
        frontier = []
        for pt in m.store.retrieve([point_id(z) for z in offers]):
            p = pt.payload
            # a note open on another branch is hidden here as in search (filters.py)
            if p.get("kind") == "note" and m.visible(p) and not on_another_branch(m, p):
                found[p["zk_id"]] = (*offers[p["zk_id"]], p)
                frontier.append(p["zk_id"])
    return found


def notes(m: NoteCore, flt: Filter | None = None, page: int = 512) -> Iterator[dict[str, Any]]:
    """Every note (forgotten ones included) matching ``flt``, paged."""
    m.flush_stamps()
    base = Filter(must=(Match("kind", "note"),))
    if flt is not None:
        base = Filter(must=base.must + flt.must, must_not=flt.must_not, should=flt.should)
    return (p.payload for p in scroll_all(m.store, base, page=page))
