"""Query-adaptive fusion (issue 36): the dense weight chosen per query from its legs, the
committed fit, and the fitting bench's dev-only fit."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench import fusion_fit
from brain.app import Brain
from brain.search import adaptive as fusion_adapt
from brain.search.adaptive import FEATURES, AdaptiveWeight, features
from brain.search.fusion import fuse_legs
from brain.vector_store import Hit
from config import load_settings


def _hits(scores: list[float], prefix: str) -> list[Hit]:
    return [Hit(f"{prefix}{i}", s, {}) for i, s in enumerate(scores)]


def _rule(**coef: float) -> AdaptiveWeight:
    n = len(FEATURES)
    return AdaptiveWeight(shift=0.0, mean=(0.0,) * n, scale=(1.0,) * n,
                          coef=tuple(coef.get(f, 0.0) for f in FEATURES))


def test_features_read_the_two_legs() -> None:
    dense = _hits([0.9 - 0.05 * i for i in range(12)], "d")
    sparse = _hits([10.0, 6.0] + [5.0 - 0.1 * i for i in range(10)], "s")
    sparse[1] = Hit("d0", 6.0, {})  # the dense leg's first is BM25's second
    f = dict(zip(FEATURES, features(dense, sparse, terms=4), strict=True))
    assert f["terms"] == pytest.approx(math.log1p(4))
    assert f["bm25_margin"] == pytest.approx(0.4)
    assert f["bm25_per_term"] == pytest.approx(2.5)
    assert f["agreement"] == pytest.approx(1 / 5)
    assert f["dense_top"] == pytest.approx(0.9)
    assert f["dense_spread"] == pytest.approx(0.45)  # first less the 10th
    assert f["bm25_spread"] == pytest.approx((10.0 - 4.3) / 10.0)  # the 10th: 4.3


def test_features_of_empty_or_short_legs_are_finite() -> None:
    for dense, sparse, terms in (([], [], 0), (_hits([0.5], "d"), [], 1),
                                 ([], _hits([3.0], "s"), 2)):
        assert all(math.isfinite(x) for x in features(dense, sparse, terms))


def test_the_weight_moves_from_the_configured_one_and_stays_in_bounds() -> None:
    rule = _rule(bm25_margin=-0.5)
    feats = [0.0] * len(FEATURES)
    assert rule.weight(feats, 0.45) == pytest.approx(0.45)  # every feature at its mean
    feats[FEATURES.index("bm25_margin")] = 0.2
    assert rule.weight(feats, 0.45) == pytest.approx(0.35)  # a clear keyword winner: BM25
    assert rule.weight(feats, 0.70) == pytest.approx(0.60)  # the user's weight still counts
    feats[FEATURES.index("bm25_margin")] = 5.0
    assert rule.weight(feats, 0.45) == rule.low
    feats[FEATURES.index("bm25_margin")] = -5.0
    assert rule.weight(feats, 0.45) == rule.high


def test_a_fit_for_other_features_or_with_bad_scales_is_refused() -> None:
    good = _rule().to_dict()
    assert AdaptiveWeight.from_dict(good) == _rule()
    with pytest.raises(ValueError, match="fitted for features"):
        AdaptiveWeight.from_dict({**good, "features": ["terms"]})
    with pytest.raises(ValueError, match="scales must be positive"):
        AdaptiveWeight.from_dict({**good, "scale": [0.0] * len(FEATURES)})


def test_the_committed_fit_loads_and_is_what_the_policy_applies(tmp_path: Path) -> None:
    committed = fusion_adapt.fitted()
    assert committed is not None, "brain/search/fitted.json holds no fit: run bench.fusion_fit"
    on = Brain(load_settings(home=tmp_path / "on"))
    off = Brain(load_settings(home=tmp_path / "off", retrieval={"adaptive_weight": False}))
    assert on.search_policy.adaptive == committed
    assert off.search_policy.adaptive is None


def test_the_chosen_weight_decides_which_leg_wins() -> None:
    # "a" is the dense leg's clear first and BM25's last; "b" the reverse.
    dense = [Hit("a", 0.9, {}), *(_hits([0.5 - 0.01 * i for i in range(8)], "x")),
             Hit("b", 0.3, {})]
    sparse = [Hit("b", 12.0, {}), *(_hits([4.0 - 0.1 * i for i in range(8)], "x")),
              Hit("a", 1.0, {})]

    def first(weight: float) -> str:
        return fuse_legs(dense, sparse, "dbsf", dense_weight=weight, rrf_k=60)[0].id

    assert (first(0.2), first(0.8)) == ("b", "a")
    feats = features(dense, sparse, terms=3)
    to_keywords = _rule(bm25_margin=-1.0)  # a decisive BM25 first pulls toward BM25
    to_meaning = _rule(bm25_margin=1.0)
    assert first(to_keywords.weight(feats, 0.5)) == "b"
    assert first(to_meaning.weight(feats, 0.5)) == "a"


def _level(n: int, seed: int) -> fusion_fit.Level:
    """Synthetic questions: the gold is found at high weights when feature 1 is positive,
    at low weights when it is negative (a rule can learn the sign of feature 1)."""
    rng = np.random.default_rng(seed)
    feats = rng.normal(size=(n, len(FEATURES)))
    grid = fusion_fit.GRID
    ranks = np.where((feats[:, [1]] > 0) == (grid[None, :] > 0.5), 0, 10)
    splits = np.array(["dev", "test"] * (n // 2))
    return fusion_fit.Level("turn", feats, ranks, splits)


def test_the_fit_learns_from_the_dev_half_only() -> None:
    lv = _level(400, seed=1)
    p = fusion_fit.fit([lv], base=0.45)
    assert p["coef"][1] > 0  # toward the dense leg when feature 1 is positive
    fig = fusion_fit.report([lv], 0.45, p)["turn test"]
    assert fig["adaptive"][0] > fig["fixed"][0] + 0.3
    # Scrambling the test half's outcomes leaves the fit as it was.
    scrambled = fusion_fit.Level(lv.name, lv.feats, lv.ranks.copy(), lv.splits)
    test = scrambled.splits == "test"
    scrambled.ranks[test] = 10 - scrambled.ranks[test]
    assert fusion_fit.fit([scrambled], base=0.45) == p


def test_write_fitted_round_trips(tmp_path: Path) -> None:
    """The bench writes a data file, the product's reader loads the same rule from it."""
    rule: dict[str, Any] = {**_rule(terms=0.1).to_dict(), "shift": 0.02}
    target = fusion_fit.write_fitted(rule, tmp_path / "fitted.json")
    assert [p.name for p in tmp_path.iterdir()] == ["fitted.json"]  # no staging file left
    assert fusion_adapt.fitted(target) == AdaptiveWeight.from_dict(rule)
    target.write_text("{}\n", encoding="utf-8")
    assert fusion_adapt.fitted(target) is None  # no fit: the configured weight as is


def test_the_bench_writes_the_file_the_product_reads_and_no_code() -> None:
    from brain.search.fitted import fitted_path

    assert fusion_fit.FITTED_JSON.resolve() == fitted_path().resolve()
    assert not hasattr(fusion_fit, "FITTED_PY")
    # Shipped with the package (a wheel without it would start with no fit).
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'brain = ["search/fitted.json"]' in pyproject
