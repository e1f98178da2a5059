"""Indexing and grep figures of the source index, measured in one run (not a CI test).

``python -m bench.sources --files 5000`` copies that many text files of this
project's site-packages into a temp tree, indexes it as a source with the real model and
reports files/s, chunks/s, the ratio of indexing time to the time the embedder alone needs
for the same chunks (same batches), the unchanged re-sync, and grep p50 against plain rg.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from brain.sources.filters import SourceFilter
from brain.sources.grep import find_rg, grep
from brain.sources.walker import is_binary, walk_source


def copy_tree(src: Path, dest: Path, files: int, max_bytes: int) -> int:
    """Copy the first ``files`` admitted text files of ``src`` (at most max_bytes each)."""
    walk = walk_source(src, SourceFilter(src, [], []), max_files=10**6)
    n = 0
    for e in walk.files:
        if n >= files:
            break
        if not 0 < e.size <= max_bytes or is_binary(e.path):
            continue
        target = dest / e.rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(e.path, target)
        n += 1
    return n


def bench_grep(root: Path, pattern: str, runs: int = 15, fixed: bool = True) -> dict[str, Any]:
    """p50 of ``grep()`` (all hits) and of plain ``rg -n`` on the same tree, interleaved."""
    rg = find_rg()
    assert rg is not None, "ripgrep not found: pip install ripgrep"
    flt = SourceFilter(root, [], [])
    ours, plain, hits = [], [], 0
    cmd = [rg, "-n", "--no-heading", *(["-F"] if fixed else []), "-e", pattern, "."]
    for _ in range(runs):
        t0 = time.perf_counter()
        res = grep([(root, flt)], pattern, fixed=fixed, max_results=10**7, timeout_s=120)
        ours.append(time.perf_counter() - t0)
        hits = len(res.hits)
        t0 = time.perf_counter()
        out = subprocess.run(cmd, cwd=root, capture_output=True, check=False).stdout
        plain.append(time.perf_counter() - t0)
    p50_ours, p50_rg = statistics.median(ours), statistics.median(plain)
    return {
        "pattern": pattern,
        "hits": hits,
        "rg_lines": out.count(b"\n"),
        "p50_ours_s": round(p50_ours, 4),
        "p50_rg_s": round(p50_rg, 4),
        "ratio": round(p50_ours / p50_rg, 3),
    }


def bench_index(
    tree: Path,
    home: Path,
    model: str = "sentence-transformers/all-MiniLM-L6-v2",
    embed_batch: int = 64,
) -> dict[str, Any]:
    """Index ``tree`` as a source with the real model; see the module docstring."""
    from brain.app import Brain
    from config import load_settings

    settings = load_settings(home=home)
    settings.embedding.model = model
    settings.sync.embed_batch = embed_batch
    settings.paths.allowed_roots = [str(tree)]  # the benchmark's own tree, wherever it is
    brain = Brain(settings).open()
    try:
        brain.embedder.embed_documents(["warm up the model"] * 8)
        svc = brain.sources
        batches: list[list[str]] = []
        svc.indexer.on_embed = batches.append
        svc.add(str(tree), name="bench", sync=False)
        t0 = time.perf_counter()
        first = svc.sync("bench", wait=True)
        t_index = time.perf_counter() - t0
        svc.indexer.on_embed = None
        t0 = time.perf_counter()
        again = svc.sync("bench", wait=True)
        t_resync = time.perf_counter() - t0
        r = first["result"]
        print(
            json.dumps(
                {
                    "partial": {
                        "files": r["files_indexed"],
                        "chunks": r["chunks_embedded"],
                        "index_s": round(t_index, 2),
                        "embed_calls_s": round(r["embed_s"], 2),
                        "resync_s": round(t_resync, 3),
                    }
                }
            ),
            flush=True,
        )
        t0 = time.perf_counter()
        for batch in batches:  # the very batches the indexer sent, in the same order
            brain.embedder.embed_documents(batch)
        t_embed = time.perf_counter() - t0
        r = first["result"]
        return {
            "files": r["files_indexed"],
            "chunks": r["chunks_embedded"],
            "index_s": round(t_index, 2),
            "embed_alone_s": round(t_embed, 2),
            "files_per_s": round(r["files_indexed"] / t_index, 1),
            "chunks_per_s": round(r["chunks_embedded"] / t_index, 1),
            "ratio_index_to_embed_alone": round(t_index / t_embed, 3),
            "ratio_in_run (index / time inside embed calls)": round(t_index / r["embed_s"], 3),
            "resync_s": round(t_resync, 3),
            "resync_chunks_embedded": again["result"]["chunks_embedded"],
            "resync_fraction": round(t_resync / t_index, 4),
        }
    finally:
        brain.close()


def bench_watch(
    work: Path, runs: int = 5, model: str = "sentence-transformers/all-MiniLM-L6-v2"
) -> dict[str, Any]:
    """Seconds from saving a file in an auto source to fs_search (semantic) finding it."""
    from brain.app import Brain
    from config import load_settings

    settings = load_settings(home=work / "watch-home")
    settings.embedding.model = model
    root = work / "watched"
    settings.paths.allowed_roots = [str(root)]  # the benchmark's own folder
    root.mkdir(parents=True, exist_ok=True)
    (root / "seed.md").write_text("seed file\n")
    brain = Brain(settings).open()
    latencies = []
    try:
        brain.embedder.embed_documents(["warm up"])
        brain.sources.add(str(root), name="watched", trigger="auto")
        brain.sources.wait_idle(120)
        time.sleep(0.5)
        for i in range(runs):
            word = f"quokka{i}zebra"
            t0 = time.perf_counter()
            (root / f"note{i}.md").write_text(f"The {word} lives on an island.\n")
            while time.perf_counter() - t0 < 30:
                hits = brain.sources.search(word, "semantic", limit=3)["results"]
                if any(h["path"] == f"note{i}.md" for h in hits):
                    break
                time.sleep(0.02)
            latencies.append(time.perf_counter() - t0)
            time.sleep(0.3)
    finally:
        brain.close()
    return {
        "runs": runs,
        "latency_s": [round(x, 3) for x in latencies],
        "p50_s": round(statistics.median(latencies), 3),
        "max_s": round(max(latencies), 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--max-bytes", type=int, default=1200)
    ap.add_argument("--src", default=sysconfig.get_path("purelib"))
    ap.add_argument("--grep", default="def __init__")
    ap.add_argument("--skip-index", action="store_true")
    ap.add_argument("--watch-only", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="brain-bench-"))
    try:
        if args.watch_only:
            print(json.dumps({"watch": bench_watch(work)}, indent=2))
            return 0
        tree = work / "tree"
        copied = copy_tree(Path(args.src), tree, args.files, args.max_bytes)
        out: dict[str, Any] = {"copied_files": copied, "src": args.src}
        out["grep"] = bench_grep(tree, args.grep)
        if not args.skip_index:
            out["index"] = bench_index(tree, work / "home")
        print(json.dumps(out, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
