"""The peer bench's pure parts: the interleaving, /proc parsing, ratios and verdicts, the
queries, and the model layout handed to the peer (no install, no server: milliseconds)."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import pytest

from bench.peer import (
    after_pause,
    distinct_queries,
    peer_model_file,
    proc_memory,
    ratios,
    rss_by_kind,
    schedule,
    settle,
    verdict,
)
from bench.peer_env import model_layout, peer_env, peer_tokenizer, stamp_matches


def test_schedule_alternates_who_goes_first_and_covers_every_call_once() -> None:
    plan = schedule(25, 10)
    assert [s for s, _, _ in plan] == ["ours", "peer", "peer", "ours", "ours", "peer"]
    for side in ("ours", "peer"):
        covered = [i for s, a, b in plan if s == side for i in range(a, b)]
        assert covered == list(range(25))
    with pytest.raises(ValueError):
        schedule(0, 10)


def test_proc_memory_reads_the_rss_lines_in_mb() -> None:
    text = "Name:\tpython\nVmPeak:\t 999 kB\nVmRSS:\t  204800 kB\nRssAnon:\t  102400 kB\n" \
           "RssFile:\t  102400 kB\nRssShmem:\t       0 kB\nThreads:\t4\n"
    assert proc_memory(text) == {"VmRSS": 200.0, "RssAnon": 100.0, "RssFile": 100.0,
                                 "RssShmem": 0.0}


def _side(rss: float, anon: float, store: float, search: float) -> dict[str, object]:
    return {"rss_mb": {"VmRSS": rss, "RssAnon": anon},
            "store_ms": {"p50": store, "p95": store * 2},
            "search_ms": {"p50": search, "p95": search * 2}}


def test_ratios_are_ours_over_theirs_and_verdicts_follow_the_targets() -> None:
    r = ratios(_side(600, 300, 10, 5), _side(300, 250, 40, 20))
    assert r["rss"] == 2.0 and r["rss_anon"] == 1.2
    assert r["store_p50"] == 0.25 and r["search_p95"] == 0.25
    lines = verdict(1000, r)
    assert lines[0] == "RSS ratio 2.00 (target <= 1.2: NOT met)"
    assert lines[1].endswith("met)") and "NOT" not in lines[1]
    assert not any(x.startswith("RSS") for x in verdict(100_000, r))
    missing = ratios(_side(600, 300, 10, 5), _side(0, 0, 0, 20))
    assert missing["rss"] is None and "store p50: not measured" in verdict(1000, missing)


def test_distinct_queries_never_repeat_and_skip_the_warm_up_ones() -> None:
    warm = distinct_queries(5)
    timed = distinct_queries(200, skip=5)
    assert len(set(timed)) == 200 and not set(warm) & set(timed)


def test_peer_tokenizer_truncates_at_256_and_drops_fixed_padding() -> None:
    bundled = {"truncation": {"max_length": 128, "strategy": "LongestFirst", "stride": 0},
               "padding": {"strategy": {"Fixed": 128}}, "model": {"type": "WordPiece"}}
    out = peer_tokenizer(bundled)
    assert out["truncation"]["max_length"] == 256 and out["padding"] is None
    assert out["model"] == bundled["model"] and bundled["padding"] is not None


def test_stamp_matches_only_the_same_spec(tmp_path: Path) -> None:
    stamp = tmp_path / "peer-stamp.json"
    assert not stamp_matches(stamp, "x==1")
    stamp.write_text(json.dumps({"spec": "x==1"}))
    assert stamp_matches(stamp, "x==1") and not stamp_matches(stamp, "x==2")
    stamp.write_text("not json")
    assert not stamp_matches(stamp, "x==1")


def test_model_layout_is_what_the_peers_onnx_embedder_reads(tmp_path: Path) -> None:
    bundled = tmp_path / "bundled"
    bundled.mkdir()
    (bundled / "tokenizer.json").write_text(json.dumps(
        {"truncation": None, "padding": {"strategy": {"Fixed": 128}}}))
    (bundled / "config.json").write_text("{}")
    onnx_a, onnx_b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx_a.write_bytes(b"a")
    onnx_b.write_bytes(b"b")
    root = model_layout(onnx_a, bundled, tmp_path / "models")
    model_layout(onnx_b, bundled, tmp_path / "models")  # a new export replaces the link
    folder = root / "all-MiniLM-L6-v2" / "onnx"
    assert (folder / "model.onnx").read_bytes() == b"b"
    assert json.loads((folder / "tokenizer.json").read_text())["padding"] is None
    env = peer_env(tmp_path / "home", root)
    seen = Path(env["HOME"]) / ".cache" / "mcp_memory" / "onnx_models" / "all-MiniLM-L6-v2"
    assert (seen / "onnx" / "model.onnx").read_bytes() == b"b"
    assert env["MCP_MEMORY_ONNX_ALLOW_DOWNLOAD"] == "0"
    assert env["MCP_MEMORY_SQLITE_PATH"].startswith(str(tmp_path / "home"))
    assert not any(k.startswith("BRAIN__") for k in env)


def test_rss_by_kind_groups_smaps_mappings() -> None:
    smaps = "\n".join([
        "55d0-55e0 rw-p 00000000 00:00 0          [heap]", "Rss:        2048 kB",
        "7f00-7f10 r-xp 00000000 08:01 12 /venv/lib/onnxruntime/capi/x.cpython-311.so",
        "Rss:        1024 kB",
        "7f10-7f20 r--s 00000000 08:01 13 /tmp/h/store/c/segments/ab-cd/payload_index/f/page_0.dat",
        "Rss:        4096 kB", "Size:        8192 kB",
        "7f20-7f30 rw-p 00000000 00:00 0 ", "Rss:        1024 kB",
    ])
    assert rss_by_kind(smaps) == {"store: payload_index": 4.0, "anonymous": 3.0,
                                  "shared libraries": 1.0}


def test_the_peer_runs_the_plain_graph_unless_asked_for_ours(tmp_path: Path) -> None:
    """The peer's own download is an unfused export: it gets the plain file by default (a
    cached one is used as it is, not exported again) and our fused one with ``ours``."""
    from types import SimpleNamespace

    plain, fused = tmp_path / "m-fp32.onnx", tmp_path / "m-fp32-fused.onnx"
    plain.write_bytes(b"plain")
    fused.write_bytes(b"fused")
    emb = SimpleNamespace(plain_file=plain, model_file=fused)
    said: list[str] = []
    assert peer_model_file(emb, tmp_path / "bundled", "plain", said.append) == plain
    assert peer_model_file(emb, tmp_path / "bundled", "ours", said.append) == fused
    assert said == []  # nothing exported: the plain file was there


def test_settle_waits_for_every_server_to_stop_using_cpu() -> None:
    """A batch starts once the other server's leftover work (onnxruntime's spinning threads,
    a store's deferred writes) is done: CPU time still moving keeps the wait going."""
    ticks = {1: iter([0.0, 0.1, 0.2, 0.3] + [0.3] * 100), 2: iter([5.0] * 200)}

    waited = asyncio.run(settle([1, 2], quiet_s=0.03, cap_s=2.0,
                                     cpu=lambda pid: next(ticks[pid])))
    assert 0.03 <= waited < 0.5  # three moving reads, then quiet for 30 ms
    busy = itertools.count()
    capped = asyncio.run(settle([1], quiet_s=0.03, cap_s=0.1,
                                     cpu=lambda pid: float(next(busy))))
    assert 0.1 <= capped < 0.3  # a server that never idles is waited for at most cap_s


def test_after_pause_calls_each_side_once_per_query_taking_turns_to_go_first() -> None:
    """The after-a-pause figure: one call at a time, every query on both sides, the side that
    goes first alternating (as in the burst), each call timed on its own."""
    calls: list[tuple[str, str]] = []

    class Fake:
        def __init__(self, side: str) -> None:
            self.side = side
            self.proc = type("P", (), {"pid": 1})()

        async def call(self, tool: str, args: dict[str, str]) -> tuple[float, dict[str, str]]:
            calls.append((self.side, args["query"]))
            return float(len(calls)), {}

    servers = {"ours": Fake("ours"), "peer": Fake("peer")}
    args = {k: [{"query": q} for q in ("a", "b", "c")] for k in servers}
    out = asyncio.run(after_pause(servers, {"ours": "s", "peer": "s"}, args,  # type: ignore[arg-type]
                                  pause_s=0.01, cpu=lambda pid: 0.0))
    assert calls == [("ours", "a"), ("peer", "a"), ("peer", "b"), ("ours", "b"),
                     ("ours", "c"), ("peer", "c")]
    assert out == {"ours": [1.0, 4.0, 5.0], "peer": [2.0, 3.0, 6.0]}
