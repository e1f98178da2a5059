"""Integrity scan time at scale: ``python -m bench.health --notes 100000`` (or
``python -m bench --only health``).

A fresh Edge store is bulk-filled with synthetic notes (brain.memory.bulk; the offline hash embedder,
since the scan reads payloads and filters and never embeds), a little damage is made on
purpose, then the full integrity scan (every owner) and the cheap stats are timed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import peak_rss_mb
from bench.speed import PROJECTS, synthetic_notes


def measure(n: int, home: Path, runs: int = 2, log: Any = print) -> dict[str, Any]:
    from brain.app import Brain
    from brain.embedding.registry import REGISTRY, HashEmbedder
    from brain.memory.bulk import BulkNote, bulk_add
    from brain.notes import point_id
    from config import load_settings

    settings = load_settings(home=home)
    settings.embedding.model = "offline/hash-384"
    brain = Brain(settings, embedder=HashEmbedder(REGISTRY["offline/hash-384"])).open()
    row: dict[str, Any] = {"notes": n}
    try:
        t = time.perf_counter()
        res = bulk_add(brain.memory, (BulkNote(x, project=f"proj-{i % PROJECTS}")
                                      for i, x in enumerate(synthetic_notes(n))), batch=1024)
        row["fill_s"] = round(time.perf_counter() - t, 1)
        log(f"health {n}: filled in {row['fill_s']} s")
        # Damage: a dangling link and a missing BM25 vector, so the scan has findings.
        brain.store.set_payload([point_id(res.zk_ids[0])], {"links": ["ZK-DEADBEEF"]})
        p = brain.store.retrieve([point_id(res.zk_ids[1])], with_vectors=True)[0]
        p.sparse = None
        brain.store.upsert([p])
        brain.store.optimize()
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            rep = brain.health.scan(everyone=True)
            times.append(time.perf_counter() - t)
        row["scan_s"] = [round(x, 2) for x in times]
        row["scan_best_s"] = round(min(times), 2)
        row["points_per_s"] = round(rep["points"] / min(times))
        row["findings"] = {k: v["count"] for k, v in rep["findings"].items() if v["count"]}
        t = time.perf_counter()
        brain.health.stats()
        row["stats_ms"] = round((time.perf_counter() - t) * 1000, 1)
        row["peak_rss_mb"] = round(peak_rss_mb())
        log(f"health {n}: scan {row['scan_s']} s, stats {row['stats_ms']} ms")
    finally:
        brain.close()
    return row


def run(scratch: Path, quick: bool, log: Any = print) -> dict[str, Any]:
    n = 5_000 if quick else 100_000
    return measure(n, scratch / f"health-{n}", log=log)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.health", description=__doc__)
    p.add_argument("--notes", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=2)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="brain-bench-health-") as d:
        print(json.dumps(measure(args.notes, Path(d), args.runs), indent=2))


if __name__ == "__main__":
    main()
