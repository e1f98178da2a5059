"""The link graph's cache file: saved, loaded back when current, and rewritten no more than a
tenth of the time however large it grows (the saver's pause follows the last save)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.graph import SAVE_SHARE, LinkGraph


def _graph(path: Path, n: int) -> LinkGraph:
    g = LinkGraph(path)
    g.rebuild([{"zk_id": f"n{i}", "title": f"note {i}", "project": "p",
                "links": [f"n{i - 1}"] if i else []} for i in range(n)], seq=7)
    return g


def test_a_saved_graph_loads_back_only_when_current(tmp_path: Path) -> None:
    g = _graph(tmp_path / "graph.json", 50)
    g.save()
    again = LinkGraph(tmp_path / "graph.json")
    assert not again.load(8)  # stamped with another link sequence: rebuilt from the store
    assert again.load(7) and again.stats() == {"nodes": 50, "edges": 49}
    assert again.neighbours("n1") == [("n0", "related", "out"), ("n2", "related", "in")]


def test_the_saver_pauses_longer_after_a_slow_save(tmp_path: Path) -> None:
    g = _graph(tmp_path / "graph.json", 20_000)
    assert g.save_interval() == 2.0  # never saved: the base pause
    g.save()
    assert g.last_save_s > 0
    assert g.save_interval() == pytest.approx(max(2.0, g.last_save_s / SAVE_SHARE))
    g.last_save_s = 1.5  # a save at 1,000,000 notes takes seconds
    assert g.save_interval() == pytest.approx(15.0)
    assert g.save_interval(base_s=30.0) == 30.0
