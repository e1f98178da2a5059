"""The one retrieval policy of every search: search_memory, deep_search, search_files and
fs_search (semantic) all rank through :func:`rank`, with the same :class:`SearchPolicy`,
reranker included.

A policy is the ``[retrieval]`` settings app.py hands each service (config.py is the one
place their defaults live): the fusion of the dense and BM25 legs (brain/search/fusion.py),
its weights, the candidates per leg, and the relative floor.

The floor is relative, never absolute: a hit is dropped only when its fused score is below
``relative_floor`` times the best hit's score. The best match of a search is therefore
always returned, however loosely the query is worded (a fixed cosine threshold hid a
one-chunk runbook whose best paraphrase scored 0.35). ``relative_floor = 0`` (default)
drops nothing.

``group`` (fs_search): one row per key (a file), the best-ranked candidate of each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from brain.search.adaptive import AdaptiveWeight
from brain.search.fusion import Candidate, hybrid
from brain.search.relevance import Floor, answered
from brain.vector_store import Filter, Hit, SparseVector, VectorStore

# A grouped search reads this many times the rows asked for, so a file whose chunks fill
# the top still leaves room for other files.
GROUP_OVERFETCH = 4


class Reranking:
    """The cross-encoder every search shares ([rerank]; brain/search/rerank.py): set when the brain
    opens, None for the fused order. ``candidates``: how many fused candidates it reorders."""

    __slots__ = ("candidates", "reranker")

    def __init__(self, candidates: int = 30) -> None:
        self.candidates = candidates
        self.reranker: Any = None


@dataclass(frozen=True, slots=True)
class SearchPolicy:
    """How every search ranks ([retrieval] settings; built in app.py)."""

    fusion: str
    dense_weight: float
    code_dense_weight: float | None
    rrf_k: int
    candidates: int
    relative_floor: float
    neighbour_weight: float  # a note's score gains this share of its session neighbour's
    keyword_lead: float = 0.0  # BM25's decisive first hit ranks first (retrieval.keyword_lead)
    # [memory] relevance_band: a clear single answer comes alone (brain/search/presentation.py);
    # None: every hit is kept.
    relevance_band: float | None = None
    # [retrieval] adaptive_weight: the dense weight chosen per query from its legs
    # (brain/search/adaptive.py); None: dense_weight for every query.
    adaptive: AdaptiveWeight | None = None
    reranking: Reranking = field(default_factory=Reranking, compare=False)
    # [retrieval] relevance_floor: no hit at all when none answers (brain/search/relevance.py);
    # None: the best hits are returned however weak.
    relevance: Floor | None = None

    def describe(self) -> str:
        return f"{self.fusion} fusion, relative floor {self.relative_floor:g}"


def rank(
    store: VectorStore,
    dense_vec: Sequence[float] | None,
    sparse_vec: SparseVector,
    flt: Filter | None,
    limit: int,
    policy: SearchPolicy,
    *,
    exact: bool = False,
    group: Callable[[dict[str, Any]], Any] | None = None,
    extra_dense: Sequence[Hit] = (),
    query: str = "",
    text: Callable[[dict[str, Any]], str] | None = None,
    absolute: bool = True,
) -> list[Candidate]:
    """The best ``limit`` candidates for one query under ``policy``: the fused ranking of
    both legs, one per ``group`` key when given, without those under the relative floor.
    ``dense_vec`` None (the embedding credential is missing or rejected,
    brain/embedding/credential.py): the BM25 leg alone. With a reranker (``policy.reranking``),
    ``query`` and ``text`` (a candidate's text from its payload), the top
    ``reranking.candidates`` are reordered by the reranker's scores; when it fails (an HTTP
    reranker, None) the fused order stands. ``absolute``: none when the policy's relevance
    floor judges that no candidate answers (brain/search/relevance.py); a caller that set its
    own floor (confidence_min, threshold) passes False."""
    reranker = policy.reranking.reranker if query and text is not None else None
    fetch = max(limit, policy.reranking.candidates) if reranker is not None else limit
    n = fetch * GROUP_OVERFETCH if group is not None else fetch
    cands = hybrid(
        store, dense_vec if dense_vec is not None else (), sparse_vec, flt, n,
        candidates=max(policy.candidates, n),
        method=policy.fusion if dense_vec is not None else "bm25",
        dense_weight=policy.dense_weight, rrf_k=policy.rrf_k, exact=exact,
        code_dense_weight=policy.code_dense_weight, neighbour_weight=policy.neighbour_weight,
        extra_dense=extra_dense, lead_gap=policy.keyword_lead, adaptive=policy.adaptive,
    )  # fmt: skip
    if group is not None:
        seen: set[Any] = set()
        kept = []
        for c in cands:
            key = group(c.payload)
            if key not in seen:
                seen.add(key)
                kept.append(c)
        cands = kept
    if absolute and not answered(cands, sparse_vec, text, policy.relevance):
        return []
    cands = floor(cands, policy.relative_floor)[:fetch]
    if reranker is not None and text is not None and len(cands) > 1:
        scores = reranker.scores(query, [text(c.payload) for c in cands])
        if scores is not None:
            for c, score in zip(cands, scores, strict=True):
                c.rerank = score
            cands.sort(key=lambda c: (-(c.rerank or 0.0), c.id))
    return cands[:limit]


def floor(cands: list[Candidate], relative_floor: float) -> list[Candidate]:
    """``cands`` (best first) without those scoring below ``relative_floor`` x the best;
    the best is always kept."""
    if not cands or relative_floor <= 0:
        return cands
    top = cands[0].score
    if top <= 0:
        return cands
    return [cands[0], *(c for c in cands[1:] if c.score >= relative_floor * top)]
