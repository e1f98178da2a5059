"""What the product's note filter costs the two retrieval legs, on a store a speed run left::

    python -m bench.filter_cost STORE_HOME [--queries 120] [--json OUT]

Opens the store (default settings, workers stopped once it is open, so nothing runs beside
the timing), embeds the speed bench's synthetic queries once, then times, per query, the
dense leg (``query_dense``, 50 candidates, the hybrid's leg fields) and the keyword leg
(``query_sparse``) with no filter, the all-projects filter and the one-project filter that
``build_filter`` makes for a default search_memory, and ``MemoryService.search`` (no access
stamps) with the same filters. Two rounds; the second is reported (the first warms pages).
A store from before recall keys (brain/store/recall_key.py) is keyed by the open; the time the
backfill took is reported (``backfill_s``) and the timing waits for it. Run it with the code
to compare on PYTHONPATH (a clone of another commit on a copy of the same store) to put two
versions side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PROJECTS = 20  # the speed bench's (bench/speed.py)


def _wait_for_keys(meta: Any) -> float | None:
    try:
        from brain.store import recall_key
    except ImportError:  # a version from before recall keys
        return None
    t = time.perf_counter()
    while not recall_key.complete(meta.data):
        time.sleep(0.2)
    return round(time.perf_counter() - t, 2)


def run(home: Path, queries: int) -> dict[str, Any]:
    from bench import percentiles, rss_mb
    from bench.synthetic import synthetic_queries
    from brain.app import Brain
    from brain.memory.filters import RecallFilter, build_filter
    from brain.search.fusion import LEG_FIELDS
    from config import load_settings

    t = time.perf_counter()
    brain = Brain(load_settings(home=home)).open()
    out: dict[str, Any] = {"store": str(home), "open_s": round(time.perf_counter() - t, 2)}
    try:
        brain.workers.stop()
        out["backfill_s"] = _wait_for_keys(brain.meta)
        m = brain.memory
        qs = synthetic_queries(queries)
        dense = [[float(x) for x in brain.embedder.embed_query(q)] for q in qs]
        sparse = [m.bm25.query(q) for q in qs]
        scopes: dict[str, Any] = {
            "none": lambda i: None,
            "all_projects": lambda i: RecallFilter(all_projects=True),
            "one_project": lambda i: RecallFilter(project=f"proj-{i % PROJECTS}"),
        }
        flt = build_filter(m, RecallFilter(all_projects=True))
        out["all_projects_conditions"] = len(flt.must) + len(flt.must_not)
        for rnd in range(2):
            for name, scope in scopes.items():
                d, s = [], []
                for i in range(len(qs)):
                    rf = scope(i)
                    f = None if rf is None else build_filter(m, rf)
                    t = time.perf_counter()
                    m.store.query_dense(dense[i], f, 50, fields=LEG_FIELDS)
                    d.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    m.store.query_sparse(sparse[i], f, 50, fields=LEG_FIELDS)
                    s.append((time.perf_counter() - t) * 1000)
                if rnd:
                    out[f"dense_{name}_ms"] = percentiles(d)
                    out[f"sparse_{name}_ms"] = percentiles(s)
        for name in ("all_projects", "one_project"):
            x = []
            for i, q in enumerate(qs):
                t = time.perf_counter()
                m.search(q, 10, scopes[name](i), stamp=False, query_vector=dense[i])
                x.append((time.perf_counter() - t) * 1000)
            out[f"memory_search_{name}_ms"] = percentiles(x)
        out["payload_indexes"] = len(brain.store.payload_indexes())
        out["rss_mb"] = rss_mb()
        return out
    finally:
        brain.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.filter_cost", description=__doc__)
    p.add_argument("store", help="a data dir a speed run left (e.g. .../speed-100000)")
    p.add_argument("--queries", type=int, default=120)
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    out = run(Path(args.store), args.queries)
    text = json.dumps(out, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
