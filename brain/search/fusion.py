"""Hybrid retrieval: dense + BM25 candidates fused into one ranking.

Fusions (``settings.retrieval.fusion``):
- ``dbsf`` (default): distribution-based score fusion. Each leg's scores are normalised by
  the distribution of that leg's own candidate scores (mean +- 3 standard deviations mapped
  to 0..1), then mixed with the dense weight. The weight follows what the candidates are:
  ``dense_weight`` for prose, ``code_dense_weight`` when they are source code, in between for
  a mix. Natural-language questions share many words with notes written in prose (chat logs,
  decisions), where BM25 is the stronger witness, and few with code, where the dense leg is
  (LoCoMo vs CoSQA in BENCHMARKS.md; one fixed weight lost on one of them).
- ``rrf``: plain reciprocal rank fusion (k = ``rrf_k``), the textbook baseline.
- ``weighted``: the earlier fusion: dense cosine + BM25 / best BM25, mixed by weight.
- ``dense`` / ``bm25``: one leg alone (baselines).

Every number here (weights, ``rrf_k``, candidates) comes from the caller: their defaults are
defined once, in config.py's RetrievalSettings. A fusion that does not use a number takes
None for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from brain.notes import point_id
from brain.search.adaptive import AdaptiveWeight, features
from brain.vector_store import Filter, Hit, SparseVector, VectorStore

FUSIONS = ("dbsf", "rrf", "weighted", "dense", "bm25")

# A line that reads as source code: a statement keyword at its start, or code punctuation at
# its end, or an assignment / call shape. Chat and prose lines match none of these.
_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |return\b|raise\b|yield\b|async def |"
    r"@\w|#include|function\b|const |let |var |public |private |protected |static |fn |"
    r"func |package |using |try:|except\b|elif\b|else:|for .*:$|if .*:$|while .*:$|with .*:$)"
    r"|[;{}]\s*$|^\s*[}\])]|^\s*[\w.\[\]]+\s*[+\-*/|&]?=\s*\S|\w\([^)]*\)\s*$"
)


_DOCSTRING = re.compile(r'("""|\'\'\')(?:.|\n)*?(?:\1|$)')
_COMMENT = re.compile(r"^\s*(?:#(?!include)|//|/?\*)")


def looks_like_code(text: str, sample: int = 2000) -> bool:
    """True when (the start of) ``text`` has at least two lines and most of its lines, outside
    docstrings and comments, read as source code."""
    head = text[:sample]
    if head.count("\n") < 1:
        return False
    lines = [ln for ln in _DOCSTRING.sub("", head).splitlines()
             if ln.strip() and not _COMMENT.match(ln)]
    if not lines:
        return False
    return sum(1 for ln in lines if _CODE_LINE.search(ln)) >= 0.5 * len(lines)


def is_code(payload: dict[str, Any]) -> bool | None:
    """The note's ``is_code`` flag (set when its content is written); for a note written
    before the flag existed, its content looked at now (~15 us), or None when the payload at
    hand has no content (search legs read only the flag)."""
    flag = payload.get("is_code")
    if isinstance(flag, bool):
        return flag
    content = payload.get("content")
    return looks_like_code(str(content)) if content is not None else None


def code_share(cands: Sequence[Candidate]) -> float:
    """Share of source code among the candidates whose kind is known."""
    known = [flag for flag in (is_code(c.payload) for c in cands) if flag is not None]
    return sum(known) / len(known) if known else 0.0


def stored_code_share(store: VectorStore, ids: Sequence[str]) -> float:
    """:func:`code_share` of the points ``ids``, counted through the store's ``is_code``
    index instead of read from their payloads: one facet over the candidates, ~0.25 ms for
    80 of them in Qdrant Edge, where reading the flag with each leg's hits cost ~0.8 ms a
    leg at 1,000 notes. A store that holds no code at all skips the facet."""
    if not store.may_hold_flag("is_code"):
        return 0.0
    code, prose = store.flag_counts(ids, "is_code")
    return code / (code + prose) if code + prose else 0.0


