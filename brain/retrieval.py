"""Hybrid retrieval: dense + BM25 candidates fused into one ranking.

Two fusions:
- ``rrf``: plain reciprocal rank fusion (k=60), the textbook baseline.
- ``weighted``: score-aware. Dense cosine and BM25 (divided by the best BM25 score of the
  candidate set) are mixed with ``dense_weight``. Unlike RRF it keeps how far apart two hits
  are, so a very strong keyword match or a very close paraphrase is not flattened to a rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from brain.vector_store import Filter, Hit, SparseVector, VectorStore


@dataclass(slots=True)
class Candidate:
    id: str
    payload: dict[str, Any]
    score: float = 0.0
    similarity: float | None = None  # dense cosine, when the dense leg saw it
    bm25: float | None = None
    ranks: dict[str, int] = field(default_factory=dict)


def fuse(
    dense: Sequence[Hit],
    sparse: Sequence[Hit],
    method: str = "weighted",
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
    method: str = "weighted",
    dense_weight: float = 0.5,
    rrf_k: int = 60,
    exact: bool = False,
) -> list[Candidate]:
    n = max(candidates, limit)
    dense = store.query_dense(dense_vec, flt, n, exact=exact)
    sparse = store.query_sparse(sparse_vec, flt, n) if dense_weight < 1.0 else []
    if method == "dense":
        sparse = []
    elif method == "bm25":
        dense = []
    return fuse(dense, sparse, "weighted" if method in ("dense", "bm25") else method,
                dense_weight if method not in ("dense", "bm25") else (1.0 if method == "dense" else 0.0),
                rrf_k)[:limit]
