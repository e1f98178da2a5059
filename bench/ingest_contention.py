"""Tool calls during heavy work: ``python -m bench.ingest_contention [--files N] [--quick]``
(or ``python -m bench --only ingest_contention``).

Issue 50 item 6 / issue 51 item 2: search_memory and add_memory p50/p99 idle, during the
ingest of a 15 MB document, and during the sync of a source of many generated files
(``--files``: 20,000 for the full bench, 2,000 for ``--quick``), side by side in one run, on
one Brain on Qdrant Edge with the product's default embedder (onnx, in-process). The calls go
through an in-process MCP client, the product's path: each holds the generation gate, which
is what the background lane of brain/embedding/lanes.py yields to. A client alternates
search_memory and add_memory with ``THINK_S`` between calls (an agent's pace); each busy
phase measures while its ingest runs, for at most ``--window`` seconds: an ingest still
running then is cancelled (the document deleted, the sync cancelled) and the row says how
far it got, so a loaded machine still finishes the run.

``--search-only``: the client only searches, so the brain keeps its 40 notes through the
busy phases (with add_memory calls a 20,000-file sync's ~17 minutes grow it to ~6,000 notes,
and the idle it is compared with is the 40-note brain before).

``--no-yield`` runs the same phases with the lanes off (batches, still of about 0.1 s,
neither wait for tool calls nor are stopped by them), the comparison that shows what
yielding buys. Target: p99 during either ingest within 3x of idle.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import call, emit_json, mcp_client, percentiles

THINK_S = 0.05  # between two calls of the client
DOC_BYTES = 15 * 1024 * 1024
TARGET_RATIO = 3.0
WORDS = ("cache", "router", "ledger", "invoice", "kernel", "tensor", "queue", "retry",
          "schema", "token", "shard", "replica", "lease", "quorum", "buffer", "socket",
          "parser", "render", "budget", "migration", "rollback", "deadline", "backoff")


def paragraph(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def make_document(path: Path, size: int = DOC_BYTES, seed: int = 7) -> Path:
    """A Markdown document of ``size`` bytes: headed sections of prose paragraphs."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    section = 0
    while total < size:
        section += 1
        block = f"## Section {section}\n\n" + "\n\n".join(
            paragraph(rng, rng.randint(40, 120)) for _ in range(6)) + "\n\n"
        parts.append(block)
        total += len(block)
    path.write_text("".join(parts)[:size], encoding="utf-8")
    return path


def make_source(root: Path, files: int, seed: int = 11) -> Path:
    """``files`` small text and Python files (one chunk each) in 100 folders."""
    rng = random.Random(seed)
    for i in range(files):
        folder = root / f"pkg{i % 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        if i % 2:
            body = f"def handler_{i}(request):\n    # {paragraph(rng, 20)}\n    return {i}\n"
            (folder / f"mod_{i}.py").write_text(body, encoding="utf-8")
        else:
            (folder / f"note_{i}.txt").write_text(paragraph(rng, 60), encoding="utf-8")
    return root


async def _calls(client: Any, running: Any, limit_s: float, min_calls: int,
                 rng: random.Random, adds: bool = True) -> dict[str, list[float]]:
    """search_memory and add_memory in turn while ``running()`` (only search_memory without
    ``adds``); at least ``min_calls`` each, within ``limit_s``."""
    out: dict[str, list[float]] = {"search_memory": [], "add_memory": []}
    tools = list(out) if adds else ["search_memory"]
    end = time.perf_counter() + limit_s
    i = 0
    while time.perf_counter() < end and (running() or min(len(out[t]) for t in tools) < min_calls):
        q = " ".join(rng.choice(WORDS) for _ in range(4))
        if i % 2 == 0 or not adds:
            t = time.perf_counter()
            await call(client, "search_memory", {"query": q, "top_k": 5, "project": "bench"})
            out["search_memory"].append((time.perf_counter() - t) * 1000)
        else:
            t = time.perf_counter()
            await call(client, "add_memory", {"content": f"observation {i}: {q}",
                                              "project": "bench"})
            out["add_memory"].append((time.perf_counter() - t) * 1000)
        i += 1
        await asyncio.sleep(THINK_S)
    return out


