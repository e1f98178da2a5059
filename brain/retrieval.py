"""Hybrid retrieval: dense + BM25 candidates fused into one ranking.

Fusions (``settings.retrieval.fusion``):
- ``dbsf`` (default): distribution-based score fusion. Each leg's scores are normalised by
  the distribution of that leg's own candidate scores (mean +- 3 standard deviations mapped
  to 0..1), then mixed with ``dense_weight``. A leg whose top hit stands far above its other
  candidates (a confident leg) dominates; a leg with a flat score profile (it cannot tell its
  candidates apart) weighs little. This is what lets one default follow BM25 on chat logs
  and the dense leg on code search, where plain RRF follows neither.
- ``rrf``: plain reciprocal rank fusion (k = ``rrf_k``), the textbook baseline.
- ``weighted``: the earlier fusion: dense cosine + BM25 / best BM25, mixed by weight.
- ``dense`` / ``bm25``: one leg alone (baselines).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from brain.vector_store import Filter, Hit, SparseVector, VectorStore

FUSIONS = ("dbsf", "rrf", "weighted", "dense", "bm25")


@dataclass(slots=True)
class Candidate:
    id: str
    payload: dict[str, Any]
    score: float = 0.0
    similarity: float | None = None  # dense cosine, when the dense leg saw it
    bm25: float | None = None
    ranks: dict[str, int] = field(default_factory=dict)


def _dbsf(scores: Sequence[float]) -> tuple[float, float]:
    """(low, high) of a leg: mean -+ 3 standard deviations of its candidate scores."""
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    return mean - 3 * std, mean + 3 * std


def _normalised(hits: Sequence[Hit]) -> dict[str, float]:
    if not hits:
        return {}
    scores = [h.score for h in hits]
    lo, hi = _dbsf(scores)
    if hi - lo <= 1e-12:
        return {h.id: 0.5 for h in hits}
    return {h.id: (h.score - lo) / (hi - lo) for h in hits}


def fuse(
    dense: Sequence[Hit],
    sparse: Sequence[Hit],
    method: str = "dbsf",
    dense_weight: float = 0.5,
    rrf_k: int = 60,
) -> list[Candidate]:
    cands: dict[str, Candidate] = {}
    for rank, hit in enumerate(dense):
        c = cands.setdefault(hit.id, Candidate(hit.id, hit.payload))
        c.similarity = hit.score
        c.ranks["dense"] = rank
    for rank, hit in enumerate(sparse):
        c = cands.setdefault(hit.id, Candidate(hit.id, hit.payload))
        c.bm25 = hit.score
        c.ranks["bm25"] = rank
    if method == "rrf":
        for c in cands.values():
            c.score = sum(1.0 / (rrf_k + r + 1) for r in c.ranks.values())
    elif method == "dbsf":
        nd, ns = _normalised(dense), _normalised(sparse)
        # A candidate one leg did not return scores as that leg's weakest returned hit.
        dmin = min(nd.values(), default=0.0)
        smin = min(ns.values(), default=0.0)
        wd = dense_weight if dense and sparse else (1.0 if dense else 0.0)
        for c in cands.values():
            c.score = wd * nd.get(c.id, dmin) + (1.0 - wd) * ns.get(c.id, smin)
    else:
        top_bm25 = max((h.score for h in sparse), default=0.0) or 1.0
        floor = min((h.score for h in dense), default=0.0)
        for c in cands.values():
            # A hit the dense leg did not return is at best as similar as its weakest hit.
            sim = c.similarity if c.similarity is not None else floor
            kw = (c.bm25 or 0.0) / top_bm25
            c.score = dense_weight * max(sim, 0.0) + (1.0 - dense_weight) * kw
    return sorted(cands.values(), key=lambda c: (-c.score, c.id))


def hybrid(
    store: VectorStore,
    dense_vec: Sequence[float],
    sparse_vec: SparseVector,
    flt: Filter | None,
    limit: int,
    *,
    candidates: int = 50,
    method: str = "dbsf",
    dense_weight: float = 0.5,
    rrf_k: int = 60,
    exact: bool = False,
) -> list[Candidate]:
    n = max(candidates, limit)
    dense = store.query_dense(dense_vec, flt, n, exact=exact) if method != "bm25" else []
    sparse = store.query_sparse(sparse_vec, flt, n) if method != "dense" else []
    if method in ("dense", "bm25"):
        return fuse(dense, sparse, "weighted", 1.0 if method == "dense" else 0.0, rrf_k)[:limit]
    return fuse(dense, sparse, method, dense_weight, rrf_k)[:limit]
