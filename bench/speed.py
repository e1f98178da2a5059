"""Speed at scale, through the in-process MCP client, on the store as the product leaves it.

At each scale (7k quick; 10k, 100k notes, and 1M once the vector cache holds them) a fresh
brain, with its background workers running, is filled with synthetic notes by
:func:`brain.memory.bulk.bulk_add` (the product's bulk path; adding 100k notes one call at a time
would measure the loop, not the store). From 200k notes on, the import takes the notes'
vectors from bench/vector_cache.py (embedded once by the same model; the embedding rate is
measured in the run on a sample and reported beside the import's) instead of embedding them
in every run. Nothing
then touches the store but the product: the bench waits for the index worker to bring the
store to rest and reports that wait ("time until fully indexed after a bulk import of N").
While it waits it times search_memory and add_memory through the tools: before the first
maintenance run, and during it (p50/p95/p99). At rest (idle) it times search_memory (all
projects, and one project), deep_search when listed and add_memory. Beside them: the query
embedding alone (the floor), bulk import notes/s, the cost of access stamping, the index
state after import and at rest (brain_stats' ``index``), the steps of the maintenance run,
the RSS of the process at rest (after the timed calls) and its peak (the optimizer child is
not counted), and the startup time of ``python mcp_server.py`` to the first answered tool
call. Then a restarted server on each store times the same calls (bench/restart.py, in a
child process). No private handle, no manual optimize.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import (
    ROOT,
    BenchContext,
    call,
    mcp_client,
    peak_rss_mb,
    percentiles,
    rss_mb,
    tool_names,
)
from bench.synthetic import synthetic_notes, synthetic_queries
from bench.vector_cache import VectorCache
from brain.embedding.registry import embed_passages
from brain.memory import RecallFilter
from brain.store.integrity import store_bytes

# From this many notes on, the import takes its vectors from the vector cache (a million
# notes take ~1 h 45 min to embed here); below, it embeds them as the product does.
CACHED_FROM = 200_000
MILLION = 1_000_000
EMBED_SAMPLE = 2_048  # notes embedded to measure the embedding rate of a cached scale
# The pause after each search + add pair timed during an index maintenance run.
DURING_PACE_S = 0.25

PROJECTS = 20

async def _time_tool(
    client: Any, tool: str, argsets: list[dict[str, Any]], hits: list[int] | None = None
) -> list[float]:
    """Latencies in ms; ``hits`` collects how many results each search answered, so a
    timing of a scope that holds nothing cannot pass for a search."""
    out = []
    for args in argsets:
        t = time.perf_counter()
        res = await call(client, tool, args)
        out.append((time.perf_counter() - t) * 1000)
        if hits is not None:
            hits.append(len(res.get("results") or res.get("notes") or []))
    return out

REST_S = 3.0  # idle before "at rest" is read: what bench/peer.py waits, 3x brain.heap.IDLE_S


async def timed_searches(client: Any, argsets: list[dict[str, Any]],
                         hits: list[int] | None = None) -> dict[str, Any]:
    """search_memory latencies (ms p50/p95/p99) and the process's CPU time per call: on a
    box other work shares, wall time says how long a caller waits, CPU time how much work a
    call took (every thread of this process counted, background ones included)."""
    cpu = time.process_time()
    out: dict[str, Any] = percentiles(await _time_tool(client, "search_memory", argsets, hits))
    out["cpu_ms_per_call"] = round((time.process_time() - cpu) * 1000 / max(1, len(argsets)), 2)
    return out


def _index(brain: Any) -> dict[str, Any]:
    """The index section of brain_stats (what a user sees)."""
    st = brain.index_maintenance.status()
    keys = ("points", "indexed", "unindexed", "segments", "deleted_share", "running", "runs",
            "last_duration_s", "last_steps_s", "last_error")
    return {k: st.get(k) for k in keys}


async def _until_indexed(
    ctx: BenchContext, brain: Any, client: Any, glob: list[dict[str, Any]], n: int,
) -> dict[str, Any]:
    """Wait, doing nothing to the store, until the index worker has brought it to rest (no run
    going on, and fewer unindexed vectors than ``[index] min_unindexed``, or a run since the
    import found nothing more to do). Meanwhile time search_memory before the first run, and
    search_memory and add_memory during runs."""
    im = brain.index_maintenance
    runs0 = im.runs + (1 if im.running else 0)  # a run started during the import does not count
    t0 = time.perf_counter()
    limit_s = max(600.0, n / 50)
    before: list[float] = []
    d_search: list[float] = []
    d_add: list[float] = []
    i = 0
    while True:
        running = im.running
        state = brain.store.index_state()
        if not running and (
            (state.unindexed is not None and state.unindexed < im.config.min_unindexed)
            or im.runs > runs0
        ):
            break
        waited = time.perf_counter() - t0
        if waited > limit_s:
            ctx.log(f"speed {n}: the store did not come to rest within {limit_s:.0f} s")
            break
        i += 1
        if running:
            d_search += await _time_tool(client, "search_memory", [glob[i % len(glob)]])
            add = {"content": f"Written during index maintenance, note {i}.",
                   "project": "proj-1"}
            d_add += await _time_tool(client, "add_memory", [add])
            # An agent's pace, not a saturating loop: back-to-back calls would take a core
            # from the optimizer child for the whole run (at 1M notes, about an hour).
            await asyncio.sleep(DURING_PACE_S)
        elif im.runs == runs0 and len(before) < len(glob):
            before += await _time_tool(client, "search_memory", [glob[i % len(glob)]])
            await asyncio.sleep(0.2)
        else:
            await asyncio.sleep(0.05)
    return {
        "time_to_indexed_s": round(time.perf_counter() - t0, 1),
        "search_all_before_index_ms": percentiles(before),
        "during_maintenance": {
            "search_all_ms": percentiles(d_search),
            "add_memory_ms": percentiles(d_add),
        },
    }


def _vectors(ctx: BenchContext, n: int) -> tuple[Iterator[Any], dict[str, Any]]:
    """The notes' vectors for the import: from the vector cache at ``CACHED_FROM`` notes and
    more (bench/vector_cache.py), else none (the import embeds every note, as the product
    does). With the cache, the embedding rate is measured here, on a sample of the notes in
    this run (the cache's own record counts the wall time of a build that shared the box)."""
    if n < CACHED_FROM:
        return iter(()), {"source": "embedded during the import"}
    cache = VectorCache.for_embedder(ctx.embedder)
    if cache.done < n:
        raise SystemExit(
            f"speed {n:,}: the vector cache {cache.data_path} holds {cache.done:,} of {n:,} "
            f"vectors; build it first: python -m bench.vector_cache {n} (resumable)")
    sample = synthetic_notes(EMBED_SAMPLE)
    t = time.perf_counter()
    embed_passages(ctx.embedder, sample, pool=True)
    rate = round(len(sample) / (time.perf_counter() - t), 1)
    rows = (v for chunk in cache.rows(n) for v in chunk)
    return rows, {"source": "cache", "cache": str(cache.data_path), "embed_notes_per_s": rate,
                  "sample": EMBED_SAMPLE,
                  "cache_build_notes_per_s": cache.notes_per_s()}


async def measure_scale(ctx: BenchContext, n: int, queries: int) -> dict[str, Any]:
    from brain.memory.bulk import BulkNote, bulk_add

    brain = ctx.open_brain(f"speed-{n}")
    row: dict[str, Any] = {"notes": n}
    try:
        texts = synthetic_notes(n)
        vectors, row["vectors"] = _vectors(ctx, n)
        t = time.perf_counter()
        bulk_add(
            brain.memory,
            (BulkNote(x, project=f"proj-{i % PROJECTS}", vector=next(vectors, None))
             for i, x in enumerate(texts)),
            batch=512,
        )
        row["bulk_import_s"] = round(time.perf_counter() - t, 1)
        row["bulk_notes_per_s"] = round(n / (time.perf_counter() - t), 1)
        ctx.log(f"speed {n}: bulk import {row['bulk_notes_per_s']} notes/s "
                f"({row['vectors']['source']} vectors)")
        qs = synthetic_queries(queries)
        emb: list[float] = []
        for q in qs:
            t = time.perf_counter()
            ctx.embedder.embed_query(q)
            emb.append((time.perf_counter() - t) * 1000)
        row["query_embedding_ms"] = percentiles(emb)
        row["index_after_import"] = _index(brain)
        async with mcp_client(brain) as client:
            names = await tool_names(client)
            await call(client, "search_memory",
                       {"query": "warm up", "top_k": 10, "all_projects": True})
            # Without a project, search_memory searches the default project, which holds none
            # of these notes: every project is searched by asking for all of them.
            glob = [{"query": q, "top_k": 10, "all_projects": True} for q in qs]
            scoped = [
                {"query": q, "top_k": 10, "project": f"proj-{i % PROJECTS}"}
                for i, q in enumerate(qs)
            ]
            waited = await _until_indexed(ctx, brain, client, glob, n)
            row.update(waited)
            row["search_all_unoptimized_ms"] = waited["search_all_before_index_ms"]
            row["index_at_rest"] = _index(brain)
            ctx.log(f"speed {n}: at rest after {row['time_to_indexed_s']} s: "
                    f"{row['index_at_rest']}")
            n_all: list[int] = []
            n_one: list[int] = []
            row["search_all_ms"] = await timed_searches(client, glob, n_all)
            row["search_project_ms"] = await timed_searches(client, scoped, n_one)
            row["mean_hits"] = {"all": sum(n_all) / len(n_all), "project": sum(n_one) / len(n_one)}
            if "deep_search" in names:
                row["deep_search_ms"] = percentiles(await _time_tool(client, "deep_search", glob))
            else:
                row["deep_search_ms"] = None
            adds = [
                {"content": f"{x} Added later.", "project": "proj-0"}
                for x in synthetic_notes(min(queries, 100), seed=99)
            ]
            row["add_memory_ms"] = percentiles(await _time_tool(client, "add_memory", adds))
            # Did the timed calls start an index run (their writes and access stamps)?
            row["index_after_timed"] = _index(brain)
            # What a server holding this store needs at rest (model, vectors, graph, caches);
            # the peak below also counts the bulk import and every scale run before it.
            row["rss_after_calls_mb"] = rss_mb()
            await asyncio.sleep(REST_S)  # as bench/restart.py reads it: after an idle spell
            row["rss_at_rest_mb"] = rss_mb()
            row["disk_mb"] = round(store_bytes(brain.store) / 2**20, 1)
            alt = None if ctx.quick else _other_backend(ctx)
            if alt is not None:
                # The same store and queries with the other embedding backend's query vectors,
                # side by side in this run (its vectors agree with torch's to cosine >= 0.99).
                name, other = alt
                lat = []
                for q in qs:
                    t = time.perf_counter()
                    other.embed_query(q)
                    lat.append((time.perf_counter() - t) * 1000)
                main = brain.embedder
                brain.embedder = brain.memory.embedder = other
                try:
                    row["other_backend"] = {
                        "backend": name,
                        "query_embedding_ms": percentiles(lat),
                        "search_project_ms": percentiles(
                            await _time_tool(client, "search_memory", scoped)),
                        "search_all_ms": percentiles(
                            await _time_tool(client, "search_memory", glob)),
                    }
                finally:
                    brain.embedder = brain.memory.embedder = main
        # Access stamping: the same searches on the service, with and without the stamp.
        for stamp in (False, True):
            lat = []
            for q in qs[: min(100, len(qs))]:
                t = time.perf_counter()
                brain.memory.search(q, 10, RecallFilter(all_projects=True), stamp=stamp)
                lat.append((time.perf_counter() - t) * 1000)
            row["service_search_stamp_ms" if stamp else "service_search_nostamp_ms"] = percentiles(
                lat
            )
        row["peak_rss_mb"] = peak_rss_mb()

    finally:
        brain.close()
    row["restarted"] = restarted(ctx, ctx.home(f"speed-{n}"), queries)
    return row


def restarted(ctx: BenchContext, home: Path, queries: int) -> dict[str, Any]:
    """The same calls timed by a restarted server on the store this scale left (bench.restart
    in a child process: the figure a user gets after importing and starting the server, not
    the importing process's), or the error that stopped it."""
    sections = dict(ctx.sections)
    backend = getattr(ctx.embedder, "backend", None)
    if backend and "model" not in sections.get("embedding", {}):
        sections["embedding"] = {**sections.get("embedding", {}), "backend": backend}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "restart.json"
        cmd = [sys.executable, "-m", "bench.restart", str(home), "--queries", str(queries),
               "--sections", json.dumps(sections), "--json", str(out)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if proc.returncode != 0 or not out.is_file():
            tail = " / ".join(proc.stderr.strip().splitlines()[-3:])
            return {"error": f"bench.restart exited {proc.returncode}: {tail}"}
        data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    data.pop("index", None)
    ctx.log(f"speed {home.name}: restarted server search p50 "
            f"{data['search_all_ms']['p50']} ms, add p50 {data['add_memory_ms']['p50']} ms")
    return data


def _other_backend(ctx: BenchContext) -> tuple[str, Any] | None:
    """The embedding backend the run is not using (onnx beside torch, or torch beside onnx),
    warmed up; None when it cannot be loaded here (noted in the report)."""
    from brain.embedding.registry import build_embedder

    current = getattr(ctx.embedder, "backend", "torch")
    other = "torch" if current != "torch" else "onnx"
    try:
        emb = build_embedder(ctx.embedder.record, backend=other)
        emb.embed_query("warm up")
    except Exception as exc:  # noqa: BLE001 - the comparison is optional
        ctx.notes.append(f"the {other} backend could not be compared: {exc}")
        return None
    return other, emb


async def startup(ctx: BenchContext) -> dict[str, Any]:
    """Spawn ``python mcp_server.py`` over stdio: time to list_tools, to brain_stats, and to
    the first search_memory (which loads the embedding model)."""
    fastmcp = importlib.import_module("fastmcp")
    transports = importlib.import_module("fastmcp.client.transports")
    env = {
        **os.environ,
        "BRAIN__HOME": str(ctx.home("startup")),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    transport = transports.StdioTransport(
        sys.executable, [str(ROOT / "mcp_server.py")], env=env, cwd=str(ROOT)
    )
    out: dict[str, Any] = {}
    t = time.perf_counter()
    async with fastmcp.Client(transport) as client:
        await client.list_tools()
        out["list_tools_s"] = round(time.perf_counter() - t, 2)
        await client.call_tool("brain_stats", {})
        out["first_call_s"] = round(time.perf_counter() - t, 2)
        await client.call_tool("search_memory", {"query": "first question", "top_k": 5})
        out["first_search_s"] = round(time.perf_counter() - t, 2)
    return out


async def run(
    ctx: BenchContext, out: dict[str, Any] | None = None, checkpoint: Any = None
) -> dict[str, Any]:
    """Fills ``out`` (startup, then one row per scale), calling ``checkpoint()`` after each."""
    # Quick: 7,000, the smallest store Qdrant Edge indexes (a 10 MB segment at 384 dims).
    scales = [7_000] if ctx.quick else [10_000, 100_000]
    if not ctx.quick:
        held = VectorCache.for_embedder(ctx.embedder).done
        if held >= MILLION:
            scales.append(MILLION)
        else:
            ctx.log(f"speed: no {MILLION:,}-note point (the vector cache holds {held:,}); "
                    f"build it with python -m bench.vector_cache {MILLION}")
    if os.environ.get("BENCH_SPEED_SCALES"):  # e.g. 10000 alone: one point of the full run
        scales = [int(x) for x in os.environ["BENCH_SPEED_SCALES"].split(",")]
    queries = 100 if ctx.quick else 200
    out = out if out is not None else {}
    out["scales"] = []
    try:
        out["startup"] = await startup(ctx)
        ctx.log(f"startup: {out['startup']}")
    except Exception as exc:  # noqa: BLE001 - reported, the rest of the bench goes on
        out["startup"] = {"error": f"{type(exc).__name__}: {exc}"}
        ctx.log(f"startup failed: {exc}")
    for n in scales:
        row = await measure_scale(ctx, n, queries)
        ctx.log(
            f"speed {n}: search p50 {row['search_all_ms']['p50']} ms, "
            f"add p50 {row['add_memory_ms']['p50']} ms"
        )
        out["scales"].append(row)
        if checkpoint is not None:
            checkpoint()
    return out