def effective_dense_weight(
    cands: Sequence[Candidate], dense_weight: float, code_dense_weight: float | None,
    share: float | None = None,
) -> float:
    """The dense weight fuse applies: ``dense_weight`` moved toward ``code_dense_weight`` by
    the share of code among the candidates (``share`` when the caller counted it, else read
    from their payloads)."""
    if code_dense_weight is None:
        return dense_weight
    if share is None:
        share = code_share(cands)
    return dense_weight + (code_dense_weight - dense_weight) * share


def keyword_lead(
    cands: list[Candidate], sparse: Sequence[Hit], gap: float, dense_weight: float
) -> list[Candidate]:
    """BM25's first hit first, when it leads BM25's second by at least ``gap`` of its score
    and the fusion weighs BM25 at least as much as the dense leg (``dense_weight`` <= 0.5).

    Score fusion averages a decisive keyword match with a middling cosine, and the note that
    is a little good in both legs outranks it; on LoCoMo dev the BM25 leg's first hit was
    right where the fused first was not twice as often as the reverse (BENCHMARKS.md, the
    keyword lead lever). Only the first place moves: the rest keep the fused order. The
    lead's score becomes the best fused score (a hair above), so the list stays sorted."""
    if gap <= 0 or dense_weight > 0.5 or not sparse or not cands or cands[0].id == sparse[0].id:
        return cands
    top, second = sparse[0].score, (sparse[1].score if len(sparse) > 1 else 0.0)
    if top <= 0 or (top - second) / top < gap:
        return cands
    lead = next((c for c in cands if c.id == sparse[0].id), None)
    if lead is None:
        return cands
    lead.score = math.nextafter(cands[0].score, math.inf)
    return [lead, *(c for c in cands if c is not lead)]


# What the search legs read of each hit's payload; whole payloads are read for the returned
# hits only. Reading every candidate's payload (~100 a search) cost ~1.5 ms in the store and
# ~1.5 ms in Python at 100k notes. Qdrant Edge reads a point's payload whole whatever the
# selector keeps (~15 us a hit: 0.82 ms for 50 hits with one field, 0.10 ms with none, at
# 1,000 notes), so the legs read none (NO_FIELDS) unless session neighbours are weighed
# (thread_prev); the share of code is counted through the is_code index instead
# (:func:`stored_code_share`).
LEG_FIELDS = ("is_code", "thread_prev")
NO_FIELDS: tuple[str, ...] = ()


def leg_fields(neighbour_weight: float) -> tuple[str, ...]:
    """What the legs of a search with this ``neighbour_weight`` read of each hit."""
    return LEG_FIELDS if neighbour_weight > 0 else NO_FIELDS


@dataclass(slots=True)
class Candidate:
    id: str
    payload: dict[str, Any]
    score: float = 0.0
    similarity: float | None = None  # dense cosine, when the dense leg saw it
    bm25: float | None = None
    rerank: float | None = None  # cross-encoder score, when a reranker reordered the list
    ranks: dict[str, int] = field(default_factory=dict)


