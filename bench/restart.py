"""Time the tools in a fresh server process on a store a speed run left behind::

    python -m bench.restart STORE_HOME [--queries 200] [--sections JSON] [--json OUT] [--cold]

The speed bench (bench/speed.py) times the tools in the process that has just bulk-imported the
store: a process that embedded every note and held the import's batches. This opens the store
as a restarted server does (default settings, every worker running, the store as the product
left it) and times search_memory (all projects, one project), deep_search and add_memory
through the in-process MCP client, with the same synthetic queries, breaks a search down by
stage (bench/search_stages.py), then reads the process's RSS. STORE_HOME is a data dir the
speed run logged (``.../speed-100000``); the adds are written into it. ``--sections`` overrides
settings sections (the speed bench passes its embedding backend, and the tests their offline
model). The speed bench runs this after each scale, in a child process, and reports it beside
its own figures.

``--cold`` times a server that starts from a cold page cache, as after a reboot or after the
kernel has paged the store out: the store is copied to a temp dir (the copy takes the adds and
is removed after), the copy is synced, and the page cache is dropped (``echo 1 >
/proc/sys/vm/drop_caches``: root only) before the server opens it. Without it the store's
pages are wherever the last run left them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bench import copy_store, emit_json

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


async def run(home: Path, queries: int,
              sections: dict[str, Any] | None = None) -> dict[str, Any]:
    from bench import call, mcp_client, percentiles, rss_mb, rss_parts_mb
    from bench.search_stages import stages
    from bench.speed import (
        PROJECTS,
        REST_S,
        _time_tool,
        synthetic_notes,
        synthetic_queries,
        timed_searches,
    )
    from brain.app import Brain
    from config import load_settings

    brain = Brain(load_settings(home=home, **(sections or {}))).open()
    try:
        qs = synthetic_queries(queries)
        glob = [{"query": q, "top_k": 10, "all_projects": True} for q in qs]
        scoped = [{"query": q, "top_k": 10, "project": f"proj-{i % PROJECTS}"}
                  for i, q in enumerate(qs)]
        adds = [{"content": f"{x} Added after a restart.", "project": "proj-0"}
                for x in synthetic_notes(min(queries, 100), seed=98)]
        out: dict[str, Any] = {"store": str(home), "index": brain.index_maintenance.status()}
        async with mcp_client(brain) as client:
            await call(client, "search_memory", {"query": "warm up", "top_k": 10,
                                                 "all_projects": True})
            out["search_all_ms"] = await timed_searches(client, glob)
            out["search_project_ms"] = await timed_searches(client, scoped)
            out["deep_search_ms"] = percentiles(
                await _time_tool(client, "deep_search", glob[: len(adds)]))
            out["add_memory_ms"] = percentiles(await _time_tool(client, "add_memory", adds))
            out["index_after_timed"] = brain.index_maintenance.status()
        # Where a search's time goes (bench/search_stages.py), all projects and one.
        out["stages_all_projects"] = await stages(brain, glob[:100])
        out["stages_one_project"] = await stages(brain, scoped[:100])
        from brain import heap

        heap.touch()  # the stages ran tool bodies: activity, as the tool gate marks it
        # Right after the calls (the pages they mapped still counted), then at rest: after
        # REST_S without a call, as a server between an agent's turns (brain/heap.py gives
        # the store's mapped pages back once calls stop).
        out["rss_after_calls_mb"] = rss_mb()
        out["rss_parts_after_calls_mb"] = rss_parts_mb(home)
        await asyncio.sleep(REST_S)
        out["rss_at_rest_mb"] = rss_mb()
        out["rss_parts_mb"] = rss_parts_mb(home)
        return out
    finally:
        brain.close()


DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def drop_page_cache() -> None:
    """Write back dirty pages, then drop the clean page cache (root only)."""
    os.sync()
    try:
        DROP_CACHES.write_text("1\n", encoding="ascii")
    except OSError as exc:
        raise SystemExit(f"--cold needs root to drop the page cache ({DROP_CACHES}: "
                         f"{exc.strerror}); run without --cold, or as root") from exc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.restart", description=__doc__)
    p.add_argument("store", help="a data dir a speed run left (e.g. .../speed-100000)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--sections", default="{}",
                   help='settings overrides, e.g. {"embedding": {"backend": "torch"}}')
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--cold", action="store_true",
                   help="time a copy of the store from a dropped page cache (root only)")
    args = p.parse_args(argv)
    home = Path(args.store)
    if not (home / "store").is_dir():
        p.error(f"{home} holds no store (expected {home / 'store'})")
    sections = json.loads(args.sections)
    if not args.cold:
        out = asyncio.run(run(home, args.queries, sections))
    else:
        with tempfile.TemporaryDirectory(prefix="restart-cold-",
                                         dir=home.parent) as tmp:
            copy = copy_store(home, Path(tmp) / home.name)
            drop_page_cache()
            out = {**asyncio.run(run(copy, args.queries, sections)), "store": str(home),
                   "cold": "a copy, page cache dropped before the open"}
    emit_json(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
