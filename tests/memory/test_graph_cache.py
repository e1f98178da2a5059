"""The link graph's cache file: saved, loaded back when current, and rewritten no more than a
tenth of the time however large it grows (the saver's pause follows the last save)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from brain.memory.graph import SAVE_PIECE, SAVE_SHARE, LinkGraph, NoteIds


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


def test_a_note_without_links_costs_no_graph_node(tmp_path: Path) -> None:
    """Every note is known (stats, the health scan's cross-check, the damage check), but only
    linked notes and link targets are DiGraph nodes: the DiGraph is most of a node's cost."""
    g = LinkGraph(tmp_path / "graph.json")
    g.rebuild([{"zk_id": "a", "links": ["b"]}, {"zk_id": "b"}, {"zk_id": "c"},
               {"zk_id": "d", "links": ["gone"]}], seq=1)
    assert set(g.g.nodes) == {"a", "b"} and set(g.notes) == {"a", "b", "c", "d"}
    assert g.stats() == {"nodes": 4, "edges": 1} and "c" in g and "gone" not in g
    g.upsert_node("e")
    g.set_links("f", [], {})  # a note written with no links
    assert set(g.g.nodes) == {"a", "b"} and {"e", "f"} <= set(g.notes)
    g.set_links("e", ["x"], {"x": "supports"})  # a link to an id the store does not hold
    assert g.node_ids() == {"a", "b", "c", "d", "e", "f", "x"}
    assert not g.isolated_target("x") and not g.isolated_target("a")
    g.set_links("e", [], {})
    assert g.isolated_target("x")
    g.remove_node("x")
    g.remove_node("c")
    assert g.stats() == {"nodes": 5, "edges": 1} and "c" not in g


def test_a_cache_of_the_old_format_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"version": 1, "seq": 3, "edges": [],
                                "nodes": [{"id": "a", "title": "t", "project": "p"}]}))
    assert not LinkGraph(path).load(3)
    g = _graph(path, 3)
    g.save()
    again = LinkGraph(path)
    assert again.load(7) and set(again.notes) == {"n0", "n1", "n2"} and again.edges() == g.edges()


def test_the_saved_rows_are_the_graphs_links_after_any_change(tmp_path: Path) -> None:
    """A save writes each note's row of out-links, kept beside the DiGraph: after links set,
    replaced, cleared and notes removed (their in-links with them), in more rows than one
    piece of the writer, the file loads back to exactly the DiGraph's edges."""
    rng = random.Random(4)
    n = SAVE_PIECE * 2 + 37
    g = _graph(tmp_path / "graph.json", n)
    for _ in range(3_000):
        src = f"n{rng.randrange(n)}"
        if rng.random() < 0.05:
            g.remove_node(src)
            continue
        links = [f"n{rng.randrange(n)}" for _ in range(rng.randrange(4))]
        g.set_links(src, links, {d: rng.choice(("related", "supports")) for d in links})
    g.save()
    again = LinkGraph(tmp_path / "graph.json")
    assert again.load(7)
    assert again.edges() == g.edges() and len(g.edges()) > SAVE_PIECE
    assert again.neighbours("n5") == g.neighbours("n5")
    assert set(again.notes) == set(g.notes)


def test_a_dump_is_the_graph_when_it_was_taken(tmp_path: Path) -> None:
    """The saver takes the dump under the write lock and writes it after: changes made in
    between are not in that file (the next save has them), so its number matches its links."""
    g = _graph(tmp_path / "graph.json", 4)
    data = g.dump(9)
    g.set_links("n1", ["n3"], {"n3": "supports"})
    g.remove_node("n2")
    g.save(data)
    old = LinkGraph(tmp_path / "graph.json")
    assert old.load(9)
    assert old.edges() == [("n1", "n0", "related"), ("n2", "n1", "related"),
                           ("n3", "n2", "related")]
    g.save()
    assert LinkGraph(tmp_path / "graph.json").load(9)
    assert g.edges() == [("n1", "n3", "supports")]


def test_a_cache_of_edges_version_3_still_loads(tmp_path: Path) -> None:
    """The cache written before rows (one list of edges) is read as it is: an upgrade does not
    rebuild the graph from the store."""
    path = tmp_path / "graph.json"
    g = _graph(path, 3)
    notes = g.dump()["notes"]
    path.write_text(json.dumps({"version": 3, "seq": 7, "notes": notes,
                                "edges": [["n1", "n0", "related"], ["n2", "n1", "supports"]]}))
    again = LinkGraph(path)
    assert again.load(7)
    assert again.edges() == [("n1", "n0", "related"), ("n2", "n1", "supports")]
    again.save()
    assert json.loads(path.read_text())["out"] == {"n1": [["n0", "related"]],
                                                   "n2": [["n1", "supports"]]}


def test_note_ids_hold_a_note_in_four_bytes_and_answer_like_a_set(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(NoteIds, "MERGE_AT", 8)  # merges happen within the test
    ids = [f"ZK-{i * 7919:08X}" for i in range(100_000)]
    held = NoteIds([*ids, "legacy-id"])
    assert held._base.nbytes == 4 * 100_000 and len(held) == 100_001
    mirror = {*ids, "legacy-id"}
    for i in range(40):  # adds and removals across several merges
        new, old = f"ZK-{0xFFFF0000 + i:08X}", ids[i * 3]
        held.add(new)
        held.discard(old)
        held.discard("never-held")
        mirror.add(new)
        mirror.discard(old)
        assert new in held and old not in held
    held.add(ids[3])  # removed above, back again
    mirror.add(ids[3])
    assert len(held) == len(mirror) and set(held) == mirror
    assert "ZK-0000000a" not in held  # lowercase hex is not a note id of ours
    held.add("ZK-0000000a")
    assert "ZK-0000000a" in held and "ZK-0000000A" not in held
    asked = [*ids[:50], "legacy-id", "ZK-0000000a", "ZK-0000000A", "never-held", "ZK-FFFFFFFF",
             "ZK-00000000", f"ZK-{0xFFFF0000:08X}"]
    assert held.contains_many(asked) == [zk in mirror | {"ZK-0000000a"} for zk in asked]
    assert NoteIds(["legacy-id"]).contains_many(["legacy-id", "ZK-00000001"]) == [True, False]
    again = NoteIds.load(json.loads(json.dumps(held.dump())))
    assert set(again) == set(held) and len(again) == len(held)
