"""Where a search_memory call's time goes, on the store a running server holds::

    python -m bench.search_stages STORE_HOME [--queries 100]

The tool's own body (``mcp_surface.recall.search_notes``: recall filter, query embedding, the
memory search, the answer band, the page) runs on this thread with the tool's published
defaults, so it can be timed and profiled; the tool call through the in-process MCP client is
timed beside it, so the difference is the MCP layer and the hop to a worker thread. Nothing is
patched: the stages are read from a cProfile of the same body (its overhead inflates
Python-heavy stages; the shares, not the sums, are what it is for). bench.restart reports this
for every store a speed run leaves.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_surface.recall import NoteSearch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# (stage, file suffix, function): the functions a search_memory call spends its time in.
STAGES = (
    ("query embedding", ".py", "embed_query"),
    ("keyword (BM25) query vector", "embedding/bm25.py", "query"),
    ("retrieval (the two legs below, fusion, payloads)", "search/fusion.py", "hybrid"),
    ("  store: dense leg (HNSW)", "edge.py", "query_dense"),
    ("  store: keyword leg (sparse)", "edge.py", "query_sparse"),
    ("  store: payloads of the hits", "edge.py", "retrieve"),
    ("access stamps", "core.py", "stamp_access"),
    ("page (answer band, snippets)", "search/presentation.py", "present"),
)


def _full(schema: dict[str, Any], args: dict[str, Any]) -> NoteSearch:
    """Every argument of the tool as its body receives it (one NoteSearch): the published
    defaults under ``args``, with filter fields given at the top level (``all_projects``) moved into
    ``filters`` as the server's middleware moves them (mcp_surface/profiles.py). Without that
    move the body would search the default project while the tool searched all of them."""
    from mcp_surface.profiles import nest_filters
    from mcp_surface.recall import NoteSearch, RecallFilters  # noqa: F811 - at run time

    props = schema.get("properties", {})
    full = {**{k: v.get("default") for k, v in props.items()}, **nest_filters(dict(args))}
    if isinstance(full.get("filters"), dict):
        full["filters"] = RecallFilters(**full["filters"])
    return NoteSearch(**full)


def _cum_ms(stats: pstats.Stats, suffix: str, name: str, calls: int) -> float:
    """The outermost matching function's cumulative time (a wrapper and what it wraps, e.g.
    the switchable embedder and the model, are not added up)."""
    most = 0.0
    for (path, _line, fn), row in stats.stats.items():  # type: ignore[attr-defined]
        if fn == name and path.endswith(suffix):
            most = max(most, row[3])  # cumulative seconds
    return round(most * 1000 / calls, 2)


async def stages(brain: Any, argsets: list[dict[str, Any]]) -> dict[str, Any]:
    """p50 of the tool call and of its body, and the body's profile by stage (ms per call)."""
    from bench import call, mcp_client, percentiles
    from mcp_surface.recall import search_notes

    body_ms: list[float] = []
    tool_ms: list[float] = []
    async with mcp_client(brain) as client:
        tools = {t.name: t for t in await client.list_tools()}
        full = [_full(tools["search_memory"].input_schema, a) for a in argsets]
        body_hits = search_notes(brain, full[0])["count"]  # also warms the model and pages
        tool_hits = (await call(client, "search_memory", argsets[0]))["count"]
        if body_hits != tool_hits:  # the body timed would not be the search the tool ran
            raise RuntimeError(f"the body found {body_hits} hits where the tool found "
                               f"{tool_hits}: the stages would time another search")
        # Unprofiled, each query both ways, the first of the two taking turns: whichever runs
        # first reads the pages the query touches, and the second finds them in the cache.
        for i, (args, body_args) in enumerate(zip(argsets, full, strict=True)):
            for way in ((0, 1) if i % 2 == 0 else (1, 0)):
                t = time.perf_counter()
                if way == 0:
                    search_notes(brain, body_args)
                else:
                    await call(client, "search_memory", args)
                (body_ms, tool_ms)[way].append((time.perf_counter() - t) * 1000)
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    for req in full:
        search_notes(brain, req)
    prof.disable()
    profiled_ms = (time.perf_counter() - t) * 1000 / len(argsets)
    st = pstats.Stats(prof)
    by_stage = {label: _cum_ms(st, suffix, fn, len(argsets)) for label, suffix, fn in STAGES}
    return {
        "queries": len(argsets),
        "body_hits": body_hits,
        "tool_hits": tool_hits,
        "tool_call_ms": percentiles(tool_ms),
        "body_ms": percentiles(body_ms),
        "profiled_body_ms_per_call": round(profiled_ms, 2),
        "profiled_stage_ms_per_call": by_stage,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.search_stages", description=__doc__)
    p.add_argument("store", help="a data dir a speed run left (e.g. .../speed-100000)")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--all-projects", action="store_true", help="search every project")
    args = p.parse_args(argv)
    from bench.speed import PROJECTS, synthetic_queries
    from brain.app import Brain
    from config import load_settings

    home = Path(args.store)
    if not (home / "store").is_dir():
        p.error(f"{home} holds no store (expected {home / 'store'})")
    qs = synthetic_queries(args.queries)
    argsets = [{"query": q, "top_k": 10, "all_projects": True} if args.all_projects
               else {"query": q, "top_k": 10, "project": f"proj-{i % PROJECTS}"}
               for i, q in enumerate(qs)]
    brain = Brain(load_settings(home=home)).open()
    try:
        print(json.dumps(asyncio.run(stages(brain, argsets)), indent=2))
    finally:
        brain.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
