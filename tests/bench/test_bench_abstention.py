"""bench/abstention.py's table: any@k with the floor off and on, and the share answering none,
per half, from the rows one retrieval per search gives."""

from __future__ import annotations

from bench.abstention import table


def test_the_table_counts_floor_off_on_and_none() -> None:
    rows = [
        {"split": "dev", "answerable": True, "gold_rank": 0, "answers": True},
        {"split": "dev", "answerable": True, "gold_rank": 3, "answers": False},
        {"split": "dev", "answerable": True, "gold_rank": None, "answers": True},
        {"split": "dev", "answerable": True, "gold_rank": 7, "answers": True},
        {"split": "dev", "answerable": False, "gold_rank": None, "answers": False},
        {"split": "dev", "answerable": False, "gold_rank": None, "answers": True},
        {"split": "test", "answerable": True, "gold_rank": 1, "answers": True},
        {"split": "test", "answerable": False, "gold_rank": None, "answers": False},
    ]
    out = table(rows)
    dev = out["dev"]
    assert dev["questions"] == 4
    assert (dev["any@1 floor off"], dev["any@1 floor on"]) == (0.25, 0.25)
    assert (dev["any@5 floor off"], dev["any@5 floor on"]) == (0.5, 0.25)
    assert (dev["any@10 floor off"], dev["any@10 floor on"]) == (0.75, 0.5)
    assert dev["none on another conversation"] == 0.5
    assert dev["none on own conversation"] == 0.25
    assert out["test"]["none on another conversation"] == 1.0
