"""add_memory and close_session latency with a slow chat model vs none: the write path
must not wait on it (enrichment, HyPE and the handoff refinement run on the queue).

``measure_add_latency()`` opens two throwaway brains (same embedder), one with no model and
one whose OpenAI-compatible model answers after ``llm_delay_s`` (the loopback fake from
``tests/fake_llm.py``, so run it from a source checkout), adds ``n`` notes to each,
alternating add by add so machine load falls on both alike, and returns both p50s.
``measure_close_latency()`` does the same with close_session and a 6,000-character
transcript excerpt. ``python -m bench.agentic`` prints both as JSON.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brain.app import Brain
from brain.clock import ManualClock
from brain.embedding.registry import REGISTRY, Embedder, HashEmbedder
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


def _add(brain: Brain, i: int) -> None:
    brain.memory.add(_TEXTS[i % len(_TEXTS)].format(i=i), "bench")


# What the session-end hook sends: a heuristic handoff and the transcript's newest turns.
_EXCERPT = "\n".join(
    f"User: step {k}: {_TEXTS[k % 4].format(i=k)}\nAssistant: done, tests pass ({k})"
    for k in range(40)
)[-6000:]


def _close(brain: Brain, i: int) -> None:
    brain.sessions.close_session(
        "bench", f"session {i}: {_TEXTS[i % len(_TEXTS)].format(i=i)}", ["ran the tests"],
        [], ["pin the version"], ["pyproject.toml"], transcript_excerpt=_EXCERPT,
    )


def _timed(op: Callable[[Brain, int], None], brain: Brain, i: int) -> float:
    started = time.perf_counter()
    op(brain, i)
    return (time.perf_counter() - started) * 1000.0


def _interleaved_p50s(
    plain: Brain, slow: Brain, n: int, op: Callable[[Brain, int], None] = _add
) -> tuple[float, float]:
    """Alternate the two brains call by call, so machine load hits both alike."""
    a: list[float] = []
    b: list[float] = []
    for i in range(n):
        first, second = (plain, slow) if i % 2 == 0 else (slow, plain)
        t1, t2 = _timed(op, first, i), _timed(op, second, i)
        a.append(t1 if first is plain else t2)
        b.append(t2 if first is plain else t1)
    return statistics.median(a), statistics.median(b)


def measure_add_latency(
    n: int = 60, llm_delay_s: float = 2.0, embedder: Embedder | None = None
) -> dict[str, float]:
    """p50 of ``memory.add`` in ms without a model and with a model taking ``llm_delay_s``."""
    return _measure(_add, n, llm_delay_s, embedder)


def measure_close_latency(
    n: int = 30, llm_delay_s: float = 2.0, embedder: Embedder | None = None
) -> dict[str, float]:
    """p50 of ``close_session`` with a transcript excerpt, in ms, without a model and with
    a model taking ``llm_delay_s`` (which then also queues the handoff refinement)."""
    return _measure(_close, n, llm_delay_s, embedder)


def _measure(
    op: Callable[[Brain, int], None], n: int, llm_delay_s: float, embedder: Embedder | None
) -> dict[str, float]:
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
                    no_llm, with_llm = _interleaved_p50s(plain, with_model, n, op)
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
    print(json.dumps({"add_memory": measure_add_latency(),
                      "close_session": measure_close_latency()}, indent=2))