def matched_by(c: Candidate) -> str:
    """Which legs found a hit: "both", "dense" (meaning only) or "keyword" (BM25 only); the
    explorer shows it on every hit so a person can see why it matched."""
    dense, keyword = "dense" in c.ranks, "bm25" in c.ranks
    if dense and keyword:
        return "both"
    return "keyword" if keyword else "dense"


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
    method: str,
    dense_weight: float | None = None,
    rrf_k: int | None = None,
    code_dense_weight: float | None = None,
    code_share: float | None = None,
) -> list[Candidate]:
    """One ranking of the union of both legs' hits. ``dense_weight`` is needed by dbsf and
    weighted, ``rrf_k`` by rrf. ``code_dense_weight`` (dbsf and weighted): the dense weight
    used when the candidates are source code; with a mix, the weight moves from
    ``dense_weight`` toward it by the share of code among the candidates (``code_share``
    when the caller counted it: legs read without payloads). Natural-language queries share
    few words with code, so BM25 is a weaker witness there than on prose."""
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
        if rrf_k is None:
            raise ValueError("rrf fusion needs rrf_k (settings.retrieval.rrf_k)")
        for c in cands.values():
            c.score = sum(1.0 / (rrf_k + r + 1) for r in c.ranks.values())
    else:
        if dense_weight is None:
            raise ValueError(f"{method} fusion needs dense_weight (settings.retrieval.dense_weight)")
        if code_dense_weight is not None and method in ("dbsf", "weighted") and dense and sparse:
            dense_weight = effective_dense_weight(list(cands.values()), dense_weight,
                                                  code_dense_weight, code_share)
        _score(cands.values(), dense, sparse, method, dense_weight)
    # Equal scores are common under rrf (the n-th hit of one leg ties the n-th of the other,
    # ranks (2, 5) tie ranks (5, 2)): they rank by their best leg rank, then by the dense
    # rank, so the order follows the legs' own orders. Note ids are random, so an id
    # tie-break ranked the same notes differently from one store to the next (the bench's
    # rrf row moved in the 3rd decimal between runs). No two candidates reach the id.
    return sorted(cands.values(), key=_order)


def _order(c: Candidate) -> tuple[float, float, float, float, str]:
    """Best fused score first; ties by the best leg rank, then the dense rank, the BM25 rank
    (see :func:`fuse`)."""
    return (-c.score, min(c.ranks.values()), c.ranks.get("dense", math.inf),
            c.ranks.get("bm25", math.inf), c.id)


def _score(
    cands: Iterable[Candidate], dense: Sequence[Hit], sparse: Sequence[Hit], method: str,
    dense_weight: float,
) -> None:
    """dbsf or weighted fused scores, ``dense_weight`` on the dense leg."""
    if method == "dbsf":
        nd, ns = _normalised(dense), _normalised(sparse)
        # A candidate one leg did not return scores as that leg's weakest returned hit.
        dmin = min(nd.values(), default=0.0)
        smin = min(ns.values(), default=0.0)
        wd = dense_weight if dense and sparse else (1.0 if dense else 0.0)
        for c in cands:
            c.score = wd * nd.get(c.id, dmin) + (1.0 - wd) * ns.get(c.id, smin)
        return
    top_bm25 = max((h.score for h in sparse), default=0.0) or 1.0
    floor = min((h.score for h in dense), default=0.0)
    for c in cands:
        # A hit the dense leg did not return is at best as similar as its weakest hit.
        sim = c.similarity if c.similarity is not None else floor
        kw = (c.bm25 or 0.0) / top_bm25
        c.score = dense_weight * max(sim, 0.0) + (1.0 - dense_weight) * kw


def hybrid(
    store: VectorStore,
    dense_vec: Sequence[float],
    sparse_vec: SparseVector,
    flt: Filter | None,
    limit: int,
    *,
    candidates: int,
    method: str,
    dense_weight: float | None = None,
    rrf_k: int | None = None,
    exact: bool = False,
    code_dense_weight: float | None = None,
    neighbour_weight: float = 0.0,
    extra_dense: Sequence[Hit] = (),
    lead_gap: float = 0.0,
    adaptive: AdaptiveWeight | None = None,
) -> list[Candidate]:
    """``extra_dense``: more dense hits of the same points (a note found through one of its
    hypothetical questions, brain/memory/hype.py); a point in both legs keeps its best.
    ``lead_gap``: see :func:`keyword_lead` (dbsf and weighted fusion; 0 = off).
    ``adaptive`` (dbsf): the dense weight chosen for this query from its two legs
    (brain/search/adaptive.py), ``dense_weight`` moved by it."""
    n = max(candidates, limit)
    fields = leg_fields(neighbour_weight)
    dense = (store.query_dense(dense_vec, flt, n, exact=exact, fields=fields)
             if method != "bm25" else [])
    if extra_dense and method != "bm25":
        dense = _merge_dense(dense, extra_dense)
    sparse = store.query_sparse(sparse_vec, flt, n, fields=fields) if method != "dense" else []
    if adaptive is not None and method == "dbsf" and dense and sparse and dense_weight is not None:
        dense_weight = adaptive.weight(features(dense, sparse, len(sparse_vec.indices)),
                                       dense_weight)
    share = None
    if (not fields and code_dense_weight is not None and method in ("dbsf", "weighted")
            and dense and sparse):
        share = stored_code_share(store, list({h.id: None for h in (*dense, *sparse)}))
    fused = fuse_legs(dense, sparse, method, dense_weight=dense_weight, rrf_k=rrf_k,
                      code_dense_weight=code_dense_weight, neighbour_weight=neighbour_weight,
                      lead_gap=lead_gap, code_share=share)
    return _with_payloads(store, fused[:limit])


