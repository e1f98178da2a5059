"""The coding-notes set (bench/data/coding_notes.json) and its bench: enough queries with
gold, enough unanswerable ones, every gold id a stored note, halves by topic that are disjoint
and deterministic; and the bench end to end on a subsample with the offline hash embedder."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench import BenchContext, coding_notes, report
from bench.__main__ import DESCRIBE, SYSTEMS
from bench.splits import alternate, load, split_of
from bench.splits import coding_notes as coding_notes_halves
from brain.embedding.registry import REGISTRY, HashEmbedder

DATA = coding_notes.load()


def test_enough_queries_with_gold_and_unanswerable() -> None:
    qs = DATA["queries"]
    answerable = [q for q in qs if q["gold"]]
    unanswerable = [q for q in qs if not q["gold"]]
    assert len(answerable) >= 200
    assert len(unanswerable) >= 0.2 * len(qs)
    assert {q["unanswerable"] for q in unanswerable} == {"held_out", "off_topic", "absent_feature"}
    assert len({q["id"] for q in qs}) == len(qs)
    assert DATA["counts"]["queries"] == len(qs)


def test_every_gold_id_is_a_stored_note_and_no_query_is_its_note() -> None:
    notes = {n["id"]: n for n in DATA["notes"]}
    kinds = Counter(n["kind"] for n in notes.values() if not n["held_out"])
    assert {"decision", "mistake", "fix", "project_context", "session_summary"} <= set(kinds)
    for q in DATA["queries"]:
        for g in q["gold"]:
            assert g in notes and not notes[g]["held_out"], q
            assert q["query"].lower() not in notes[g]["content"].lower()
        for g in q.get("about", []):  # a held-out query speaks of notes that are not stored
            assert notes[g]["held_out"]
    for n in notes.values():  # a fix is linked to its mistake, held out with it
        if n.get("fixes"):
            m = notes[n["fixes"]]
            assert m["kind"] == "mistake" and m["held_out"] == n["held_out"]


def test_halves_split_by_topic_disjoint_and_deterministic() -> None:
    s = load()["coding_notes"]
    assert s == coding_notes_halves() == alternate([q["topic"] for q in reversed(DATA["queries"])])
    dev, test = set(s["dev"]), set(s["test"])
    assert dev and test and not dev & test
    assert dev | test == {q["topic"] for q in DATA["queries"]}
    half = split_of("coding_notes")
    by_half = Counter(half[q["topic"]] for q in DATA["queries"])
    assert min(by_half.values()) >= 0.4 * len(DATA["queries"])
    for h in ("dev", "test"):  # each half has both kinds of query
        assert any(not q["gold"] for q in DATA["queries"] if half[q["topic"]] == h)


@pytest.fixture
def ctx(tmp_path: Path) -> BenchContext:
    return BenchContext(
        embedder=HashEmbedder(REGISTRY["offline/hash-384"]), data=tmp_path, quick=True,
        log=lambda _m: None, sections={"embedding": {"model": "offline/hash-384"}},
        scratch=tmp_path / "scratch", deep=False,
    )


async def test_bench_end_to_end_on_a_subsample(ctx: BenchContext) -> None:
    systems = {k: SYSTEMS[k] for k in ("default", "bm25")}
    out = await coding_notes.run(ctx, systems, sample=40, detail=True)
    assert out["queries"] == 40 and 0 < out["unanswerable"] < 40
    rows = out.pop("per_query")  # the calibration rows: one per query, default config
    assert len(rows) == 40 and all("score" in r["hits"][0] for r in rows if r["hits"])
    assert sum(not r["answerable"] for r in rows) == out["unanswerable"]
    for row in out["systems"].values():
        assert row["all"]["n"] == out["answerable"]
        assert 0.0 <= row["all"]["any@1"] <= row["all"]["any@5"] <= row["all"]["any@10"] <= 1.0
        assert {"dev", "test"} <= set(row)
    assert out["systems"]["bm25"]["all"]["any@10"] > 0.5  # the key terms are in the notes
    for a in out["abstention"].values():
        groups = a["all"]
        assert groups["unanswerable"]["n"] == out["unanswerable"]
        assert 0.0 <= groups["unanswerable"]["none"] <= 1.0
        assert groups["answerable"]["top_score"]["n"] > 0
    text = report.render({"machine": {"date": "d", "cpu_count": 2, "cpu_model": "", "python": "",
                                      "torch": "", "torch_threads": 0, "qdrant_edge": "",
                                      "load_average": []},
                          "coding_notes": out}, DESCRIBE)
    assert "### Coding notes" in text and "top score p10 / p50 / p90" in text
