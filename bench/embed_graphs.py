"""The default model's ONNX graphs side by side: plain, fused, and the fused graph with 8-bit
weights our server runs::

    python -m bench.embed_graphs [--queries 300] [--notes 640] [--json F]

brain/embedding/onnx_export.py writes the fp32 file with each layer's attention fused (``fuse``) and,
for the default ``onnx`` backend, that graph with its MatMul weights in 8 bits per block
(``weights8``). This times, on this machine, the graphs side by side in one process, each on
the session options the server uses: single synthetic queries (the sessions alternating per
query, p50 ms) and ``--notes`` synthetic notes in batches of 64 (best of three, seconds), and
checks the vectors agree (minimum cosine: fused to plain, 8-bit to fused). The plain file is
exported once into the ONNX cache when it is missing (~12 s, torch in a child process).
BENCHMARKS.md, "The fused graph" and "Round eight".
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _embedder_on(base: Any, path: Path) -> Any:
    """An embedder of ``base``'s model (an OnnxEmbedder) that runs the ONNX file ``path``."""
    from brain.embedding.onnx import OnnxEmbedder

    class _On(OnnxEmbedder):
        @property
        def model_file(self) -> Path:
            return path

    return _On(base.record, base.source, backend="onnx-fp32")


def compare(queries: int, notes: int) -> dict[str, Any]:
    from bench.synthetic import synthetic_notes, synthetic_queries
    from brain.embedding.onnx import OnnxEmbedder
    from brain.embedding.onnx_child import export_in_child
    from brain.embedding.registry import DEFAULT_MODEL, REGISTRY, build_embedder

    default = build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx")
    assert isinstance(default, OnnxEmbedder)
    default.embed_query("export the fused file once")
    if not default.plain_file.is_file():
        export_in_child(default.source, default.plain_file, quantize=False, fused=False)
    graphs = {"plain": _embedder_on(default, default.plain_file),
              "fused": _embedder_on(default, default.fused_file)}
    if default.model_file.is_file():  # absent where the 8-bit weights were not kept
        graphs["w8"] = _embedder_on(default, default.model_file)
    qs = list(dict.fromkeys(synthetic_queries(queries * 3)))[:queries]
    texts = synthetic_notes(notes)
    for emb in graphs.values():
        emb.embed_documents(texts[:64])  # load, and size the arena for a batch
    query_ms: dict[str, list[float]] = {k: [] for k in graphs}
    qvecs: dict[str, list[Any]] = {k: [] for k in graphs}
    for q in qs:
        for name, emb in graphs.items():
            t = time.perf_counter()
            qvecs[name].append(emb.embed_query(q))
            query_ms[name].append((time.perf_counter() - t) * 1000)
    batch_s: dict[str, list[float]] = {k: [] for k in graphs}
    dvecs: dict[str, Any] = {}
    for _ in range(3):
        for name, emb in graphs.items():
            t = time.perf_counter()
            dvecs[name] = emb.embed_documents(texts)
            batch_s[name].append(time.perf_counter() - t)
    out: dict[str, Any] = {"queries": len(qs), "notes": notes, "files": {
        k: str(e.model_file) for k, e in graphs.items()}}
    for name in graphs:
        out[name] = {"query_p50_ms": round(statistics.median(query_ms[name]), 2),
                     "batch_best_s": round(min(batch_s[name]), 2),
                     "notes_per_s": round(notes / min(batch_s[name]))}

    def versus(a: str, b: str) -> dict[str, float]:
        return {"query_p50": round(out[a]["query_p50_ms"] / out[b]["query_p50_ms"], 3),
                "batch": round(out[a]["batch_best_s"] / out[b]["batch_best_s"], 3)}

    def cosine(a: str, b: str) -> dict[str, float]:
        q = min(x @ y for x, y in zip(qvecs[a], qvecs[b], strict=True))
        return {"queries": round(float(q), 6),
                "notes": round(float((dvecs[a] * dvecs[b]).sum(axis=1).min()), 6)}

    out["fused_over_plain"] = versus("fused", "plain")
    out["min_cosine"] = cosine("plain", "fused")
    if "w8" in graphs:
        out["w8_over_fused"] = versus("w8", "fused")
        out["w8_min_cosine"] = cosine("fused", "w8")
    return out


def main(argv: list[str] | None = None) -> int:
    from bench import emit_json

    p = argparse.ArgumentParser(prog="python -m bench.embed_graphs", description=__doc__)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--notes", type=int, default=640)
    p.add_argument("--json", default=None, help="also write the figures to this file")
    args = p.parse_args(argv)
    emit_json(compare(args.queries, args.notes), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
