"""The benchmark code path on a tiny data set and the offline hash embedder (seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import BenchContext, cosqa, locomo, report, speed
from bench.__main__ import DESCRIBE, SYSTEMS, targets
from brain.embedding.registry import REGISTRY, HashEmbedder
from brain.memory import RecallFilter
from brain.memory.bulk import BulkNote, bulk_add

HASH = {"embedding": {"model": "offline/hash-384"}}


def _locomo(path: Path) -> None:
    def turn(speaker: str, i: str, text: str, **kw: str) -> dict[str, str]:
        return {"speaker": speaker, "dia_id": i, "text": text, **kw}

    conv = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:00 pm on 8 May, 2023",
        "session_1": [
            turn("Ann", "D1:1", "I adopted a puppy named Rex yesterday"),
            turn("Bob", "D1:2", "Congrats! I started pottery classes"),
            turn("Ann", "D1:3", "Look at him", blip_caption="a photo of a small dog"),
        ],
        "session_2_date_time": "2:00 pm on 9 June, 2023",
        "session_2": [
            turn("Bob", "D2:1", "My pottery bowl cracked in the kiln"),
            turn("Ann", "D2:2", "Rex learned to sit this week"),
        ],
    }
    qa = [
        {
            "question": "What is the name of Ann's puppy?",
            "answer": "Rex",
            "evidence": ["D1:1"],
            "category": 1,
        },
        {
            "question": "What did Bob make in pottery?",
            "answer": "a bowl",
            "evidence": ["D1:2; D2:1"],
            "category": 4,
        },  # malformed: split on ';'
        {
            "question": "What did Rex learn?",
            "answer": "sit",
            "evidence": ["D2:2", "D"],
            "category": 2,
        },
        {"question": "Adversarial", "answer": "x", "evidence": ["D1:1"], "category": 5},
        {"question": "No evidence", "answer": "x", "evidence": ["D30:05"], "category": 1},
    ]
    path.write_text(json.dumps([{"conversation": conv, "qa": qa}]), encoding="utf-8")


def _cosqa(path: Path) -> None:
    items = [
        {
            "doc": "python read json file",
            "code": "def load(p):\n    return json.load(open(p))",
            "label": 1,
        },
        {"doc": "python reverse a list", "code": "def rev(xs):\n    return xs[::-1]", "label": 1},
        {
            "doc": "python sum of squares",
            "code": "def sq(xs):\n    return sum(x*x for x in xs)",
            "label": 1,
        },
        {"doc": "python unrelated", "code": "def rev(xs):\n    return xs[::-1]", "label": 0},
    ]
    path.write_text(json.dumps(items), encoding="utf-8")


@pytest.fixture
def ctx(tmp_path: Path) -> BenchContext:
    data = tmp_path / "data"
    data.mkdir()
    _locomo(data / "locomo10.json")
    _cosqa(data / "cosqa-dev.json")
    return BenchContext(
        embedder=HashEmbedder(REGISTRY["offline/hash-384"]),
        data=data,
        quick=True,
        log=lambda _m: None,
        sections=HASH,
        scratch=tmp_path / "scratch",
    )


def test_locomo_protocol_parsing(ctx: BenchContext) -> None:
    convs = locomo.load(ctx.data / "locomo10.json")
    qs = convs[0].questions
    # category 5 excluded, the question with no resolvable evidence skipped
    assert [q.category for q in qs] == [1, 4, 2]
    assert qs[1].gold_turns == frozenset({"D1:2", "D2:1"})
    assert qs[1].gold_sessions == frozenset({1, 2})
    assert convs[0].turns[2].text == (
        '(1:00 pm on 8 May, 2023) Ann said, "Look at him" [shares a photo of a small dog]'
    )


async def test_locomo_and_cosqa_through_the_tools(ctx: BenchContext, tmp_path: Path) -> None:
    lo = await locomo.run(ctx, SYSTEMS)
    assert lo["questions"] == 3
    for level in ("turn", "session"):
        systems = lo[level]["systems"]
        assert set(SYSTEMS) <= set(systems)
        for row in systems.values():
            assert row["all"]["n"] == 3
            assert 0.0 <= row["all"]["any@1"] <= row["all"]["any@10"] <= 1.0
        # session level: 2 sessions and top 10 -> every gold session is found
        if level == "session":
            assert systems["default"]["all"]["all@10"] == 1.0
    # BM25 finds the puppy question's turn first: a rare shared word
    assert lo["turn"]["systems"]["bm25"]["1"]["any@1"] == 1.0
    # the bulk-loaded ablations run in full mode only; called here directly
    convs = locomo.load(ctx.data / "locomo10.json")
    pooling = await locomo.session_pooling_ablation(ctx, convs)
    assert set(pooling) == {"bulk: default", "bulk: no long-text pooling (model truncates)"}
    assert all(row["all"]["n"] == 3 for row in pooling.values())
    ablations = await locomo.index_ablations(ctx, convs)
    assert set(ablations) == set(locomo.INDEX_ABLATIONS)
    assert all(row["all"]["n"] == 3 for row in ablations.values())
    co = await cosqa.run(ctx, SYSTEMS)
    assert co["corpus"] == 3 and co["queries"] == 3
    assert co["systems"]["default"]["R@10"] == 1.0
    res = {
        "quick": True,
        "machine": {
            "date": "d",
            "cpu_count": 2,
            "cpu_model": "m",
            "python": "3",
            "torch": "t",
            "torch_threads": 1,
            "qdrant_edge": "q",
            "load_average": [0, 0, 0],
        },
        "model": "hash",
        "locomo": lo,
        "cosqa": co,
        "elapsed_s": 1.0,
    }
    res["targets"] = targets(res)
    md = report.render(res, DESCRIBE)
    assert "LoCoMo, turn level" in md and "CoSQA dev" in md and "target >= 0.75" in md
    # A run writes its own report beside its JSON; the committed BENCHMARKS.md (figures
    # assembled from several runs and one-purpose benches) is never replaced by it.
    for quick in (True, False):
        md_path, json_path = report.write({**res, "quick": quick}, tmp_path, DESCRIBE)
        assert md_path.parent == json_path.parent == tmp_path / "bench_out"
        assert md_path.read_text(encoding="utf-8") == report.render({**res, "quick": quick},
                                                                    DESCRIBE)
    assert not (tmp_path / "BENCHMARKS.md").exists()


async def test_speed_scale_small(ctx: BenchContext) -> None:
    row = await speed.measure_scale(ctx, 300, queries=5)
    assert row["notes"] == 300 and row["bulk_notes_per_s"] > 0
    assert row["search_all_ms"]["n"] == 5 and row["add_memory_ms"]["n"] == 5
    assert row["search_all_ms"]["p50"] > 0
    # Both timed searches answered with notes (top_k = 10), not an empty scope.
    assert row["mean_hits"] == {"all": 10, "project": 10}
    assert row["peak_rss_mb"] > 0
    # At rest the process holds about its peak at most (the kernel's high-water mark lags the
    # live RSS by a few pages), and more than nothing.
    assert 0 < row["rss_at_rest_mb"] <= row["peak_rss_mb"] + 16
    # A restarted server (a child process on the store the scale left) timed the same calls.
    rst = row["restarted"]
    assert "error" not in rst, rst
    assert rst["search_all_ms"]["n"] == 5 and rst["search_all_ms"]["p50"] > 0
    assert rst["add_memory_ms"]["n"] == 5 and rst["rss_at_rest_mb"] > 0
    # Where that RSS is: anonymous and file-backed add up to it (read a moment later), and
    # the largest mappings are named, the store's files by their path in the data dir.
    parts = rst["rss_parts_mb"]
    assert abs(parts["RssAnon"] + parts["RssFile"] + parts["RssShmem"]
               - rst["rss_at_rest_mb"]) < 0.1 * rst["rss_at_rest_mb"]
    assert "[anon]" in parts["largest"] or "[heap]" in parts["largest"]
    assert sum(parts["largest"].values()) <= rst["rss_at_rest_mb"] + 1
    # ... and broke a search down by stage: the profile names where the body's time went.
    st = rst["stages_all_projects"]
    assert st["queries"] == 5 and st["tool_call_ms"]["n"] == st["body_ms"]["n"] == 5
    stage = st["profiled_stage_ms_per_call"]
    assert stage["query embedding"] > 0 and stage["  store: dense leg (HNSW)"] > 0
    assert stage["retrieval (the two legs below, fusion, payloads)"] >= (
        stage["  store: dense leg (HNSW)"])
    section = report.speed_section({"scales": [row]})
    assert "a restarted server on the store this scale left" in section
    assert "where a search (one project) goes" in section
    assert "where that RSS is (MB): anonymous" in section


def test_bulk_payload_matches_add(brain) -> None:  # noqa: ANN001
    one = brain.memory.add("Pin torch before installing the package", project="p").note
    res = bulk_add(
        brain.memory,
        [BulkNote("Use uv to install the venv", project="p"), "plain string note"],
        project="p",
        batch=1,
    )
    assert len(res.zk_ids) == 2 and len(set(res.zk_ids)) == 2
    direct = brain.store.retrieve([_pid(one["zk_id"])])[0].payload
    bulk = brain.store.retrieve([_pid(res.zk_ids[0])])[0].payload
    assert set(direct) == set(bulk)
    assert bulk["enriched_by"] == "heuristic" and bulk["embed_model"] == direct["embed_model"]
    hits = brain.memory.search("uv venv install", 5, RecallFilter(project="p"))
    assert res.zk_ids[0] in [h["zk_id"] for h in hits]


def _pid(zk: str) -> str:
    from brain.notes import point_id

    return point_id(zk)


def test_dbsf_follows_the_confident_leg() -> None:
    from brain.search.fusion import fuse
    from brain.vector_store import Hit
    from config import RetrievalSettings

    # Dense: flat scores (cannot tell its hits apart); BM25: one hit far above the rest.
    dense = [Hit(f"d{i}", 0.50 - i * 0.001, {}) for i in range(20)]
    sparse = [Hit("k", 12.0, {}), *(Hit(f"s{i}", 2.0 - i * 0.01, {}) for i in range(19))]
    assert fuse(dense, sparse, "dbsf", 0.55)[0].id == "k"
    # Mirror image: a confident dense leg wins over a flat BM25 leg.
    dense = [Hit("c", 0.9, {}), *(Hit(f"d{i}", 0.30 - i * 0.001, {}) for i in range(19))]
    sparse = [Hit(f"s{i}", 5.0 - i * 0.01, {}) for i in range(20)]
    assert fuse(dense, sparse, "dbsf", 0.55)[0].id == "c"
    # Plain RRF cannot tell: the two rank-1 hits tie (their legs' ranks break the tie).
    rrf_k = RetrievalSettings().rrf_k
    assert {c.id for c in fuse(dense, sparse, "rrf", rrf_k=rrf_k)[:2]} == {"c", "s0"}


def test_targets_name_the_restarted_server_figure() -> None:
    def p(ms: float) -> dict[str, float]:
        return {"p50": ms, "p95": ms, "p99": ms, "n": 1}

    row = {"notes": 100_000, "search_all_ms": p(40.0), "search_project_ms": p(30.0),
           "add_memory_ms": p(45.0),
           "restarted": {"search_all_ms": p(22.0), "search_project_ms": p(24.0),
                         "deep_search_ms": p(60.0), "add_memory_ms": p(33.0),
                         "rss_at_rest_mb": 1200.0}}
    lines = targets({"speed": {"scales": [row]}})
    assert "40.0 ms across all (target <= 25 ms: NOT met)" in lines[0]
    assert lines[1].startswith("100,000 notes, a restarted server on that store")
    assert "24.0 ms in one project, 22.0 ms across all (target <= 25 ms: met)" in lines[1]


def test_parallel_legs_times_each_part_both_ways() -> None:
    """bench.parallel_legs (BENCHMARKS.md: the legs do not gain from threads) on a small store
    with the bundled model: every part is timed one after the other and side by side."""
    from bench import parallel_legs

    out = parallel_legs.measure(2_000)
    assert out["points"] == 2_000
    for leg in ("dense", "sparse"):
        row = out[leg]
        # Figures only: their values are the bench's (a loaded box moves the share).
        assert row["sequential_ms"] > 0 and row["two_threads_ms"] > 0
        assert row["spinner_share"] > 0
    both = out["embedding_and_dense"]
    assert all(both[k] > 0 for k in ("embedding_ms", "dense_ms", "one_after_the_other_ms",
                                     "overlapped_ms"))


def test_restart_cold_copy_keeps_holes_and_leaves_no_lock(tmp_path: Path) -> None:
    """bench.copy_store, as ``bench.restart --cold`` and bench.rss_owner copy a store."""
    from bench import copy_store

    home = tmp_path / "speed-10"
    (home / "store" / "shard").mkdir(parents=True)
    sparse = home / "store" / "shard" / "vectors.dat"
    with sparse.open("wb") as f:  # 8 MB of which one byte is written: a file of holes
        f.seek(8 << 20)
        f.write(b"x")
    (home / "brain.lock").write_text("pid", encoding="ascii")
    (home / "owner.json").write_text("{}", encoding="ascii")
    copy = copy_store(home, tmp_path / "cold" / home.name)
    moved = copy / "store" / "shard" / "vectors.dat"
    assert moved.read_bytes()[-1:] == b"x" and moved.stat().st_size == sparse.stat().st_size
    assert moved.stat().st_blocks * 512 < (1 << 20)  # the holes stayed holes
    assert not (copy / "brain.lock").exists() and not (copy / "owner.json").exists()
    assert (home / "brain.lock").exists()  # the original is untouched


async def test_search_stages_time_the_search_the_tool_runs(brain) -> None:  # noqa: ANN001
    """An all-projects call's body, as the stages run it, searches every project (the
    server moves the top-level ``all_projects`` into ``filters``); it used to search the
    default project, which holds none of these notes, and time an empty search."""
    from bench.search_stages import _full, stages

    bulk_add(brain.memory, [BulkNote(f"The cache layer evicts entry {i} on write", project=p)
                            for i in range(3) for p in ("proj-0", "proj-1")])
    full = _full({"properties": {"project": {"default": None}}},
                 {"query": "cache eviction", "top_k": 4, "all_projects": True})
    # A NoteSearch: a top-level all_projects left unmoved would not have built one.
    assert full.filters is not None and full.filters.all_projects is True
    out = await stages(brain, [{"query": "cache eviction", "top_k": 4, "all_projects": True}])
    assert out["queries"] == 1 and out["body_hits"] == out["tool_hits"] == 4
