"""Query-adaptive fusion: the dense weight of one search, chosen from what its two legs show.

One fixed dense weight is a compromise between questions. A question that names a rare
thing ("Caroline's LGBTQ support group") is answered by the note that shares its words, and
BM25's first hit stands out; a question that paraphrases ("what helps her relax?") shares
few words with its answer, and only the dense leg finds it. A per-question oracle choice of
the weight reached LoCoMo test any@5 0.745 against 0.657 for the best fixed one
(BENCHMARKS.md, "What limits LoCoMo recall").

The rule is linear and transparent: the configured ``dense_weight`` plus a fitted shift plus
one coefficient per standardised feature, clipped to ``[low, high]``::

    w = clip(dense_weight + shift + sum(coef_i * (f_i - mean_i) / scale_i), low, high)

The features (:data:`FEATURES`) come from the legs a search has already read, so the rule
costs a pass over ~100 scores and no store call. Its values are fitted on the benchmarks'
dev halves only by ``python -m bench.fusion_fit`` (which writes brain/search/fitted.json) and
reported on the test halves; ``[retrieval] adaptive_weight = false`` turns it off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.vector_store import Hit

FEATURES: tuple[str, ...] = (
    "terms",  # log(1 + distinct query terms BM25 kept): short lookups vs long questions
    "bm25_margin",  # BM25's first hit over its second, share of the first's score
    "bm25_per_term",  # BM25's best score per query term: high when rare terms match (IDF)
    "agreement",  # share of the dense leg's top 5 that BM25's top 5 also holds
    "dense_top",  # the dense leg's best cosine: how well the meaning matched at all
    "dense_spread",  # its first cosine less its 10th: a clear dense winner
    "bm25_spread",  # BM25's first score less its 10th, share of the first
)
TOP = 5  # hits per leg the agreement compares
SPREAD = 10  # the rank the spreads compare the first hit with


def features(dense: Sequence[Hit], sparse: Sequence[Hit], terms: int) -> tuple[float, ...]:
    """:data:`FEATURES` of one query: its legs (best first) and how many terms BM25 kept."""
    s1 = sparse[0].score if sparse else 0.0
    s2 = sparse[1].score if len(sparse) > 1 else 0.0
    sk = sparse[min(SPREAD, len(sparse)) - 1].score if sparse else 0.0
    d1 = dense[0].score if dense else 0.0
    dk = dense[min(SPREAD, len(dense)) - 1].score if dense else 0.0
    top_d = {h.id for h in dense[:TOP]}
    top_s = {h.id for h in sparse[:TOP]}
    return (
        math.log1p(terms),
        (s1 - s2) / s1 if s1 > 0 else 0.0,
        s1 / terms if terms else 0.0,
        len(top_d & top_s) / TOP,
        d1,
        d1 - dk,
        (s1 - sk) / s1 if s1 > 0 else 0.0,
    )


@dataclass(frozen=True, slots=True)
class AdaptiveWeight:
    """The fitted rule (see the module doc); one value per feature in each tuple."""

    shift: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    low: float = 0.05
    high: float = 0.95

    def __post_init__(self) -> None:
        n = len(FEATURES)
        if not (len(self.mean) == len(self.scale) == len(self.coef) == n):
            raise ValueError(f"an adaptive weight needs {n} means, scales and coefficients "
                             f"({', '.join(FEATURES)})")
        if any(s <= 0 for s in self.scale):
            raise ValueError("feature scales must be positive")
        if not 0.0 <= self.low <= self.high <= 1.0:
            raise ValueError("need 0 <= low <= high <= 1")

    def weight(self, feats: Sequence[float], dense_weight: float) -> float:
        w = dense_weight + self.shift + sum(
            c * (f - m) / s for c, f, m, s in zip(self.coef, feats, self.mean, self.scale,
                                                 strict=True))
        return min(self.high, max(self.low, w))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AdaptiveWeight:
        names = list(d["features"])
        if names != list(FEATURES):
            raise ValueError(f"fitted for features {names}, this code computes {list(FEATURES)}")
        return cls(shift=float(d["shift"]), mean=tuple(map(float, d["mean"])),
                   scale=tuple(map(float, d["scale"])), coef=tuple(map(float, d["coef"])),
                   low=float(d.get("low", 0.05)), high=float(d.get("high", 0.95)))

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(FEATURES), "shift": self.shift, "mean": list(self.mean),
                "scale": list(self.scale), "coef": list(self.coef), "low": self.low,
                "high": self.high}


def fitted(path: Path | None = None) -> AdaptiveWeight | None:
    """The committed fit (brain/search/fitted.json, or the file at ``path``), or None when
    none has been made."""
    from brain.search.fitted import read_fitted

    values = read_fitted(path)
    return AdaptiveWeight.from_dict(values) if values else None
