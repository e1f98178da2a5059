"""Relevant or nothing: whether any hit of a search answers it at all.

The fused score ranks hits against each other and is normalised per query, so it cannot say
that nothing is relevant: a brain of coding notes answered "kubernetes helm chart rollback"
with five unrelated notes at 0.57-0.65. The evidence each hit comes with can:

- ``similarity``: the best dense cosine among the candidates, an absolute measure on the
  model's own scale;
- ``coverage``: the largest share of the query's keyword terms (BM25's stemmed tokens) that
  one of the leading hits holds, the keyword leg's evidence against the query's own best.

A search answers when ``similarity + coverage_weight x coverage >= threshold``, or when one
leading hit holds at least ``keyword_answer`` of the query's terms (a long note's pooled vector
dilutes the cosine of the one paragraph that answers), with the weights and threshold fitted
per embedding model on dev data (``python -m bench.abstention``,
BENCHMARKS.md "Relevant or nothing"): the cosine scale differs between models, so a model
without a calibration gets no floor unless ``[retrieval] relevance_threshold`` sets one.
A search whose dense leg is off (the embedding credential missing) has no cosine and is
never judged. A caller that wants the top k whatever their relevance passes an explicit
``confidence_min`` (0 keeps everything), or ``threshold`` to search_files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from brain.embedding.bm25 import BM25Encoder
from brain.search.fusion import Candidate
from brain.vector_store import SparseVector

# How many leading hits are read for keyword coverage (each is tokenised once, ~30 us).
LEADING = 3


@dataclass(frozen=True, slots=True)
class Floor:
    """``similarity + coverage_weight * coverage >= threshold``, or ``coverage >=
    keyword_answer``, answers."""

    threshold: float
    coverage_weight: float = 0.0
    keyword_answer: float = 0.8

    def answers(self, evidence: Evidence) -> bool:
        return (evidence.similarity + self.coverage_weight * evidence.coverage >= self.threshold
                or evidence.coverage >= self.keyword_answer)


@dataclass(frozen=True, slots=True)
class Evidence:
    similarity: float
    coverage: float


# Fitted on the dev halves (LoCoMo questions asked of their own conversation and of another
# one's): dev 0.889 of the others' questions answer none, 0.0013 of the answerable lose their
# top-5 gold; test 0.856 and 0.0013. A stricter threshold (0.515) abstained more (0.92) but
# hid a paraphrase sharing no keyword at 0.498: see BENCHMARKS.md "Relevant or nothing".
CALIBRATED: dict[str, Floor] = {
    "sentence-transformers/all-MiniLM-L6-v2": Floor(threshold=0.49, coverage_weight=0.10),
}

_ENCODER = BM25Encoder()


def floor_for(model: str, *, enabled: bool, threshold: float | None) -> Floor | None:
    """The floor of the searches of ``model``: the configured ``threshold`` (with the
    model's calibrated coverage weight, if any), else the model's calibration; None when
    off or when neither exists."""
    if not enabled:
        return None
    fitted = CALIBRATED.get(model)
    if threshold is not None:
        return Floor(threshold, fitted.coverage_weight if fitted else 0.0,
                     fitted.keyword_answer if fitted else 1.01)
    return fitted


def evidence(cands: Sequence[Candidate], query: SparseVector,
             text: Callable[[dict[str, Any]], str] | None) -> Evidence | None:
    """The evidence of a search's candidates; None when no candidate has a cosine (the
    dense leg did not run)."""
    sims = [c.similarity for c in cands if c.similarity is not None]
    if not sims:
        return None
    terms = set(query.indices)
    coverage = 0.0
    if terms and text is not None:
        for c in cands[:LEADING]:
            found = set(_ENCODER.document(text(c.payload)).indices)
            coverage = max(coverage, len(terms & found) / len(terms))
    return Evidence(max(sims), coverage)


def answered(cands: Sequence[Candidate], query: SparseVector,
             text: Callable[[dict[str, Any]], str] | None, floor: Floor | None) -> bool:
    """False when ``floor`` judges that no candidate answers the query."""
    if floor is None or not cands:
        return True
    ev = evidence(cands, query, text)
    return ev is None or floor.answers(ev)
