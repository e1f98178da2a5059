"""The dev / test halves of the recall sets (bench/splits.json): disjoint, covering every
id, and exactly what the rule in bench/splits.py gives (so they cannot drift)."""

from __future__ import annotations

import json

import pytest

from bench import data_dir
from bench.splits import SPLITS_PATH, alternate, compute, ids, load


@pytest.mark.parametrize("dataset", ["locomo", "cosqa", "coding_notes"])
def test_halves_are_disjoint_and_balanced(dataset: str) -> None:
    s = load()
    dev, test = set(s[dataset]["dev"]), set(s[dataset]["test"])
    assert dev and test
    assert not dev & test
    assert abs(len(dev) - len(test)) <= 1
    assert ids(dataset, "full") is None
    assert ids(dataset, "dev") == dev


def test_locomo_is_split_by_conversation_and_cosqa_by_query() -> None:
    s = load()
    assert len(s["locomo"]["dev"]) + len(s["locomo"]["test"]) == 10
    assert all(i.startswith("conv-") for i in s["locomo"]["dev"] + s["locomo"]["test"])
    assert len(s["cosqa"]["dev"]) + len(s["cosqa"]["test"]) == 313  # label-1 queries


def test_alternate_is_stable_under_input_order() -> None:
    names = [f"q-{i}" for i in range(11)]
    a = alternate(names)
    b = alternate(list(reversed(names)) + names[:3])  # order and repeats do not matter
    assert a == b
    assert a["dev"][:3] == ["q-0", "q-2", "q-4"]  # by number, not as text (q-10 > q-9)
    assert set(a["dev"]) | set(a["test"]) == set(names)


def test_file_matches_the_rule_on_the_data() -> None:
    data = data_dir()
    if not (data / "locomo10.json").is_file():
        pytest.skip("benchmark data not present")
    assert compute(data) == json.loads(SPLITS_PATH.read_text(encoding="utf-8"))


def test_quick_mode_leaves_out_the_lever_stores_and_tokens_unless_named() -> None:
    from bench.__main__ import parse_args, plan

    assert plan(parse_args([])) == ({"locomo", "cosqa", "coding_notes", "speed", "llm", "tokens"},
                                    ("systems", "caller", "lever"))
    assert plan(parse_args(["--quick"])) == ({"locomo", "cosqa", "coding_notes", "speed", "llm"},
                                             ("systems",))
    named = parse_args(["--quick", "--only", "tokens", "--locomo-parts", "lever"])
    assert plan(named) == ({"tokens"}, ("lever",))
