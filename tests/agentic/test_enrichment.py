"""Background LLM enrichment against a real loopback chat server (tests/fake_llm.py)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from brain.app import Brain
from brain.clock import ManualClock
from brain.notes import point_id
from config import Settings
from tests.conftest import hash_embedder
from tests.fake_llm import FakeLLM, llm_settings
from tests.timing import HANG_S

ZK = re.compile(r"\[(ZK-[0-9A-F]{8})\]")


@pytest.fixture(autouse=True)
def _hub_online(monkeypatch: pytest.MonkeyPatch) -> None:
    # conftest sets HF_HUB_OFFLINE=1 for the embedders; huggingface_hub then refuses every
    # HTTP call, loopback included. The chat server here is local, so allow it.
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)


def prompt_of(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


def step_of(request: dict[str, Any]) -> str:
    prompt = prompt_of(request)
    if "Turn this memory into a note" in prompt:
        return "construct"
    if "Decide which candidate notes" in prompt:
        return "links"
    if "Rewrite the OLD note's context" in prompt:
        return "evolve"
    if "Merge them into one note" in prompt:
        return "merge"
    return "other"


class Responder:
    """Answers each kind of enrichment prompt; ``relation`` types every proposed link."""

    def __init__(self, relation: str = "supports", delay_s: float = 0.0) -> None:
        self.relation = relation
        self.delay_s = delay_s
        self.calls: dict[str, int] = {}

    def __call__(self, request: dict[str, Any]) -> str:
        if self.delay_s:
            time.sleep(self.delay_s)
        step = step_of(request)
        self.calls[step] = self.calls.get(step, 0) + 1
        ids = ZK.findall(prompt_of(request))
        if step == "construct":
            return (
                "```json\n"
                + json.dumps(
                    {
                        "title": "LLM claim about the memory",
                        "context": "Matters when wiring vector databases in containers.",
                        "keywords": [
                            "llmkw-one",
                            "llmkw-two",
                            "llmkw-three",
                            "llmkw-four",
                            "llmkw-five",
                        ],
                        "tags": ["llm-tag", "containers"],
                    }
                )
                + "\n```"
            )
        if step == "links":
            return json.dumps({"links": [{"id": z, "relation": self.relation} for z in ids[1:]]})
        if step == "evolve":
            return json.dumps(
                {
                    "context": "Evolved: a newer note refines this one.",
                    "keywords": ["evolved-kw", "refined"],
                    "tags": None,
                }
            )
        return "{}"


def make_llm_brain(
    home: Path, base_url: str, clock: ManualClock | None = None, hype_questions: int = 0,
    **llm: Any,
) -> Brain:
    """A brain on the loopback model. HyPE is off unless asked: these tests count the
    enrichment calls (HyPE has its own, tests/agentic/test_hype.py)."""
    settings: Settings = llm_settings(home, base_url, job_backoff_s=0.05,
                                      **{"evolve_threshold": 0.0, **llm})
    settings.memory.hype_questions = hype_questions
    return Brain(settings, embedder=hash_embedder(), clock=clock or ManualClock()).open()


@pytest.fixture
def responder() -> Responder:
    return Responder()


@pytest.fixture
def fake(responder: Responder) -> Iterator[FakeLLM]:
    with FakeLLM(responder) as server:
        yield server


@pytest.fixture
def llm_brain_factory(home: Path, fake: FakeLLM) -> Iterator[Callable[..., Brain]]:
    opened: list[Brain] = []

    def factory(**llm: Any) -> Brain:
        b = make_llm_brain(home, fake.base_url, ManualClock(), **llm)
        opened.append(b)
        return b

    yield factory
    for b in opened:
        b.close()


@pytest.fixture
def llm_brain(llm_brain_factory: Callable[..., Brain]) -> Brain:
    return llm_brain_factory()


def vector_of(brain: Brain, zk_id: str) -> list[float]:
    pts = brain.store.retrieve([point_id(zk_id)], with_vectors=True)
    assert pts[0].dense is not None
    return list(pts[0].dense)


QDRANT = "Qdrant listens on port 6333 inside the docker container"
QDRANT_2 = "Publish port 6333 of the Qdrant docker container to reach it from the host"


# -- construction ---------------------------------------------------------------------------


def test_notes_get_llm_title_keywords_tags(llm_brain: Brain) -> None:
    res = llm_brain.memory.add(QDRANT, "infra", tags=["mine"])
    assert res.note["enriched_by"] == "heuristic"  # the write path did not wait
    before = vector_of(llm_brain, res.note["zk_id"])
    assert llm_brain.agentic.drain(20)
    p = llm_brain.memory.get_payload(res.note["zk_id"])
    assert p["title"] == "LLM claim about the memory"
    assert p["keywords"][:2] == ["llmkw-one", "llmkw-two"]
    assert p["tags"][:3] == ["mine", "llm-tag", "containers"]  # the caller's tag is kept
    assert p["context"].startswith("Matters when")
    assert p["enriched_by"] == "llm:Qwen/Qwen3-4B-Instruct-2507"
    assert vector_of(llm_brain, p["zk_id"]) != before  # re-embedded with the new context
    status = llm_brain.agentic.status()
    assert status["enrichment_mode"] == "llm"
    assert status["queue"]["done"] == 1 and status["queue"]["pending"] == 0
    assert status["llm"]["tokens_today"] > 0


def test_fleeting_notes_are_constructed_only(llm_brain: Brain, responder: Responder) -> None:
    llm_brain.memory.add(QDRANT, "infra")
    llm_brain.clock.advance(minutes=1)  # type: ignore[attr-defined]
    res = llm_brain.memory.add(QDRANT_2, "infra", memory_type="fleeting")
    assert llm_brain.agentic.drain(20)
    p = llm_brain.memory.get_payload(res.note["zk_id"])
    assert p["enriched_by"].startswith("llm:")
    assert responder.calls == {"construct": 2}  # no link decision, no evolution
    assert p["links"] == []


def test_no_model_configured_stays_heuristic(brain: Brain) -> None:
    res = brain.memory.add(QDRANT, "infra")
    assert brain.agentic.drain(1)
    status = brain.agentic.status()
    assert status["enrichment_mode"] == "heuristic"
    assert status["llm"]["mode"] == "offline"
    assert status["queue"] == {
        "pending": 0,
        "running": 0,
        "done": 0,
        "failed": 0,
        "paused": False,
        "paused_reason": "",
    }
    assert not (brain.home / "agentic").exists()  # nothing queued, no queue file
    assert brain.memory.get_payload(res.note["zk_id"])["enriched_by"] == "heuristic"


# -- links and evolution --------------------------------------------------------------------


def test_links_get_the_llm_relation_types(
    llm_brain_factory: Callable[..., Brain], responder: Responder
) -> None:
    responder.relation = "contradicts"
    b = llm_brain_factory()
    a = b.memory.add(QDRANT, "infra").note["zk_id"]
    assert b.agentic.drain(20)
    b.clock.advance(minutes=1)  # type: ignore[attr-defined]
    new = b.memory.add("Qdrant in docker does not listen on 6333 by default", "infra").note
    assert b.agentic.drain(20)
    p = b.memory.get_payload(new["zk_id"])
    assert p["link_types"][a] == "contradicts"
    assert p["links"].count(a) == 1
    assert (new["zk_id"], a, "contradicts") in b.graph.edges()
    assert a in b.memory.get_payload(a)["links"] or new["zk_id"] in b.memory.get_payload(a)["links"]


def test_evolution_rewrites_older_context_and_vector(llm_brain: Brain) -> None:
    old = llm_brain.memory.add(QDRANT, "infra").note["zk_id"]
    assert llm_brain.agentic.drain(20)
    before = vector_of(llm_brain, old)
    llm_brain.clock.advance(minutes=1)  # type: ignore[attr-defined]
    new = llm_brain.memory.add(QDRANT_2, "infra").note["zk_id"]
    assert llm_brain.agentic.drain(20)
    p = llm_brain.memory.get_payload(old)
    assert p["context"] == "Evolved: a newer note refines this one."
    assert p["keywords"] == ["evolved-kw", "refined"]
    assert p["evolved_by"] == [new]
    assert vector_of(llm_brain, old) != before
    # The newer note is never evolved by the older one.
    assert "evolved_by" not in llm_brain.memory.get_payload(new)
    assert llm_brain.agentic.status()["enrichment"]["evolved"] == 1


def test_distilling_re_enriches_with_the_permanent_pipeline(
    llm_brain: Brain, responder: Responder
) -> None:
    llm_brain.memory.add(QDRANT, "infra")
    llm_brain.clock.advance(minutes=1)  # type: ignore[attr-defined]
    zk = llm_brain.memory.add(QDRANT_2, "infra", memory_type="fleeting").note["zk_id"]
    assert llm_brain.agentic.drain(20)
    assert responder.calls == {"construct": 2}  # the fleeting note was not linked
    out = llm_brain.memory.distill(zk)
    assert out.note["enriched_by"] == "heuristic"
    assert llm_brain.agentic.drain(20)
    p = llm_brain.memory.get_payload(zk)
    assert p["memory_type"] == "permanent" and p["enriched_by"].startswith("llm:")
    assert responder.calls == {"construct": 3, "links": 1, "evolve": 1}
    assert set(p["link_types"].values()) == {"supports"}


# -- failures -------------------------------------------------------------------------------


def test_junk_500_and_timeout_keep_heuristic_then_retry(home: Path) -> None:
    good = Responder()
    with FakeLLM(good) as server:
        server.script("no json here at all", ("status", 500), ("sleep", 2.0, "{}"))
        b = make_llm_brain(home, server.base_url, timeout_s=0.5, job_max_attempts=5)
        try:
            zk = b.memory.add(QDRANT, "infra").note["zk_id"]
            time.sleep(0.3)
            assert b.memory.get_payload(zk)["enriched_by"] == "heuristic"
            assert b.agentic.drain(30)
            p = b.memory.get_payload(zk)
            assert p["enriched_by"].startswith("llm:")
            status = b.agentic.status()
            assert status["fallbacks"] == 3
            assert status["jobs"]["retried"] == 3
            assert status["llm"]["failures"] >= 2  # HTTP 500 and the timeout
            job = b.agentic.queue.jobs()[0]
            assert job["state"] == "done" and job["attempts"] == 4 and job["completions"] == 1
        finally:
            b.close()


def test_persistent_junk_fails_the_job_and_keeps_heuristic(home: Path) -> None:
    with FakeLLM(lambda _r: "sorry, I cannot do JSON") as server:
        b = make_llm_brain(home, server.base_url, job_max_attempts=2)
        try:
            res = b.memory.add(QDRANT, "infra")
            assert b.agentic.drain(20)
            p = b.memory.get_payload(res.note["zk_id"])
            assert p["enriched_by"] == "heuristic" and p["title"] == res.note["title"]
            status = b.agentic.status()
            assert status["queue"]["failed"] == 1 and status["fallbacks"] == 2
        finally:
            b.close()


def test_token_cap_pauses_the_queue_visibly(llm_brain_factory: Callable[..., Brain]) -> None:
    b = llm_brain_factory(daily_token_cap=50)
    b.memory.add(QDRANT, "infra")
    assert b.agentic.drain(20)  # the first job spends past the cap and finishes
    b.memory.add(QDRANT_2, "infra")
    assert not b.agentic.drain(1.0)
    status = b.agentic.status()
    assert status["queue"]["paused"] is True
    assert status["queue"]["paused_reason"] == "daily token cap reached"
    assert status["queue"]["pending"] == 1
    assert status["llm"]["paused_by_cap"] is True


class HeldResponder(Responder):
    """Holds every answer until ``release`` is set (or a hang's worth of time passed)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def __call__(self, request: dict[str, Any]) -> str:
        self.release.wait(2 * HANG_S)
        return super().__call__(request)


def test_write_path_does_not_wait_for_a_slow_model(home: Path) -> None:
    """The model answers nothing until the five adds are back. A write path that waited for
    it would sit out the held answer (the client's timeout is as long), so the adds would
    take a minute and find the model had answered; on time, they took no answer at all."""
    model = HeldResponder()
    with FakeLLM(model) as server:
        b = make_llm_brain(home, server.base_url, timeout_s=2 * HANG_S)
        try:
            started = time.monotonic()
            for i in range(5):
                b.memory.add(f"{QDRANT} variant {i}", "infra")
            assert time.monotonic() - started < HANG_S
            assert model.calls == {}  # every add came back before the model answered once
        finally:
            model.release.set()
            b.close()


def test_update_while_queued_enriches_the_latest_content(llm_brain: Brain, fake: FakeLLM) -> None:
    zk = llm_brain.memory.add(QDRANT, "infra").note["zk_id"]
    llm_brain.memory.update(zk, QDRANT_2)
    assert llm_brain.agentic.drain(20)
    p = llm_brain.memory.get_payload(zk)
    assert p["content"] == QDRANT_2 and p["enriched_by"].startswith("llm:")
    constructs = [r for r in fake.requests if step_of(r.body) == "construct"]
    assert QDRANT_2 in prompt_of(constructs[-1].body)


def test_backfill_enriches_notes_written_without_a_model(home: Path, settings: Settings) -> None:
    settings.embedding.model = "offline/hash-384"
    with Brain(settings, embedder=hash_embedder(), clock=ManualClock()) as plain:
        zk = plain.memory.add(QDRANT, "infra").note["zk_id"]
    with FakeLLM(Responder()) as server:
        b = make_llm_brain(home, server.base_url)
        try:
            assert b.agentic.drain(20)
            assert b.memory.get_payload(zk)["enriched_by"].startswith("llm:")
        finally:
            b.close()


async def test_brain_capabilities_tool(client: Any) -> None:
    out = await client.call_tool("brain_capabilities", {})
    data = out.structured_content
    assert data["enrichment_mode"] == "heuristic"
    assert data["llm"]["mode"] == "offline"
    assert data["obsidian"]["mode"] == "off"


def test_status_never_shows_the_key(home: Path) -> None:
    with FakeLLM(Responder()) as server:
        b = make_llm_brain(home, server.base_url, api_key="sk-SECRET-abcdef")
        try:
            assert "sk-SECRET" not in json.dumps(b.agentic.status())
        finally:
            b.close()


def test_measure_add_latency_reports_both_p50s() -> None:
    from bench.agentic import measure_add_latency

    out = measure_add_latency(n=6, llm_delay_s=1.0)
    # Figures are the bench's business; test_write_path_does_not_wait_for_a_slow_model
    # holds the claim they show (an add never waits for the model).
    assert out["p50_ms_no_llm"] > 0 and out["p50_ms_llm"] > 0
    assert out["llm_calls_during_run"] >= 1  # the model was really being called
