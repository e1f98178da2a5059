"""bench/filter_indexes.py on a small brain (the offline hash embedder): every size gets the
three filters and the add timed on both sides, with the indexes and without them."""

from __future__ import annotations

import pytest

from bench import filter_indexes
from brain.embedding.registry import REGISTRY, HashEmbedder


def test_both_sides_are_timed_for_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    rows = filter_indexes.run([60, 120], queries=3, adds=3,
                             embedder=HashEmbedder(REGISTRY["offline/hash-384"]))
    assert [r["notes"] for r in rows] == [60, 120]
    for r in rows:
        for side in ("indexed", "not indexed"):
            for label in ("project", "search on a branch", "add (supersession)",
                          "fs_search path privacy", "search as_of", "a fix's look-up",
                          "brain_stats", "add_memory"):
                assert r[f"{label}, {side} (ms)"] > 0
