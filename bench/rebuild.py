"""Model switch cost: ``python -m bench.rebuild --notes 2000`` (or ``python -m bench --only
rebuild``).

A fresh Edge store is bulk-filled with synthetic notes on the offline hash model, then switched
to the local all-MiniLM-L6-v2 by a rebuild generation at the default pace
(``embedding.rebuild_batch`` / ``rebuild_pause_s``). Measured:

- the rebuild's wall time against embedding the same note texts alone with the same model
  (issue 16 target: at most 1.3x, at the default pace and with no pause);
- search_memory p50 while the rebuild runs against the same searches idle (target: at most
  +30%). Searches are search_memory tool calls through an in-process MCP client (the
  product's path: the tool call enters the generation gate, which is what makes the rebuild
  pause for live traffic).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import call, mcp_client
from bench.speed import PROJECTS, synthetic_notes

TARGET = "sentence-transformers/all-MiniLM-L6-v2"


async def _search_p50(brain: Any, queries: list[str], until: Callable[[], bool] | None = None,
                      limit: int = 200, window_s: float = 1e9) -> tuple[float, int]:
    """(p50 ms, searches) of search_memory tool calls: ``limit`` of them, or as many as run
    until ``until()`` says stop or ``window_s`` has passed."""
    times: list[float] = []
    async with mcp_client(brain) as client:
        await call(client, "search_memory", {"query": "warm up", "all_projects": True})
        i = 0
        end = time.perf_counter() + window_s
        while (i < limit) if until is None else not until() and time.perf_counter() < end:
            t = time.perf_counter()
            await call(client, "search_memory",
                       {"query": queries[i % len(queries)], "top_k": 5, "all_projects": True})
            times.append((time.perf_counter() - t) * 1000)
            i += 1
    return (round(statistics.median(times), 2) if times else 0.0), len(times)


def _wait_then(brain: Any, done: threading.Event) -> None:
    brain.model_switch.wait(3 * 3600)
    done.set()


def _filled(home: Path, n: int, batch: int | None, pause_s: float | None, new: Any) -> Any:
    from brain.app import Brain
    from brain.embedding.registry import REGISTRY, HashEmbedder
    from brain.memory.bulk import BulkNote, bulk_add
    from config import load_settings

    settings = load_settings(home=home)
    settings.embedding.model = "offline/hash-384"
    if batch is not None:
        settings.embedding.rebuild_batch = batch
    if pause_s is not None:
        settings.embedding.rebuild_pause_s = pause_s
    brain = Brain(settings, embedder=HashEmbedder(REGISTRY["offline/hash-384"]))
    brain.embedder_factory = lambda _t: new
    brain.open()
    bulk_add(brain.memory, (BulkNote(x, project=f"proj-{i % PROJECTS}")
                            for i, x in enumerate(synthetic_notes(n))), batch=1024)
    _until_indexed(brain, settings.index.min_unindexed)
    return brain


def _until_indexed(brain: Any, threshold: int, limit_s: float = 3600) -> None:
    """Wait for the product's index worker to bring the bulk-filled store to rest, as a brain
    with months of notes is: a rebuild timed while the live store is still being indexed
    shares the CPU with that, and searches before the first index run are exact scans."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        st = brain.index_maintenance.status()
        if st.get("runs") and not st.get("running") and (st.get("unindexed") or 0) < threshold:
            return
        time.sleep(2)
    raise TimeoutError("the store was not indexed in time")


def measure(n: int, scratch: Path, log: Any = print, window_s: float = 120.0,
            parts: tuple[str, ...] = ("no_pause", "default_pace")) -> dict[str, Any]:
    """``window_s``: how long searches run beside the default-pace rebuild (the rest of it
    runs idle, at full speed: at 100k notes a whole rebuild under constant searches would
    take hours at the default busy share)."""
    from brain.embedding.registry import REGISTRY, build_embedder, embed_passages
    from brain.generations import Target
    from brain.memory.core import embed_text

    new = build_embedder(REGISTRY[TARGET], backend="torch")
    new.embed_query("warm up")
    texts = synthetic_notes(n)
    row: dict[str, Any] = {"notes": n, "model": TARGET}
    t = time.perf_counter()
    embed_passages(new, [embed_text({"content": x}) for x in texts])
    row["embed_alone_s"] = round(time.perf_counter() - t, 2)
    log(f"rebuild {n}: embedding alone {row['embed_alone_s']} s")
    queries = [x[:60] for x in texts[:50]]
    for label, pause in (("no_pause", 0.0), ("default_pace", None)):
        if label not in parts:
            continue
        brain = _filled(Path(tempfile.mkdtemp(dir=scratch)), n, None, pause, new)
        try:
            idle, _ = asyncio.run(_search_p50(brain, queries))
            done = threading.Event()
            t = time.perf_counter()
            brain.model_switch.switch(Target(TARGET, 384))
            waiter = threading.Thread(target=_wait_then, args=(brain, done), daemon=True)
            waiter.start()
            busy: list[float] = []
            # No pause: the rebuild alone (its cost against embedding alone); the default
            # pace: with searches running, their p50.
            if label == "default_pace":
                p50, count = asyncio.run(_search_p50(brain, queries, until=done.is_set,
                                                     window_s=window_s))
                busy = [p50, count]
            waiter.join()
            took = time.perf_counter() - t
            row[label] = {
                "rebuild_s": round(took, 2),
                "x_embed_alone": round(took / row["embed_alone_s"], 2),
                "batch": brain.model_switch.cfg.batch, "pause_s": brain.model_switch.cfg.pause_s,
            }
            if busy:
                row[label].update({
                    "search_p50_idle_ms": idle, "search_p50_during_ms": busy[0],
                    "searches_during": busy[1],
                    "p50_rise": round(busy[0] / idle - 1, 3) if idle else None})
            log(f"rebuild {n} {label}: {row[label]}")
        finally:
            brain.close()
    return row


def run(scratch: Path, quick: bool, log: Any = print) -> dict[str, Any]:
    return measure(500 if quick else 2000, scratch, log)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.rebuild")
    p.add_argument("--notes", type=int, default=2000)
    p.add_argument("--search-s", type=float, default=120.0,
                   help="seconds of searches beside the default-pace rebuild")
    p.add_argument("--parts", default="no_pause,default_pace",
                   help="which rebuilds to time: no_pause (the 1.3x target), default_pace")
    args = p.parse_args()
    log = functools.partial(print, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(measure(args.notes, Path(tmp), log, args.search_s,
                                 tuple(args.parts.split(","))), indent=2))


if __name__ == "__main__":
    main()