def _row(samples: dict[str, list[float]], idle: dict[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for tool, xs in samples.items():
        p = percentiles(xs)
        row[tool] = p
        if idle is not None and idle[tool]["p99"]:
            p["p99_vs_idle"] = round(p["p99"] / idle[tool]["p99"], 2)
    return row


async def _measure(brain: Any, scratch: Path, files: int, window_s: float, idle_calls: int,
                   log: Any, doc_bytes: int, adds: bool = True) -> dict[str, Any]:
    rng = random.Random(3)
    result: dict[str, Any] = {}
    async with mcp_client(brain) as client:
        for i in range(40):  # notes to search, and a warm model
            await call(client, "add_memory", {"content": f"seed note {i}: " + paragraph(rng, 30),
                                              "project": "bench"})
        idle = _row(await _calls(client, lambda: False, 120.0, idle_calls, rng, adds), None)
        result["idle"] = idle
        log(f"ingest_contention idle: {json.dumps(idle)}")

        doc = make_document(scratch / "big.md", doc_bytes)
        t0 = time.perf_counter()
        rec = brain.files.ingest(str(doc), project="bench")

        def doc_running() -> bool:
            return str(brain.files.get(rec["id"])["status"]) == "processing"

        busy = await _calls(client, doc_running, window_s, 0, rng, adds)
        done = brain.files.get(rec["id"])
        finished = done["status"] != "processing"
        result["document"] = {**_row(busy, idle), "status": done["status"],
                              "chunks": done.get("chunks_count"),
                              "bytes": doc.stat().st_size,
                              "ingest_s": round(time.perf_counter() - t0, 1) if finished else
                              f"> {window_s:g} (deleted at the end of the window)"}
        if not finished:
            brain.files.delete(rec["id"])
        log(f"ingest_contention document: {json.dumps(result['document'])}")

        root = make_source(scratch / "src", files)
        brain.sources.add(str(root), name="many", project="bench", sync=False)
        t0 = time.perf_counter()
        job = brain.sources.sync("many")

        def sync_running() -> bool:
            return str(brain.sources.job(job["job_id"])["status"]) in ("queued", "running")

        busy = await _calls(client, sync_running, window_s, 0, rng, adds)
        progress = brain.sources.job(job["job_id"])["progress"]
        if sync_running():
            brain.sources.cancel(job["job_id"])
        final = await asyncio.to_thread(brain.sources.wait, job["job_id"], 3600)
        result["sync"] = {**_row(busy, idle), "status": final["status"], "files": files,
                          "files_done": progress.get("files_done"),
                          "chunks_embedded": progress.get("chunks_embedded"),
                          "sync_s": round(time.perf_counter() - t0, 1)}
        log(f"ingest_contention sync: {json.dumps(result['sync'])}")
        # The same calls idle again, on the brain as the busy phases left it (their
        # add_memory calls grew it: thousands of notes after a 20,000-file sync, 40 before).
        after = _row((await _calls(client, lambda: False, 120.0, idle_calls, rng, adds)), None)
        result["idle_after"] = after
        for phase in ("document", "sync"):
            for tool, p in result[phase].items():
                if isinstance(p, dict) and "p99" in p and after[tool]["p99"]:
                    p["p99_vs_idle_after"] = round(p["p99"] / after[tool]["p99"], 2)
        log(f"ingest_contention idle after: {json.dumps(after)}")
    result["lanes"] = brain.lanes.status()
    return result


def run(scratch: Path, quick: bool, log: Any = print, *, files: int | None = None,
        window_s: float | None = None, variants: tuple[str, ...] = ("yield",),
        doc_bytes: int = DOC_BYTES, adds: bool = True, idle_calls: int = 200) -> dict[str, Any]:
    """Each variant on a fresh data dir: ``yield`` (the product) and ``no-yield`` (lanes off)."""
    from brain.app import Brain
    from config import load_settings

    n = files or (2_000 if quick else 20_000)
    window = window_s or (120.0 if quick else 600.0)
    out: dict[str, Any] = {"files": n, "doc_mb": round(doc_bytes / 1048576, 1), "think_s": THINK_S,
                           "window_s": window, "adds": adds}
    for variant in variants:
        home = Path(tempfile.mkdtemp(prefix=f"ingest-{variant}-", dir=scratch))
        work = home / "work"
        work.mkdir()
        settings = load_settings(home=home / "data", paths={"allowed_roots": [str(work)]},
                                 sync={"auto": "off"})
        brain = Brain(settings).open()
        try:
            if variant == "no-yield":
                brain.lanes.enabled = False  # batches neither wait nor stop for tool calls
            out[variant] = asyncio.run(_measure(brain, work, n, window, idle_calls,
                                                log, doc_bytes, adds))
        finally:
            brain.close()
        for phase in ("document", "sync"):
            p99 = out[variant][phase]["search_memory"].get("p99_vs_idle")
            out[variant][phase]["met"] = p99 is not None and p99 <= TARGET_RATIO
    return out


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    p = argparse.ArgumentParser(prog="python -m bench.ingest_contention", description=__doc__)
    p.add_argument("--quick", action="store_true", help="2,000 files, 120 s windows")
    p.add_argument("--files", type=int, default=None, help="files in the synced source")
    p.add_argument("--window", type=float, default=None, help="seconds measured per phase")
    p.add_argument("--no-yield", action="store_true",
                   help="also run every phase with the lanes off, for comparison")
    p.add_argument("--doc-mb", type=float, default=DOC_BYTES / 1048576,
                   help="size of the ingested document, MB")
    p.add_argument("--search-only", action="store_true",
                   help="the client only searches (the brain keeps its 40 notes: the busy "
                        "phases are compared with idle on a brain of the same size)")
    p.add_argument("--json", default=None, help="write the figures to this file")
    args = p.parse_args(argv)
    variants = ("yield", "no-yield") if args.no_yield else ("yield",)
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        res = run(Path(tmp), args.quick, files=args.files, window_s=args.window,
                  variants=variants, doc_bytes=int(args.doc_mb * 1048576),
                  adds=not args.search_only)
    emit_json(res, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
