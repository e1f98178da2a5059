"""bench/relevance_fit.py: the evidence each row derives, what a rule costs and abstains on,
and the fit keeping only rules within the loss bound."""

from __future__ import annotations

from typing import Any

from bench.relevance_fit import derive, evaluate, fit, learned


def _row(set_: str, split: str, answerable: bool, rank: int | None, sim: float,
         present: list[bool], term_in: list[list[bool]], pieces: list[int]) -> dict[str, Any]:
    return {"set": set_, "split": split, "answerable": answerable, "rank": rank,
            "sims": [sim, None], "n_terms": len(present), "present": present,
            "term_in": term_in, "pieces": pieces, "idf": [2.0] * len(present),
            "legs": [{"dense": 0, "bm25": 0}, {"bm25": 1}]}


def test_derive_reads_coverage_presence_and_specific_missing_terms() -> None:
    r = _row("coding", "dev", False, None, 0.3, [True, False, False],
             [[True, False, False], [False, False, False]], [1, 3, 1])
    derive([r])
    assert r["sim"] == 0.3
    assert round(r["covl"], 3) == 0.333
    assert round(r["missf"], 3) == 0.667
    assert (r["nmatch"], r["covp"]) == (1, 1.0)
    assert r["specmiss"] == 1  # the missing word the tokenizer splits in three


def test_evaluate_counts_loss_on_found_gold_and_none_on_unanswerable() -> None:
    rows = []
    for s in ("locomo", "coding"):
        rows += [
            _row(s, "dev", True, 0, 0.9, [True], [[True]], [1]),
            _row(s, "dev", True, 2, 0.2, [True], [[True]], [1]),
            _row(s, "dev", True, None, 0.1, [True], [[False]], [1]),
            _row(s, "dev", False, None, 0.1, [False], [[False]], [1]),
        ]
    derive(rows)
    out = evaluate(rows, lambda r: r["sim"] >= 0.5, "dev")
    for s in ("locomo", "coding"):
        assert out[s]["any@5 off"] == round(2 / 3, 4)
        assert out[s]["any@5 lost"] == round(1 / 3, 4)  # the gold at rank 3 under a weak cosine
        assert out[s]["none on unanswerable"] == 1.0


def test_fit_keeps_only_rules_within_the_loss_bound() -> None:
    rows = []
    for s in ("locomo", "coding"):
        for split in ("dev", "test"):
            rows += [_row(s, split, True, 0, 0.45, [True, True], [[True, True]], [1, 1]),
                     _row(s, split, False, None, 0.3, [True, False], [[True, False]], [1, 2])]
    derive(rows)
    best = fit(rows, top=3)
    assert best, "a rule that answers the answerable and abstains on the other exists"
    for f in best:
        assert all(d["any@5 lost"] <= 0.008 for d in f["dev"].values())
        assert f["min none (dev)"] == 1.0
        assert "test" in f


def test_derive_weighs_coverage_by_each_terms_rarity() -> None:
    r = _row("coding", "dev", True, 0, 0.6, [True, True], [[False, True], [True, False]], [1, 1])
    r["idf"] = [1.0, 3.0]
    derive([r])
    assert r["wcov"] == 0.75 and r["wcov1"] == 0.75  # the lead hit holds the rarer term
    assert r["holdr"] == 1.0 and r["both1"] == 1.0
    assert round(r["gap12"], 3) == 0.6  # one cosine: the gap is to nothing


def test_learned_keeps_the_loss_bound_on_dev_and_reports_test() -> None:
    rows = []
    for s in ("locomo", "coding"):
        for split in ("dev", "test"):
            for k in range(6):
                rows += [_row(s, split, True, 0, 0.55 + 0.05 * k, [True, True],
                              [[True, True]], [1, 1]),
                         _row(s, split, False, None, 0.1 + 0.03 * k, [True, False],
                              [[False, False]], [1, 2])]
    derive(rows)
    out = learned(rows)
    assert all(d["any@5 lost"] <= 0.008 for d in out["dev"].values())
    assert out["min none (dev)"] == 1.0  # separable: every unanswerable row abstains
    assert set(out["test"]) == {"locomo", "coding"}
    assert all("_score" not in r for r in rows)


def test_soft_cover_scores_held_words_one_and_others_by_their_nearest_word() -> None:
    from types import SimpleNamespace

    from bench.relevance_fit import _soft_cover, _words
    from brain.embedding.registry import REGISTRY, HashEmbedder

    assert _words("Fixed the Proxy-Authorization header, and the proxy's 2 headers") == [
        "fixed", "proxy-authorization", "header", "proxy", "headers"]
    m = SimpleNamespace(embedder=HashEmbedder(REGISTRY["offline/hash-384"]))
    got = _soft_cover(m, ["header", "headers", "zebra"], _words("the header was dropped"))
    assert got[0] == 1.0  # a word the document holds
    assert 0.3 < got[1] < 1.0  # its plural: near, by the shared trigrams
    assert got[2] < got[1]  # an unrelated word is further than the plural
    assert _soft_cover(m, ["header"], []) == [0.0]


def test_derive_reads_soft_coverage_of_the_best_lead_hit() -> None:
    r = _row("coding", "dev", True, 0, 0.6, [True], [[True]], [1])
    r["soft"] = [[1.0, 0.2], [0.7, 0.65], []]
    derive([r])
    assert r["smean"] == 0.675  # the second hit covers both words best on average
    assert r["smin"] == 0.65
    assert r["sfrac"] == 1.0
