"""Cached embeddings of the speed bench's synthetic notes, so a 1,000,000-note point does not
embed a million notes in every run (about 1 h 45 min at the ~160 notes/s of two cores here).

The cache holds, for the first N notes of ``bench.speed.synthetic_notes`` (a prefix-stable
sequence), the dense vector the product would store for each: ``embed_passages`` of the note's
text with the bench's embedder (a bulk note without caller context is embedded as its
content). It is a raw float32 row file beside a JSON record of how far it got and how long
the embedding took, so the build resumes where a killed one stopped (the speed bench
measures the embedding rate itself, on a sample: this record's wall time includes whatever
shared the box during the build). A cache made by another
model or backend is never used.

    .venv/bin/python -m bench.vector_cache 1000000          # build or extend, with progress
    BRAIN_BENCH_VECTORS=/path/prefix  (default ~/.cache/opencode-brain/bench/speed-vectors)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CHUNK = 2048


def default_prefix() -> Path:
    env = os.environ.get("BRAIN_BENCH_VECTORS")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "opencode-brain" / "bench" / "speed-vectors"


def embedder_key(embedder: Any) -> str:
    """What made the vectors: the model and the backend that ran it."""
    record = getattr(embedder, "record", None)
    model = getattr(record, "id", None) or type(embedder).__name__
    backend = getattr(embedder, "backend", None) or type(embedder).__name__
    return f"{model}|{backend}"


@dataclass(slots=True)
class VectorCache:
    """The cache files of one embedder: ``<prefix>-<slug>.f32`` and ``.json``."""

    prefix: Path
    key: str
    dim: int

    @classmethod
    def for_embedder(cls, embedder: Any, prefix: Path | None = None) -> VectorCache:
        return cls(prefix or default_prefix(), embedder_key(embedder), int(embedder.dimension))

    @property
    def _slug(self) -> str:
        return "".join(c if c.isalnum() or c in "-_." else "-" for c in self.key)

    @property
    def data_path(self) -> Path:
        return self.prefix.with_name(f"{self.prefix.name}-{self._slug}.f32")

    @property
    def meta_path(self) -> Path:
        return self.prefix.with_name(f"{self.prefix.name}-{self._slug}.json")

    def meta(self) -> dict[str, Any]:
        """The record (``done`` rows, ``embed_s``); an empty one when absent or foreign."""
        try:
            data = json.loads(self.meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        ok = isinstance(data, dict) and data.get("key") == self.key and data.get("dim") == self.dim
        if not ok or not self.data_path.is_file():
            return {"key": self.key, "dim": self.dim, "done": 0, "embed_s": 0.0}
        have = self.data_path.stat().st_size // (4 * self.dim)
        data["done"] = min(int(data.get("done", 0)), have)
        return data

    @property
    def done(self) -> int:
        return int(self.meta()["done"])

    def notes_per_s(self) -> float | None:
        m = self.meta()
        return round(m["done"] / m["embed_s"], 1) if m["done"] and m["embed_s"] else None

    def build(self, embedder: Any, n: int, texts: Callable[[int], list[str]],
              log: Callable[[str], None] = print) -> dict[str, Any]:
        """Embed notes ``done..n`` of ``texts(n)``, committing the record after every chunk
        (rows past ``done`` are rewritten by the next build, so a kill loses one chunk)."""
        from brain.embedding.registry import embed_passages

        meta = self.meta()
        start = int(meta["done"])
        if start >= n:
            return meta
        self.data_path.parent.mkdir(parents=True, exist_ok=True)
        all_texts = texts(n)
        with open(self.data_path, "r+b" if self.data_path.exists() else "w+b") as fh:
            fh.truncate(max(n, start) * 4 * self.dim)
            rows = np.memmap(fh, dtype=np.float32, mode="r+", shape=(n, self.dim))
            t_log = time.perf_counter()
            for lo in range(start, n, CHUNK):
                hi = min(n, lo + CHUNK)
                t = time.perf_counter()
                rows[lo:hi] = embed_passages(embedder, all_texts[lo:hi], pool=True)
                rows.flush()
                meta.update(done=hi, embed_s=round(float(meta["embed_s"]) + time.perf_counter()
                                                   - t, 3))
                tmp = self.meta_path.with_suffix(".tmp")
                tmp.write_text(json.dumps(meta), encoding="utf-8")
                os.replace(tmp, self.meta_path)
                if time.perf_counter() - t_log > 30 or hi == n:
                    rate = hi / meta["embed_s"] if meta["embed_s"] else 0.0
                    eta = (n - hi) / rate if rate else 0.0
                    log(f"vector cache: {hi:,}/{n:,} notes, {rate:.0f} notes/s, "
                        f"{eta / 60:.0f} min left")
                    t_log = time.perf_counter()
            del rows
        return meta

    def rows(self, n: int, chunk: int = CHUNK) -> Iterator[np.ndarray]:
        """The first ``n`` vectors, ``chunk`` rows at a time (read from disk, not held)."""
        if self.done < n:
            raise ValueError(f"the vector cache holds {self.done:,} of the {n:,} vectors asked "
                             f"for: run `python -m bench.vector_cache {n}` first")
        flat = np.memmap(self.data_path, dtype=np.float32, mode="r")
        data = flat[: n * self.dim].reshape(n, self.dim)
        for lo in range(0, n, chunk):
            yield np.array(data[lo : lo + chunk])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vector_cache", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notes", type=int, help="how many synthetic notes to hold vectors for")
    parser.add_argument("--backend", default=None, help="embedding backend (default: product's)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from bench.synthetic import synthetic_notes
    from brain.embedding.registry import REGISTRY, build_embedder
    from config import EmbeddingSettings

    record = REGISTRY["sentence-transformers/all-MiniLM-L6-v2"]
    embedder = build_embedder(record, backend=args.backend or EmbeddingSettings().backend)
    cache = VectorCache.for_embedder(embedder)
    print(f"vector cache {cache.data_path}: {cache.done:,} notes held", flush=True)
    meta = cache.build(embedder, args.notes, synthetic_notes,
                       log=lambda m: print(m, flush=True))
    print(json.dumps(meta), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
