"""The speed bench's vector cache (bench/vector_cache.py) and the scales that use it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench import BenchContext, report, speed
from bench.__main__ import targets
from bench.speed import synthetic_notes
from bench.vector_cache import VectorCache
from brain.embedding.registry import REGISTRY, HashEmbedder, embed_passages
from tests.bench.test_bench_smoke import HASH


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder(REGISTRY["offline/hash-384"])


def _all(cache: VectorCache, n: int) -> np.ndarray:
    return np.concatenate(list(cache.rows(n, chunk=128)))


def test_a_build_resumes_where_it_stopped(tmp_path: Path, embedder: HashEmbedder) -> None:
    cache = VectorCache.for_embedder(embedder, tmp_path / "vec")
    cache.build(embedder, 300, synthetic_notes, log=lambda _m: None)
    assert cache.done == 300
    first = cache.meta()["embed_s"]
    cache.build(embedder, 700, synthetic_notes, log=lambda _m: None)
    assert cache.done == 700 and cache.meta()["embed_s"] >= first > 0
    want = embed_passages(embedder, synthetic_notes(700), pool=True)
    assert np.allclose(_all(cache, 700), want)
    assert cache.notes_per_s() is not None and cache.notes_per_s() > 0


def test_a_cache_of_another_model_or_a_short_file_is_not_trusted(
    tmp_path: Path, embedder: HashEmbedder
) -> None:
    cache = VectorCache.for_embedder(embedder, tmp_path / "vec")
    cache.build(embedder, 500, synthetic_notes, log=lambda _m: None)
    other = VectorCache(tmp_path / "vec", "some/other-model|onnx", 384)
    assert other.done == 0
    # Rows past what the file holds (a kill between the data and the record) do not count.
    with open(cache.data_path, "r+b") as fh:
        fh.truncate(200 * 4 * 384)
    assert cache.done == 200
    with pytest.raises(ValueError, match="python -m bench.vector_cache 300"):
        next(cache.rows(300))


@pytest.fixture
def ctx(tmp_path: Path, embedder: HashEmbedder, monkeypatch: pytest.MonkeyPatch) -> BenchContext:
    monkeypatch.setenv("BRAIN_BENCH_VECTORS", str(tmp_path / "cache" / "vec"))
    # The 1M point's path at a test's size: the cache is used from 100 notes on.
    monkeypatch.setattr(speed, "CACHED_FROM", 100)
    return BenchContext(embedder=embedder, data=tmp_path, quick=True, log=lambda _m: None,
                        sections=HASH, scratch=tmp_path / "scratch")


async def test_a_scale_past_the_threshold_imports_cached_vectors(ctx: BenchContext) -> None:
    with pytest.raises(SystemExit, match="python -m bench.vector_cache 300"):
        await speed.measure_scale(ctx, 300, queries=5)
    cache = VectorCache.for_embedder(ctx.embedder)
    cache.build(ctx.embedder, 300, synthetic_notes, log=lambda _m: None)
    row = await speed.measure_scale(ctx, 300, queries=5)
    assert row["vectors"]["source"] == "cache"
    assert row["vectors"]["embed_notes_per_s"] > 0
    assert row["vectors"]["cache_build_notes_per_s"] == cache.notes_per_s()
    assert row["mean_hits"] == {"all": 10, "project": 10} and row["disk_mb"] > 0
    assert "from the vector cache" in report.speed_section({"scales": [row]})


def test_the_million_note_targets() -> None:
    def p(ms: float) -> dict[str, float]:
        return {"p50": ms, "p95": ms, "p99": ms, "n": 1}

    row = {"notes": 1_000_000, "search_all_ms": p(38.0), "search_project_ms": p(30.0),
           "add_memory_ms": p(45.0), "rss_at_rest_mb": 1700.0, "disk_mb": 3000.0,
           "restarted": {"search_all_ms": p(41.0), "search_project_ms": p(24.0),
                         "deep_search_ms": p(60.0), "add_memory_ms": p(33.0),
                         "rss_at_rest_mb": 1400.0}}
    lines = targets({"speed": {"scales": [row]}})
    assert "38.0 ms across all (target <= 40 ms: met)" in lines[0]
    assert "RSS at rest 1700.0 MB (target <= 1536 MB: NOT met)" in lines[0]
    assert "41.0 ms across all (target <= 40 ms: NOT met)" in lines[1]
    assert "RSS at rest 1400.0 MB (target <= 1536 MB: met)" in lines[1]
