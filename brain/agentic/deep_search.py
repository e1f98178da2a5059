"""Iterative retrieval: search, follow links, search again with what was found.

Hop 0 runs a hybrid search for the query. Hop n (n >= 1) adds the graph neighbours of every
note first found in the previous hop, then searches again, for notes not found yet, with a
query moved towards the previous hop's search hits: the dense leg uses the query vector plus
``FEEDBACK`` times the mean of the hits' stored vectors (Rocchio relevance feedback, no model
call), the BM25 leg the query plus the hits' titles. Embedding the query-plus-titles text
instead cost a full 256-token model pass per hop (~45 ms of a ~100 ms call) for the same
results on LoCoMo and CoSQA. The union is ranked by the best score each note reached: a
search hit scores its relevance to the *original* query (its fused score among the original
query's candidates; a note outside that pool keeps its expanded-query score times
``related_decay ** hop``), so the expanded query's drift towards the previous hits' own
wording cannot outrank the question. A graph neighbour scores its parent's score times a
decay: ``graph_decay`` (0.85) through a typed link (caused_by, fixes, supports, ...), which
says something a search cannot see; ``related_decay`` (0.5) through a "related" link, which
is what auto-linking writes from the same vector similarity the search already measures. With
0.85 for those too, similarity neighbours pushed better search hits out of the top 5 (the
deep_search rows of BENCHMARKS.md). All filters of ``search_memory`` apply to every hop,
graph neighbours included. Every returned note is access-stamped once, at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from brain.embedding.credential import query_vector
from brain.errors import InvalidArgument
from brain.memory import MemoryService, RecallFilter, check_top_k
from brain.notes import point_id
from brain.trust.limits import MAX_QUERY_CHARS, check_text
from brain.vector_store import HasId

MAX_HOPS = 4
FEEDBACK = 0.5  # weight of the previous hop's mean hit vector in the next hop's query vector
_TITLE_CHARS = 1500


@dataclass(slots=True)
class _Found:
    payload: dict[str, Any]
    score: float
    hop: int
    via: str | None = None
    relation: str | None = None
    found_by: str = "search"


def deep_search(
    memory: MemoryService,
    query: str,
    rf: RecallFilter | None = None,
    hops: int = 2,
    top_k: int = 10,
) -> dict[str, Any]:
    if not isinstance(hops, int) or isinstance(hops, bool) or not 0 <= hops <= MAX_HOPS:
        raise InvalidArgument(f"hops={hops!r} is out of range: use 0..{MAX_HOPS}", field="hops")
    check_top_k(top_k)
    check_text(query, "query", MAX_QUERY_CHARS)
    rf = rf or RecallFilter()
    flt = memory.build_filter(rf)
    decay = memory.cfg.related_decay
    found: dict[str, _Found] = {}
    # None while the embedding credential is unusable: every hop ranks by keywords alone.
    vec = query_vector(memory.embedder, query)
    qvec = np.asarray(vec, dtype=np.float32) if vec is not None else None
    search_vec, search_query = qvec, query
    per_hop: list[dict[str, Any]] = []
    frontier: list[str] = []
    # The original query's fused scores over its whole candidate pool: later hops rank what
    # they discover by relevance to the question, not to the drifting expanded query.
    pool_hits = _search(
        memory, qvec, query, flt, max(top_k, memory.cfg.policy.candidates), rf.confidence_min
    )
    pool = {payload["zk_id"]: score for payload, score, _ in pool_hits}
    for hop in range(hops + 1):
        # Links first: a neighbour of the previous hop is credited to its link. The search
        # then looks only for notes not found yet.
        graph_new = _expand(memory, flt, found, frontier, hop, top_k) if hop else []
        hop_flt = flt.but_not(HasId(tuple(point_id(z) for z in found))) if found else flt
        hits = (
            _search(memory, search_vec, search_query, hop_flt, top_k, rf.confidence_min)
            if hop
            else pool_hits[:top_k]
        )
        new: list[str] = []
        for payload, score, _ in hits:
            if hop:
                score = pool.get(payload["zk_id"], score * decay**hop)
            if _offer(found, _Found(payload, score, hop)):
                new.append(payload["zk_id"])
        per_hop.append(
            {
                "hop": hop,
                "query": search_query[:200],
                "search_hits": len(hits),
                "new_by_search": len(new),
                "new_by_graph": len(graph_new),
            }
        )
        frontier = new + graph_new
        if not frontier:
            break
        titles = " ".join(p.get("title", "") for p, _, _ in hits)
        search_query = f"{query}\n{titles}"[: len(query) + _TITLE_CHARS]
        search_vec = _feedback(memory, qvec, [pid for _, _, pid in hits]) if qvec is not None \
            else None
    # Ties keep the order notes were found in (sorted is stable), not their random ids.
    ranked = sorted(found.values(), key=lambda f: (-f.score, f.hop))[:top_k]
    memory.stamp_access([f.payload["zk_id"] for f in ranked])
    results = [
        memory.public(
            f.payload,
            score=round(f.score, 6),
            hop=f.hop,
            found_by=f.found_by,
            via=f.via,
            relation=f.relation,
        )
        for f in ranked
    ]
    return {"results": results, "count": len(results), "hops": per_hop}


def _search(
    memory: MemoryService,
    qvec: np.ndarray | None,
    query: str,
    flt: Any,
    top_k: int,
    confidence_min: float | None,
) -> list[tuple[dict[str, Any], float, str]]:
    """(payload, fused score, point id) of the hits of one hybrid search."""
    cands = memory.recall(qvec.tolist() if qvec is not None else None, query, flt, top_k,
                          confidence_min)
    return [(c.payload, c.score, c.id) for c in cands]


def _feedback(memory: MemoryService, qvec: np.ndarray, ids: list[str]) -> np.ndarray:
    """The query vector moved towards the mean stored vector of ``ids`` (unit length)."""
    vecs = [p.dense for p in memory.store.retrieve(ids, with_vectors=True) if p.dense]
    if not vecs:
        return qvec
    moved = qvec + FEEDBACK * np.asarray(vecs, dtype=np.float32).mean(axis=0)
    norm = float(np.linalg.norm(moved))
    return moved / norm if norm > 0 else qvec


def _expand(
    memory: MemoryService,
    flt: Any,
    found: dict[str, _Found],
    frontier: list[str],
    hop: int,
    top_k: int,
) -> list[str]:
    """Neighbours of the previous hop's notes that pass the filter, best first, at most
    ``top_k`` new ones: a neighbour ranked below ``top_k`` new notes that score more cannot
    reach the results, nor can its own neighbours (they score less still). A neighbour found
    already only has its score raised when the link gives it more."""
    offers: dict[str, _Found] = {}
    for src in frontier:
        parent = found[src]
        for nb, relation, _direction in memory.graph.neighbours(src):
            decay = memory.cfg.related_decay if relation == "related" else memory.cfg.graph_decay
            score = parent.score * decay
            if nb in found:
                found[nb].score = max(found[nb].score, score)
                continue
            best = offers.get(nb)
            if best is None or score > best.score:
                offers[nb] = _Found({}, score, hop, via=src, relation=relation, found_by="link")
    ranked = sorted(offers, key=lambda z: -offers[z].score)  # ties: in the links' order
    new: list[str] = []
    for start in range(0, len(ranked), top_k):
        chunk = ranked[start : start + top_k]
        points, _ = memory.store.scroll(
            flt.and_(HasId(tuple(point_id(z) for z in chunk))), limit=len(chunk)
        )
        passed = {pt.payload["zk_id"]: pt.payload for pt in points}
        for z in chunk:  # best first
            if z in passed and len(new) < top_k:
                offers[z].payload = passed[z]
                found[z] = offers[z]
                new.append(z)
        if len(new) >= top_k:
            break
    return new


def _offer(found: dict[str, _Found], cand: _Found) -> bool:
    """Keep the best score per note; True when the note is new."""
    zk_id = cand.payload["zk_id"]
    old = found.get(zk_id)
    if old is None:
        found[zk_id] = cand
        return True
    if cand.score > old.score:
        old.score = cand.score  # the first finder (hop, via) is what found it
    return False
