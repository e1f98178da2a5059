"""Would a search gain by running its parts side by side? ``python -m bench.parallel_legs``.

A search runs the query embedding, the dense leg and the keyword leg one after another
(brain/search/fusion.py). This times, on an Edge store of random points (``--points``, unindexed),
the same queries one after another and on two threads, how fast a Python loop on another
thread runs while they query (near 100%: the query lets go of the GIL; near half: it holds
it), and the query embedding with a dense query, one after the other and overlapped.
BENCHMARKS.md, "Would the legs, or the query embedding, run side by side?".
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUERIES = 40


def _store(path: Path, n: int, seed: int = 0) -> Any:
    import numpy as np

    from brain.vector_store.base import Point, SparseVector
    from brain.vector_store.edge import EdgeStore

    store = EdgeStore(path)
    store.open(384)
    rng = np.random.default_rng(seed)
    for start in range(0, n, 2000):
        size = min(2000, n - start)
        vecs = rng.standard_normal((size, 384)).astype("float32")
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        store.upsert([
            Point(str(uuid.UUID(int=start + i + 1)), {"project": f"p{(start + i) % 20}"},
                  dense=vecs[i].tolist(),
                  sparse=SparseVector(tuple(sorted(rng.choice(30_000, 12, replace=False)
                                                   .tolist())), (1.0,) * 12))
            for i in range(size)
        ])
    return store


def _spinner_share(run: Callable[[], Any]) -> float:
    """How fast a Python loop on another thread counts while ``run`` runs, as a share of its
    rate with nothing else running."""
    def rate(during: Callable[[], Any]) -> float:
        stop, out = threading.Event(), []

        def spin() -> None:
            n = 0
            while not stop.is_set():
                n += 1
            out.append(n)

        th = threading.Thread(target=spin)
        t = time.perf_counter()
        th.start()
        during()
        stop.set()
        th.join()
        return out[0] / (time.perf_counter() - t)

    return rate(run) / rate(lambda: time.sleep(0.5))


def _ms(fn: Callable[[], Any], times: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(times):
        fn()
    return round((time.perf_counter() - t) * 1000, 2)


def _leg(leg: Callable[[int], Any]) -> dict[str, float]:
    """One leg's queries one after another, on two threads, and beside a Python loop."""
    def all_of() -> None:
        for i in range(QUERIES):
            leg(i)

    leg(0)
    with ThreadPoolExecutor(2) as pool:
        two = _ms(lambda: list(pool.map(leg, range(QUERIES))))
    return {"sequential_ms": _ms(all_of), "two_threads_ms": two,
            "spinner_share": round(_spinner_share(all_of), 2)}


def measure(points: int) -> dict[str, Any]:
    import numpy as np

    from brain.embedding.registry import REGISTRY, build_embedder
    from brain.vector_store.base import SparseVector

    rng = np.random.default_rng(1)
    dense_q = [rng.standard_normal(384).tolist() for _ in range(QUERIES)]
    sparse_q = [SparseVector(tuple(sorted(rng.choice(30_000, 6, replace=False).tolist())),
                             (1.0,) * 6) for _ in range(QUERIES)]
    out: dict[str, Any] = {"points": points, "queries": QUERIES}
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(Path(tmp) / "shard", points)
        try:
            legs: dict[str, Callable[[int], Any]] = {
                "dense": lambda i: store.query_dense(dense_q[i], None, 50),
                "sparse": lambda i: store.query_sparse(sparse_q[i], None, 50),
            }
            for name, leg in legs.items():
                out[name] = _leg(leg)
            embedder = build_embedder(REGISTRY["sentence-transformers/all-MiniLM-L6-v2"],
                                      backend="onnx")
            embedder.embed_query("warm up")
            texts = [f"why does the consumer of queue {i} lag behind" for i in range(QUERIES)]
            dense = legs["dense"]

            def overlapped() -> None:
                with ThreadPoolExecutor(1) as pool:
                    for i, text in enumerate(texts):
                        job = pool.submit(embedder.embed_query, text)
                        dense(i)
                        job.result()

            per = 1 / QUERIES
            out["embedding_and_dense"] = {
                "embedding_ms": round(_ms(lambda: [embedder.embed_query(x) for x in texts])
                                      * per, 2),
                "dense_ms": round(_ms(lambda: [dense(i) for i in range(QUERIES)]) * per, 2),
                "one_after_the_other_ms": round(_ms(lambda: [
                    (embedder.embed_query(x), dense(i)) for i, x in enumerate(texts)]) * per, 2),
                "overlapped_ms": round(_ms(overlapped) * per, 2),
            }
        finally:
            store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.parallel_legs", description=__doc__)
    p.add_argument("--points", type=int, default=40_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    for _ in range(args.rounds):
        print(json.dumps(measure(args.points)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