def fuse_legs(
    dense: Sequence[Hit],
    sparse: Sequence[Hit],
    method: str,
    *,
    dense_weight: float | None = None,
    rrf_k: int | None = None,
    code_dense_weight: float | None = None,
    neighbour_weight: float = 0.0,
    lead_gap: float = 0.0,
    code_share: float | None = None,
) -> list[Candidate]:
    """The whole ranking of one query from its two legs, without the store: fusion, session
    neighbours, the keyword lead. :func:`hybrid` calls it after reading the legs; the bench
    that fits the adaptive weight (bench/fusion_fit.py) calls it on legs it has kept.
    ``code_share``: see :func:`fuse` (None: read from the hits' payloads)."""
    if method in ("dense", "bm25"):
        fused = fuse(dense, sparse, "weighted", 1.0 if method == "dense" else 0.0, rrf_k)
    else:
        fused = fuse(dense, sparse, method, dense_weight, rrf_k, code_dense_weight, code_share)
    if neighbour_weight > 0:
        fused = with_neighbours(fused, neighbour_weight)
    # The weight (a pass over the candidates) only when the lead could move anything.
    if (lead_gap > 0 and method in ("dbsf", "weighted") and dense and sparse and fused
            and fused[0].id != sparse[0].id):
        assert dense_weight is not None  # fuse has checked it
        weight = effective_dense_weight(fused, dense_weight, code_dense_weight, code_share)
        fused = keyword_lead(fused, sparse, lead_gap, weight)
    return fused


def _merge_dense(dense: Sequence[Hit], extra: Sequence[Hit]) -> list[Hit]:
    """One dense leg: each point once, at the best of its scores, best first."""
    by_id = {h.id: h for h in dense}
    for h in extra:
        cur = by_id.get(h.id)
        if cur is None or h.score > cur.score:
            by_id[h.id] = h
    return sorted(by_id.values(), key=lambda h: (-h.score, h.id))


def with_neighbours(cands: list[Candidate], weight: float) -> list[Candidate]:
    """Each candidate's score plus ``weight`` x the best fused score of its neighbours among
    the candidates: the note before it in its session (``thread_prev``) and the note after
    it. A note next to a strong match rises (an answer follows its question). Candidates
    with no recorded neighbours keep their scores."""
    by_id = {c.id: c for c in cands}
    base = {c.id: c.score for c in cands}
    best: dict[str, float] = {}
    for c in cands:
        prev = c.payload.get("thread_prev")
        if not prev:
            continue
        other = by_id.get(point_id(str(prev)))
        if other is None:
            continue
        best[c.id] = max(best.get(c.id, -math.inf), base[other.id])
        best[other.id] = max(best.get(other.id, -math.inf), base[c.id])
    if not best:
        return cands
    for c in cands:
        if c.id in best:
            c.score = base[c.id] + weight * best[c.id]
    return sorted(cands, key=_order)


def _with_payloads(store: VectorStore, cands: list[Candidate]) -> list[Candidate]:
    """The candidates with their whole payloads (one read); a point deleted since the search
    is dropped."""
    full = {p.id: p.payload for p in store.retrieve([c.id for c in cands])}
    out = []
    for c in cands:
        payload = full.get(c.id)
        if payload is not None:
            c.payload = payload
            out.append(c)
    return out
