"""Quantization: ``[index] quantization = "none"`` vs ``"int8"`` side by side, in one run.

Each store is built once through the product's paths (brain.memory.bulk for the notes, the index
worker for the HNSW index, settings only), measured with ``none``, switched to ``int8`` by the
``health_quantization`` tool (the maintenance action: the segments are rebuilt out of process)
and measured again. Same data, same queries, same process.

- Recall: LoCoMo (turn level, the conversations of the test half, any@10 on search_memory)
  and CoSQA (the test half of the queries, MRR@10 on search_memory). Quantization lives in
  HNSW segments only: a store below ``[index] min_unindexed`` dense vectors has none and
  searches exactly. So these stores index from 64 vectors on (``min_unindexed = 64``), to
  measure what int8 costs where it applies.
- Speed and size at N notes (10k by default): search_memory p50/p95 (all projects, one
  project) at rest, the store's size on disk (allocated blocks), the int8 data's size, the
  process RSS after the searches, and how long the switch took. Default index settings.

``python -m bench --only quantization [--quick]`` (quick: 2k notes);
``BRAIN_BENCH_QUANT_NOTES`` sets N, ``BRAIN_BENCH_QUANT_PARTS`` (locomo,cosqa,speed) the parts.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from bench import BenchContext, call, mcp_client, percentiles
from bench.splits import split_of

MODES = ("none", "int8")
RECALL_MIN_UNINDEXED = 64
FAST_WORKER = {"workers": {"index": {"enabled": True, "interval_s": 1.0}}}


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _disk_mb(path: Path, pattern: str = "*") -> float:
    """Allocated size (Edge preallocates sparse files: the apparent size says little)."""
    total = 0
    for p in path.rglob(pattern):
        if p.is_file():
            total += p.stat().st_blocks * 512
    return round(total / 2**20, 1)


async def _rest(brain: Any, limit_s: float = 900.0) -> float:
    """Wait, doing nothing to the store, until the index worker has indexed it (or found
    nothing more to do)."""
    im = brain.index_maintenance
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        state = brain.store.index_state()
        # At rest: few unindexed vectors, or the worker has run and sees nothing more to do
        # (Edge may leave its newest segment below the threshold unindexed).
        if not im.running and ((state.unindexed or 0) < im.config.min_unindexed
                               or (im.runs > 0 and im.reason(state) is None)):
            break
        await asyncio.sleep(0.2)
    return round(time.perf_counter() - t0, 1)


def _brief_index(index: Any) -> dict[str, Any]:
    keys = ("points", "indexed", "unindexed", "segments")
    return {k: index.get(k) for k in keys} if isinstance(index, dict) else {}


async def _switch(client: Any, mode: str) -> dict[str, Any]:
    t = time.perf_counter()
    out = await call(client, "health_quantization", {"mode": mode, "dry_run": False})
    out["wall_s"] = round(time.perf_counter() - t, 1)
    return out


async def _locomo(ctx: BenchContext) -> dict[str, Any]:
    from bench import locomo
    from brain.memory.bulk import BulkNote, bulk_add

    test = {sid for sid, half in split_of("locomo").items() if half == "test"}
    convs = [c for c in locomo.load(ctx.data / "locomo10.json") if c.sample_id in test]
    if ctx.quick:
        convs = convs[:2]
    brain = ctx.open_brain("quant-locomo", index={"min_unindexed": RECALL_MIN_UNINDEXED},
                           **FAST_WORKER)
    out: dict[str, Any] = {"conversations": len(convs)}
    try:
        maps: dict[int, dict[str, Any]] = {}
        for conv in convs:
            res = bulk_add(brain.memory, [BulkNote(t.text, project=conv.project)
                                          for t in conv.turns])
            maps[conv.index] = dict(zip(res.zk_ids, [t.dia_id for t in conv.turns],
                                        strict=True))
        out["notes"] = sum(len(c.turns) for c in convs)
        out["time_to_indexed_s"] = await _rest(brain)
        async with mcp_client(brain) as client:
            for mode in MODES:
                if mode != "none":
                    out[f"switch_{mode}"] = await _switch(client, mode)
                table = await locomo._evaluate(client, convs, maps, "turn", "search_memory")
                out[mode] = {**table.get("test", table["all"]), "index": _brief_index(
                    (await call(client, "brain_stats", {})).get("index"))}
                ctx.log(f"quantization locomo {mode}: {out[mode]}")
    finally:
        brain.close()
    return out


async def _cosqa(ctx: BenchContext) -> dict[str, Any]:
    from bench import cosqa
    from brain.memory.bulk import BulkNote, bulk_add

    corpus, queries = cosqa.load(ctx.data / "cosqa-dev.json")
    halves = split_of("cosqa")
    test = [q for q in queries if halves.get(q[2]) == "test"]
    brain = ctx.open_brain("quant-cosqa", index={"min_unindexed": RECALL_MIN_UNINDEXED},
                           **FAST_WORKER)
    out: dict[str, Any] = {"corpus": len(corpus), "queries": len(test)}
    try:
        res = bulk_add(brain.memory, [BulkNote(code, project=cosqa.PROJECT) for code in corpus])
        id_of = {z: i for i, z in enumerate(res.zk_ids)}
        out["time_to_indexed_s"] = await _rest(brain)
        async with mcp_client(brain) as client:
            for mode in MODES:
                if mode != "none":
                    out[f"switch_{mode}"] = await _switch(client, mode)
                table = await cosqa._rank_all(client, "search_memory", test,
                                              {"project": cosqa.PROJECT, "top_k": 10}, "zk_id",
                                              id_of)
                out[mode] = {**table.get("test", table), "index": _brief_index(
                    (await call(client, "brain_stats", {})).get("index"))}
                ctx.log(f"quantization cosqa {mode}: {out[mode]}")
    finally:
        brain.close()
    return out


async def _speed(ctx: BenchContext, n: int, queries: int) -> dict[str, Any]:
    from bench.speed import PROJECTS, _time_tool, synthetic_notes, synthetic_queries
    from brain.memory.bulk import BulkNote, bulk_add

    name = f"quant-speed-{n}"
    rss0 = _rss_mb()
    brain = ctx.open_brain(name, **FAST_WORKER)
    out: dict[str, Any] = {"notes": n}
    try:
        bulk_add(brain.memory, (BulkNote(x, project=f"proj-{i % PROJECTS}")
                                for i, x in enumerate(synthetic_notes(n))), batch=512)
        out["time_to_indexed_s"] = await _rest(brain)
        store_dir = Path(brain.store.info().location)
        qs = synthetic_queries(queries)
        glob = [{"query": q, "top_k": 10, "all_projects": True} for q in qs]
        scoped = [{"query": q, "top_k": 10, "project": f"proj-{i % PROJECTS}"}
                  for i, q in enumerate(qs)]
        # none as the import left it (the index worker at rest may leave up to
        # min_unindexed vectors unindexed), int8 (the switch rebuilds every segment), then none
        # again after a switch back: the fair comparison with int8, every vector indexed.
        async with mcp_client(brain) as client:
            for key, mode in (("none_after_import", "none"), ("int8", "int8"),
                              ("none", "none")):
                row: dict[str, Any] = {}
                if key != "none_after_import":
                    row["switch"] = await _switch(client, mode)
                    await _rest(brain)
                await _time_tool(client, "search_memory", glob[:20])  # warm up
                row["search_all_ms"] = percentiles(await _time_tool(client, "search_memory",
                                                                    glob))
                row["search_project_ms"] = percentiles(
                    await _time_tool(client, "search_memory", scoped))
                row["disk_mb"] = _disk_mb(store_dir) if store_dir.is_dir() else None
                row["int8_data_mb"] = (_disk_mb(store_dir, "quantized.data")
                                       if store_dir.is_dir() else None)
                row["rss_mb"] = _rss_mb()
                row["rss_growth_mb"] = round(row["rss_mb"] - rss0, 1)
                row["index"] = _brief_index((await call(client, "brain_stats", {})).get("index"))
                out[key] = row
                ctx.log(f"quantization speed {n} {key}: all p50 "
                        f"{row['search_all_ms']['p50']} ms, project p50 "
                        f"{row['search_project_ms']['p50']} ms, disk {row['disk_mb']} MB, "
                        f"int8 {row['int8_data_mb']} MB, rss {row['rss_mb']} MB")
    finally:
        brain.close()
    return out


async def run(ctx: BenchContext) -> dict[str, Any]:
    n = int(os.environ.get("BRAIN_BENCH_QUANT_NOTES", "2000" if ctx.quick else "10000"))
    out: dict[str, Any] = {"modes": list(MODES), "recall_min_unindexed": RECALL_MIN_UNINDEXED}
    parts = os.environ.get("BRAIN_BENCH_QUANT_PARTS", "locomo,cosqa,speed").split(",")
    if "speed" in parts:
        out["speed"] = await _speed(ctx, n, 100 if ctx.quick else 300)
    if "locomo" not in parts or "cosqa" not in parts:
        return out
    out["locomo"] = await _locomo(ctx)
    out["cosqa"] = await _cosqa(ctx)
    loc, cq = out["locomo"], out["cosqa"]
    out["recall_cost"] = {
        "locomo_any@10": round(loc["none"]["any@10"] - loc["int8"]["any@10"], 4),
        "cosqa_MRR@10": round(cq["none"]["MRR@10"] - cq["int8"]["MRR@10"], 4),
    }
    ctx.log(f"quantization recall cost (none - int8): {out['recall_cost']}")
    return out
