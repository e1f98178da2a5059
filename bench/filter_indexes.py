"""What filters on fields without a payload index cost, beside the same fields indexed.

The branch rule (brain/memory/filters.py ``branch_conditions``, brain/memory/supersede.py
``_same_branch``) hides notes open on another branch: a search in a project under git adds
``must_not (branch_open >= 1 and branch != current)``, and every permanent add looks for the
notes it supersedes outside any open branch (``must_not branch_open >= 1``). A condition on a
field with no payload index is checked point by point against the stored payloads, so its cost
grows with the brain. This bench builds a brain of each size (bulk-loaded, the product's onnx
embedder), then, per size and side by side in one run, times ``query_dense`` (10 hits, the
median of ``--queries`` calls) under the plain project filter, the search's branch filter,
the add's, fs_search's path privacy (``tenancy.path_conditions``, on every source search) and
an ``as_of`` search's (``valid_from_ts`` / ``valid_to_ts``); a fix's look-up (``count`` of
the notes linking to one: preflight_check does it per mistake it shows); brain_stats (its
counts keep superseded notes apart by ``valid_to_ts``; the median of a sixth as many calls);
and ``add_memory`` (the median of ``--adds`` adds). Each with the fields indexed, as the
product declares them, and with their indexes dropped, as before. The points are notes, which
lack the path fields: a source's chunks pay the same check per point::

    python -m bench.filter_indexes [--sizes 3000,7000] [--queries 60] [--adds 60] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = ("cache", "redis", "port", "timeout", "retry", "session", "token", "handler", "config",
         "deploy", "build", "test", "queue", "worker", "index", "schema", "query", "migration",
         "lock", "thread")
FIELDS = ("branch_open", "branch", "path_agent", "links", "_b_path_private", "valid_to_ts",
          "valid_from_ts")


def _median_ms(fn: Any, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1000, 2)


def _note(rng: random.Random, i: int) -> str:
    return f"The {' '.join(rng.sample(WORDS, 4))} decision {i} was made for the service."


def run(sizes: list[int], queries: int, adds: int, embedder: Any = None) -> list[dict[str, Any]]:
    from bench import open_brain
    from brain.embedding.registry import DEFAULT_MODEL, REGISTRY, build_embedder
    from brain.memory.bulk import BulkNote, bulk_add
    from brain.memory.filters import NOTE_FILTER
    from brain.trust import tenancy
    from brain.trust.identity import Identity
    from brain.vector_store import Filter, Match, Range
    from brain.vector_store.edge import EdgeStore, qe
    from brain.vector_store.forwarding import backend_of

    rng = random.Random(0)
    out = []
    embedder = embedder or build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx")
    with tempfile.TemporaryDirectory() as tmp:
        brain = open_brain(Path(tmp), embedder)
        try:
            m = brain.memory
            edge = backend_of(m.store)
            if not isinstance(edge, EdgeStore):
                raise SystemExit("filter_indexes: the brain is not on the embedded store")
            qv = embedder.embed_query("redis cache timeout")
            plain = NOTE_FILTER.and_(Match("project", "p"))
            open_ = Range("branch_open", gte=1)
            filters = {
                "project": plain,
                "search on a branch": plain.and_(Filter(must_not=(
                    Filter(must=(open_,), must_not=(Match("branch", "main"),)),))),
                "add (supersession)": plain.and_(Filter(must_not=(open_,))),
                "fs_search path privacy": plain.and_(
                    *tenancy.path_conditions(Identity("default", "bench"))),
                "search as_of": plain.and_(Filter(must_not=(
                    Range("valid_from_ts", gt=1.0), Range("valid_to_ts", gt=0, lte=1.0)))),
            }
            links = Filter(must=(Match("kind", "note"), Match("links", "no-such-note")))
            count = 0
            for size in sorted(sizes):
                bulk_add(m, [BulkNote(_note(rng, i), project="p") for i in range(count, size)])
                count = size
                row: dict[str, Any] = {"notes": size}
                for indexed in (True, False):
                    if not indexed:
                        for name in FIELDS:
                            edge._update(qe.UpdateOperation.delete_field_index(name))
                    side = "indexed" if indexed else "not indexed"
                    for label, flt in filters.items():
                        row[f"{label}, {side} (ms)"] = _median_ms(
                            lambda flt=flt: m.store.query_dense(qv, flt, 10), queries)

                    def add() -> None:
                        nonlocal count
                        m.add(_note(rng, count), project="p")
                        count += 1
                    row[f"a fix's look-up, {side} (ms)"] = _median_ms(
                        lambda: m.store.count(links), queries)
                    row[f"brain_stats, {side} (ms)"] = _median_ms(m.stats, max(3, queries // 6))
                    row[f"add_memory, {side} (ms)"] = _median_ms(add, adds)
                    if not indexed:
                        edge.ensure_indexes()
                out.append(row)
        finally:
            brain.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="3000,7000")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--adds", type=int, default=60)
    ap.add_argument("--json", help="write the rows here too")
    args = ap.parse_args()
    rows = run([int(s) for s in args.sizes.split(",")], args.queries, args.adds)
    print(json.dumps(rows, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
