"""Speed at scale, through the in-process MCP client.

At each scale (10k, 100k notes) a fresh store is filled with synthetic notes by
:func:`brain.bulk.bulk_add` (the only step that bypasses the tools: adding 100k notes one
call at a time would measure the loop, not the store), then measured through the tools:
search_memory p50/p95 (all projects, and one project), deep_search p50/p95 when listed,
add_memory p50. Beside them: the query embedding alone (the floor), bulk import notes/s,
the cost of access stamping, HNSW state before and after ``EdgeShard.optimize()``, peak
RSS, and the startup time of ``python mcp_server.py`` to the first answered tool call.
"""

from __future__ import annotations

import importlib
import os
import random
import sys
import time
from typing import Any

from bench import (
    ROOT,
    BenchContext,
    call,
    mcp_client,
    peak_rss_mb,
    percentiles,
    tool_names,
)
from brain.memory import RecallFilter

PROJECTS = 20

_SUBJECTS = (
    "parser",
    "scheduler",
    "cache layer",
    "auth service",
    "billing job",
    "importer",
    "websocket client",
    "migration script",
    "search index",
    "test runner",
    "CLI",
    "config loader",
    "retry loop",
    "upload handler",
    "rate limiter",
    "report builder",
    "docker image",
    "CI pipeline",
    "ORM model",
    "queue worker",
    "payment webhook",
    "email sender",
    "session store",
    "feature flag",
    "logger",
    "metrics exporter",
    "frontend build",
    "GraphQL resolver",
    "cron task",
)
_VERBS = (
    "fails on",
    "times out with",
    "leaks memory under",
    "crashes when given",
    "slows down on",
    "rejects",
    "silently ignores",
    "double-counts",
    "mis-parses",
    "deadlocks on",
    "retries forever on",
    "returns stale data for",
    "corrupts",
    "truncates",
    "mishandles",
    "needs a guard for",
    "must validate",
    "now supports",
    "caches",
    "handles",
)
_OBJECTS = (
    "empty input",
    "unicode file names",
    "large payloads",
    "concurrent writes",
    "expired tokens",
    "missing headers",
    "nested JSON",
    "null dates",
    "negative amounts",
    "duplicate keys",
    "slow disks",
    "IPv6 addresses",
    "leap years",
    "daylight saving changes",
    "huge CSV files",
    "binary blobs",
    "long URLs",
    "deleted users",
    "stale locks",
    "partial reads",
    "gzip bodies",
    "invalid UTF-8",
    "zero-length arrays",
)
_FIXES = (
    "so we pinned the version",
    "so we added a timeout",
    "so we switched to streaming",
    "so we added an index",
    "so we wrapped it in a transaction",
    "so we added a retry with backoff",
    "so we validate at the boundary",
    "so we split the batch",
    "so we moved it to a worker",
    "so we cache the result",
    "so we added a regression test",
    "so we log and skip it",
    "so we normalise first",
    "so we use a lock",
    "so we raised the limit",
)


def synthetic_notes(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct, realistic-length engineering notes (deterministic)."""
    rng = random.Random(seed)
    return [
        f"The {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} in module "
        f"m{rng.randrange(500)}, {rng.choice(_FIXES)} (ticket {i})."
        for i in range(n)
    ]


def synthetic_queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        f"why does the {rng.choice(_SUBJECTS)} break with {rng.choice(_OBJECTS)}" for _ in range(n)
    ]


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


def _shard_info(brain: Any) -> dict[str, Any]:
    shard = getattr(brain.store, "_shard", None)
    if shard is None:
        return {}
    info = shard.info()
    return {
        "segments": info.segments_count,
        "points": info.points_count,
        "indexed_vectors": info.indexed_vectors_count,
        "payload_indexes": len(info.payload_schema),
    }


async def measure_scale(ctx: BenchContext, n: int, queries: int) -> dict[str, Any]:
    from brain.bulk import BulkNote, bulk_add

    brain = ctx.open_brain(f"speed-{n}")
    row: dict[str, Any] = {"notes": n}
    try:
        texts = synthetic_notes(n)
        t = time.perf_counter()
        bulk_add(
            brain.memory,
            (BulkNote(x, project=f"proj-{i % PROJECTS}") for i, x in enumerate(texts)),
            batch=512,
        )
        row["bulk_import_s"] = round(time.perf_counter() - t, 1)
        row["bulk_notes_per_s"] = round(n / (time.perf_counter() - t), 1)
        ctx.log(f"speed {n}: bulk import {row['bulk_notes_per_s']} notes/s")
        qs = synthetic_queries(queries)
        emb: list[float] = []
        for q in qs:
            t = time.perf_counter()
            ctx.embedder.embed_query(q)
            emb.append((time.perf_counter() - t) * 1000)
        row["query_embedding_ms"] = percentiles(emb)
        async with mcp_client(brain) as client:
            names = await tool_names(client)
            await call(client, "search_memory",
                       {"query": "warm up", "top_k": 10, "all_projects": True})
            row["shard_before_optimize"] = _shard_info(brain)
            # Without a project, search_memory searches the default project, which holds none
            # of these notes: every project is searched by asking for all of them.
            glob = [{"query": q, "top_k": 10, "all_projects": True} for q in qs]
            scoped = [
                {"query": q, "top_k": 10, "project": f"proj-{i % PROJECTS}"}
                for i, q in enumerate(qs)
            ]
            row["search_all_unoptimized_ms"] = percentiles(
                await _time_tool(client, "search_memory", glob)
            )
            shard = getattr(brain.store, "_shard", None)
            if shard is not None:
                t = time.perf_counter()
                shard.optimize()
                row["optimize_s"] = round(time.perf_counter() - t, 1)
                row["shard_after_optimize"] = _shard_info(brain)
            n_all: list[int] = []
            n_one: list[int] = []
            row["search_all_ms"] = percentiles(
                await _time_tool(client, "search_memory", glob, n_all)
            )
            row["search_project_ms"] = percentiles(
                await _time_tool(client, "search_memory", scoped, n_one)
            )
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
    return row


def _other_backend(ctx: BenchContext) -> tuple[str, Any] | None:
    """The embedding backend the run is not using (onnx beside torch, or torch beside onnx),
    warmed up; None when it cannot be loaded here (noted in the report)."""
    from brain.embedder import build_embedder

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
    scales = [5_000] if ctx.quick else [10_000, 100_000]
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
