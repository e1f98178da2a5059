"""A one-off profiler of the Qdrant Edge HNSW settings at 100,000 notes (not part of the suite).

It measured the project tenant index kept in ``brain/vector_store/base.py`` (a filtered dense
query, 5,000 of 100,000 notes, 8.0 -> 3.2 ms). A variant other than ``base`` replaces
``EdgeStore.open`` with one that builds the shard with the given ``full_scan_threshold`` (and
``payload_m`` 16 when the name holds ``pm``, a tenant index on ``project`` when it holds
``tenant``); it prints the p50 of a one-project dense query, HNSW and exact, and recall@10 of
HNSW against exact. The store is kept in /tmp/profdir/hv-VARIANT between runs.

    .venv/bin/python -m bench.prof_hnsw base
    .venv/bin/python -m bench.prof_hnsw tenant-pm 10000
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"

import qdrant_edge as qe  # noqa: E402

import brain.vector_store.edge as edge  # noqa: E402
from bench.speed import PROJECTS, synthetic_notes, synthetic_queries  # noqa: E402
from brain.app import Brain  # noqa: E402
from brain.embedding.registry import REGISTRY, HashEmbedder  # noqa: E402
from brain.memory import RecallFilter  # noqa: E402
from brain.memory.bulk import BulkNote, bulk_add  # noqa: E402
from config import load_settings  # noqa: E402

N = 100_000


def patch_open(variant: str, full_scan_threshold: int) -> None:
    def open_(self: Any, dimension: int) -> None:
        hnsw = qe.HnswIndexConfig(
            m=16,
            ef_construct=100,
            full_scan_threshold=full_scan_threshold,
            payload_m=16 if "pm" in variant else None,
        )
        cfg = qe.EdgeConfig(
            vectors={edge.DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)},
            sparse_vectors={edge.SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            hnsw_config=hnsw,
        )
        fresh = not (self.path.exists() and any(self.path.iterdir()))
        if fresh:
            self.path.mkdir(parents=True, exist_ok=True)
            self._shard = qe.EdgeShard.create(str(self.path), cfg)
            if "tenant" in variant:
                self._shard.update(
                    qe.UpdateOperation.create_field_index(
                        "project", qe.KeywordIndexParams(is_tenant=True)
                    )
                )
        else:
            self._shard = qe.EdgeShard.load(str(self.path))
        self.ensure_indexes()

    edge.EdgeStore.open = open_  # type: ignore[method-assign]


def median_ms(f: Callable[[int], Any], runs: int = 200) -> float:
    lat = []
    for i in range(runs):
        t = time.perf_counter()
        f(i)
        lat.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(lat), 2)


def main(argv: list[str]) -> int:
    variant = argv[0] if argv else "base"
    if variant != "base":
        patch_open(variant, int(argv[1]))
    home = Path(f"/tmp/profdir/hv-{variant}")
    fresh = not home.exists()
    s = load_settings(home=home)
    s.embedding.model = "offline/hash-384"
    b: Any = Brain(s, embedder=HashEmbedder(REGISTRY["offline/hash-384"])).open()
    if fresh:
        t = time.time()
        notes = (
            BulkNote(x, project=f"proj-{i % PROJECTS}") for i, x in enumerate(synthetic_notes(N))
        )
        bulk_add(b.memory, notes, batch=1024)
        print("bulk", round(time.time() - t), flush=True)
        t = time.time()
        b.index_maintenance.run("prof_hnsw")  # the product's own maintenance run
        print("optimize", round(time.time() - t), flush=True)
    qs = synthetic_queries(200)
    m = b.memory
    vecs = [m.embedder.embed_query(q).tolist() for q in qs]
    fl = [m.build_filter(RecallFilter(project=f"proj-{i % PROJECTS}")) for i in range(200)]
    for _ in range(2):
        hnsw = median_ms(lambda i: b.store.query_dense(vecs[i], fl[i], 50))
        exact = median_ms(lambda i: b.store.query_dense(vecs[i], fl[i], 50, exact=True))
        print(variant, "dense 1proj", hnsw, "exact", exact, flush=True)
    rec = []
    for i in range(100):
        a = {h.id for h in b.store.query_dense(vecs[i], fl[i], 10)}
        e = {h.id for h in b.store.query_dense(vecs[i], fl[i], 10, exact=True)}
        rec.append(len(a & e) / 10)
    print(variant, "recall@10 vs exact", sum(rec) / len(rec))
    b.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
