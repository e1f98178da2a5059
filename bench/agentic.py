"""add_memory latency with a slow chat model vs none: the write path must not wait on it.

``measure_add_latency()`` opens two throwaway brains (same embedder), one with no model and
one whose OpenAI-compatible model answers after ``llm_delay_s`` (the loopback fake from
``tests/fake_llm.py``, so run it from a source checkout), adds ``n`` notes to each,
alternating add by add so machine load falls on both alike, and returns both p50s. ``python -m bench.agentic`` prints them as JSON.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from brain.app import Brain
from brain.clock import ManualClock
from brain.embedder import REGISTRY, Embedder, HashEmbedder
from config import load_settings

_TEXTS = (
    "Qdrant listens on port {i} inside the docker container; publish it to reach it",
    "pytest -x stops at failure {i}; rerun with --lf to retry only the failing tests",
    "The CrossEncoder reranker adds {i} ms per query on CPU; cache the model once",
    "Decision {i}: keep the graph cache as JSON written atomically with a rename",
)


def _reply(request: dict[str, Any]) -> str:
    prompt = str(request["messages"][-1]["content"])
    if "Decide which candidate" in prompt:
        return '{"links": []}'
    return json.dumps(
        {
            "title": "A claim",
            "context": "Why it matters.",
            "keywords": ["a", "b", "c", "d", "e"],
            "tags": ["x", "y"],
        }
    )


def _open(home: Path, embedder: Embedder, base_url: str = "") -> Brain:
    settings = load_settings(home=home)
    settings.embedding.model = embedder.record.id
    settings.llm.base_url = base_url
    settings.llm.max_retries = 0
    brain = Brain(settings, embedder=embedder, clock=ManualClock()).open()
    for i in range(5):  # warm-up: first upserts, first queue insert
        brain.memory.add(f"warm up note {i}", "bench")
    return brain


def _timed_add(brain: Brain, text: str) -> float:
    started = time.perf_counter()
    brain.memory.add(text, "bench")
    return (time.perf_counter() - started) * 1000.0


def _interleaved_p50s(plain: Brain, slow: Brain, n: int) -> tuple[float, float]:
    """Alternate the two brains add by add, so machine load hits both alike."""
    a: list[float] = []
    b: list[float] = []
    for i in range(n):
        text = _TEXTS[i % len(_TEXTS)].format(i=i)
        first, second = (plain, slow) if i % 2 == 0 else (slow, plain)
        t1, t2 = _timed_add(first, text), _timed_add(second, text)
        a.append(t1 if first is plain else t2)
        b.append(t2 if first is plain else t1)
    return statistics.median(a), statistics.median(b)


def measure_add_latency(
    n: int = 60, llm_delay_s: float = 2.0, embedder: Embedder | None = None
) -> dict[str, float]:
    """p50 of ``memory.add`` in ms without a model and with a model taking ``llm_delay_s``."""
    import huggingface_hub.constants as hub

    from tests.fake_llm import FakeLLM  # a source-checkout tool, like the rest of the bench

    emb = embedder or HashEmbedder(REGISTRY["offline/hash-384"])
    offline, hub.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE, False  # the fake model is on loopback

    def slow(request: dict[str, Any]) -> str:
        time.sleep(llm_delay_s)
        return _reply(request)

    try:
        with tempfile.TemporaryDirectory() as tmp, FakeLLM(slow) as fake:
            plain = _open(Path(tmp) / "no-llm", emb)
            try:
                with_model = _open(Path(tmp) / "llm", emb, fake.base_url)
                try:
                    no_llm, with_llm = _interleaved_p50s(plain, with_model, n)
                finally:
                    with_model.close()
            finally:
                plain.close()
            calls = len(fake.requests)
    finally:
        hub.HF_HUB_OFFLINE = offline
    return {
        "n": n,
        "llm_delay_s": llm_delay_s,
        "p50_ms_no_llm": round(no_llm, 3),
        "p50_ms_llm": round(with_llm, 3),
        "ratio": round(with_llm / no_llm, 3) if no_llm else 0.0,
        "llm_calls_during_run": calls,
    }


if __name__ == "__main__":
    print(json.dumps(measure_add_latency(), indent=2))
