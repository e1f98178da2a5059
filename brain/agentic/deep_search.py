"""Iterative retrieval: search, follow links, search again with what was found.

Hop 0 runs a hybrid search for the query. Hop n (n >= 1) adds the graph neighbours of every
note first found in the previous hop, then searches again, for notes not found yet, with
the query plus the titles of the previous hop's search hits. The union is ranked by the best
score each note reached: a search hit scores its relevance to the *original* query (its
fused score among the original query's candidates; a note outside that pool keeps its
expanded-query score times ``GRAPH_DECAY ** hop``), so the expanded query's drift towards
the previous hits' own wording cannot outrank the question. A graph neighbour scores its
parent's score times ``GRAPH_DECAY``: a link is evidence, a little weaker than the parent's
own match. All filters of ``search_memory`` apply to every hop,
graph neighbours included. Every returned note is access-stamped once, at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brain.errors import InvalidArgument
from brain.memory import MemoryService, RecallFilter, check_top_k
from brain.notes import point_id, public_note
from brain.vector_store import HasId

GRAPH_DECAY = 0.85
MAX_HOPS = 4
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
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("query is empty: pass what to look for", field="query")
    rf = rf or RecallFilter()
    flt = memory.build_filter(rf)
    found: dict[str, _Found] = {}
    search_query = query
    per_hop: list[dict[str, Any]] = []
    frontier: list[str] = []
    # The original query's fused scores over its whole candidate pool: later hops rank what
    # they discover by relevance to the question, not to the drifting expanded query.
    pool_hits = _search(memory, query, flt, max(top_k, memory.cfg.candidates), rf.confidence_min)
    pool = {payload["zk_id"]: score for payload, score in pool_hits}
    for hop in range(hops + 1):
        # Links first: a neighbour of the previous hop is credited to its link. The search
        # then looks only for notes not found yet.
        graph_new = _expand(memory, flt, found, frontier, hop) if hop else []
        hop_flt = flt.but_not(HasId(tuple(point_id(z) for z in found))) if found else flt
        hits = (
            _search(memory, search_query, hop_flt, top_k, rf.confidence_min)
            if hop
            else pool_hits[:top_k]
        )
        new: list[str] = []
        for payload, score in hits:
            if hop:
                score = pool.get(payload["zk_id"], score * GRAPH_DECAY**hop)
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
        titles = " ".join(p.get("title", "") for p, _ in hits)
        search_query = f"{query}\n{titles}"[: len(query) + _TITLE_CHARS]
    ranked = sorted(found.values(), key=lambda f: (-f.score, f.hop, f.payload["zk_id"]))[:top_k]
    memory.stamp_access([f.payload["zk_id"] for f in ranked])
    results = [
        public_note(
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
    memory: MemoryService, query: str, flt: Any, top_k: int, confidence_min: float | None
) -> list[tuple[dict[str, Any], float]]:
    qvec = memory.embedder.embed_query(query).tolist()
    cands = memory._retrieve(qvec, query, flt, top_k)
    if confidence_min is not None:
        cands = [c for c in cands if c.similarity is not None and c.similarity >= confidence_min]
    return [(c.payload, c.score) for c in cands]


def _expand(
    memory: MemoryService, flt: Any, found: dict[str, _Found], frontier: list[str], hop: int
) -> list[str]:
    """Neighbours of the previous hop's notes that pass the filter."""
    offers: dict[str, _Found] = {}
    for src in frontier:
        parent = found[src]
        for nb, relation, _direction in memory.graph.neighbours(src):
            score = parent.score * GRAPH_DECAY
            best = offers.get(nb)
            if best is None or score > best.score:
                offers[nb] = _Found({}, score, hop, via=src, relation=relation, found_by="link")
    if not offers:
        return []
    ids = tuple(point_id(z) for z in offers)
    points, _ = memory.store.scroll(flt.and_(HasId(ids)), limit=len(ids))
    new: list[str] = []
    for pt in points:
        offer = offers[pt.payload["zk_id"]]
        offer.payload = pt.payload
        if _offer(found, offer):
            new.append(pt.payload["zk_id"])
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
