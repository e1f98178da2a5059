"""HyPE: hypothetical questions per permanent note, written by the background queue through
a real loopback chat server (tests/fake_llm.py) into the real Edge store, and matched by
searches that return the note, never the question."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from brain.agentic.hype import parse_questions
from brain.app import Brain
from brain.clock import ManualClock
from brain.memory import RecallFilter, hype
from brain.notes import point_id
from brain.trust.identity import Identity, acting_as
from brain.vector_store import Filter, Match, scroll_all
from config import Settings
from tests.conftest import hash_embedder
from tests.fake_llm import FakeLLM, llm_settings

GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

# Note contents and the questions the stub "model" writes for each. The questions share no
# word with their note, so only the question vectors can bring the note up.
NUMPY = "The deploy script pins numpy 1.26 because wheels for 2.0 broke CI"
NUMPY_Q = ["Which zebra giraffe pelican constraint did Priya impose?",
           "Why does the walrus pipeline refuse newer flamingo builds?",
           "What keeps the otter artifact stuck on an older badger?"]
REDIS = "Redis maxmemory policy is allkeys-lru on the cache cluster"
REDIS_Q = ["Which kangaroo eviction lemur governs the platypus tier?"]
NEW_NUMPY = "The deploy script now allows numpy 2.1 since wheels were fixed"
NEW_NUMPY_Q = ["Has the mongoose restriction on quokka builds been lifted?"]
SECRET = "Rotate the token used by the release bot every quarter"
SECRET_Q = [f"Which token {GITHUB} does the heron use?"]
QUESTIONS = {NUMPY: NUMPY_Q, REDIS: REDIS_Q, NEW_NUMPY: NEW_NUMPY_Q, SECRET: SECRET_Q}


@pytest.fixture(autouse=True)
def _hub_online(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as hub  # the chat server is on loopback

    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)


def _prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


class Stub:
    """Deterministic model: valid enrichment, and the QUESTIONS of each note (``mode``
    switches the HyPE answers to garbage or an HTTP error)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.hype_calls = 0

    def __call__(self, request: dict[str, Any]) -> str:
        prompt = _prompt(request)
        if "questions that a user" in prompt:
            self.hype_calls += 1
            if self.mode == "garbage":
                return "Sure! Here are some thoughts, no JSON at all."
            if self.mode == "empty":
                return '{"questions": []}'
            content = prompt.rsplit("Note:\n", 1)[-1].strip()
            return "```json\n" + json.dumps({"questions": QUESTIONS.get(content, [])}) + "\n```"
        if "Turn this memory into a note" in prompt:
            return json.dumps({"title": "A claim", "context": "", "keywords": ["k1", "k2"],
                               "tags": ["t"]})
        if "Decide which candidate" in prompt:
            return '{"links": []}'
        return "{}"


@pytest.fixture
def stub() -> Stub:
    return Stub()


@pytest.fixture
def fake(stub: Stub) -> Iterator[FakeLLM]:
    with FakeLLM(stub) as server:
        yield server


def _settings(home: Path, base_url: str, **memory: Any) -> Settings:
    s: Settings = llm_settings(home, base_url, job_max_attempts=1)
    for key, value in memory.items():
        setattr(s.memory, key, value)
    return s


@pytest.fixture
def open_brain(home: Path, fake: FakeLLM) -> Iterator[Callable[..., Brain]]:
    opened: list[Brain] = []

    def factory(where: Path | None = None, base_url: str | None = None, **memory: Any) -> Brain:
        url = fake.base_url if base_url is None else base_url
        b = Brain(_settings(where or home, url, **memory), embedder=hash_embedder(),
                  clock=ManualClock()).open()
        opened.append(b)
        return b

    yield factory
    for b in opened:
        b.close()


def _questions(b: Brain, zk_id: str | None = None) -> list[dict[str, Any]]:
    flt = hype.of_notes([zk_id]) if zk_id else Filter(must=(Match("kind", hype.HYPE),))
    return sorted((p.payload for p in scroll_all(b.store, flt)), key=lambda p: p["index"])


def _ids(hits: list[dict[str, Any]]) -> list[str]:
    return [h["zk_id"] for h in hits]


def _strong(b: Brain, query: str, **rf: Any) -> list[str]:
    """Notes found with a dense similarity of at least 0.6 (the hash embedder gives ~0 to
    texts that share no word)."""
    f = RecallFilter(confidence_min=0.6, project="p", **rf)
    return _ids(b.memory.search(query, 5, f, stamp=False))


def _add(b: Brain, content: str, **kw: Any) -> str:
    return str(b.memory.add(content, "p", **kw).note["zk_id"])


def test_a_permanent_note_gets_its_questions_and_searches_return_the_note(
    open_brain: Callable[..., Brain],
) -> None:
    b = open_brain()
    zk = _add(b, NUMPY)
    other = _add(b, REDIS)
    assert _strong(b, NUMPY_Q[0]) == []  # before the queue ran: nothing matches
    assert b.agentic.drain(20)
    qs = _questions(b, zk)
    assert [q["question"] for q in qs] == NUMPY_Q
    assert {q["parent_id"] for q in qs} == {zk}
    assert all(q["project"] == "p" and q["user_id"] == b.memory.identity.user_id
               and q["visibility"] == "shared" for q in qs)
    assert [q["question"] for q in _questions(b, other)] == REDIS_Q
    for question in NUMPY_Q:
        hits = b.memory.search(question, 5, RecallFilter(project="p"), stamp=False)
        assert hits[0]["zk_id"] == zk
        assert hits[0]["similarity"] > 0.9  # the question's, not the note's own
        assert "question" not in hits[0] and hits[0]["content"] == NUMPY
        assert len(set(_ids(hits))) == len(hits)  # one row per note, never its questions
    assert _strong(b, REDIS_Q[0]) == [other]
    # deep_search reads the same leg.
    deep = b.agentic.deep_search(NUMPY_Q[1], RecallFilter(project="p"), hops=1, top_k=3)
    assert deep["results"][0]["zk_id"] == zk
    st = b.agentic.status()["hype"]
    assert st["questions_per_note"] == 3 and st["notes"] == 2 and st["questions"] == 4


async def test_search_tools_return_the_note_not_the_question(
    open_brain: Callable[..., Brain],
) -> None:
    from fastmcp import Client

    from mcp_server import create_server

    b = open_brain()
    zk = _add(b, NUMPY)
    _add(b, REDIS)
    assert b.agentic.drain(20)
    async with Client(create_server(profile="full", brain=b)) as c:
        out = await c.call_tool("search_memory", {"query": NUMPY_Q[2], "project": "p"})
        data = out.structured_content
        rows = data["results"]
        assert rows[0]["zk_id"] == zk
        assert NUMPY_Q[2] not in json.dumps(data)  # the question text is never returned
        deep = await c.call_tool("deep_search", {"query": NUMPY_Q[2], "project": "p",
                                                 "top_k": 2})
        assert deep.structured_content["results"][0]["zk_id"] == zk


def test_every_filter_of_the_note_applies_to_its_questions(
    open_brain: Callable[..., Brain],
) -> None:
    b = open_brain()
    zk = _add(b, NUMPY, tags=["build"])
    assert b.agentic.drain(20)
    assert _strong(b, NUMPY_Q[0]) == [zk]
    assert _strong(b, NUMPY_Q[0], tags=["other-tag"]) == []
    assert _strong(b, NUMPY_Q[0], custom=[{"key": "tags", "none_of": ["build"]}]) == []
    f = RecallFilter(confidence_min=0.6, project="elsewhere")
    assert b.memory.search(NUMPY_Q[0], 5, f, stamp=False) == []
    # Retired (archived) and forgotten notes are not found, and their questions are gone.
    b.memory.archive(zk)
    assert _strong(b, NUMPY_Q[0]) == [] and _questions(b, zk) == []


def test_another_users_questions_never_surface(open_brain: Callable[..., Brain]) -> None:
    b = open_brain()
    with acting_as(Identity("ann", "ann-laptop")):
        shared = _add(b, NUMPY)
        private = _add(b, REDIS, visibility="private")
    assert b.agentic.drain(20)
    assert {q["user_id"] for q in _questions(b)} == {"ann"}
    assert {q["visibility"] for q in _questions(b, private)} == {"private"}
    with acting_as(Identity("bob", "bob-ci")):
        for q in [*NUMPY_Q, *REDIS_Q]:
            assert b.memory.search(q, 10, RecallFilter(project="p"), stamp=False) == []
    with acting_as(Identity("ann", "ann-desktop")):  # a sibling agent of the same user
        assert _strong(b, NUMPY_Q[0]) == [shared]
        assert _strong(b, REDIS_Q[0]) == []  # the laptop agent's private note
        assert _strong(b, REDIS_Q[0], include_siblings=True) == [private]
    with acting_as(Identity("ann", "ann-laptop")):
        assert _strong(b, REDIS_Q[0]) == [private]


def test_fleeting_notes_get_none_until_distilled(open_brain: Callable[..., Brain],
                                                 stub: Stub) -> None:
    b = open_brain()
    zk = _add(b, NUMPY, memory_type="fleeting")
    assert b.agentic.drain(20)
    assert _questions(b) == [] and stub.hype_calls == 0
    b.memory.distill(zk)
    assert b.agentic.drain(20)
    assert len(_questions(b, zk)) == 3


def test_update_forget_restore_keep_the_questions_in_step(
    open_brain: Callable[..., Brain],
) -> None:
    b = open_brain()
    zk = _add(b, NUMPY)
    assert b.agentic.drain(20)
    # Update: the old questions go at once (they described the old content) ...
    b.memory.update(zk, NEW_NUMPY)
    assert _questions(b, zk) == []
    assert _strong(b, NUMPY_Q[0]) == []
    # ... and the job rewrites them for the new content, under the same ids.
    assert b.agentic.drain(20)
    qs = _questions(b, zk)
    assert [q["question"] for q in qs] == NEW_NUMPY_Q
    assert b.store.retrieve([hype.hype_point_id(zk, 0)])
    assert _strong(b, NEW_NUMPY_Q[0]) == [zk]
    # Forget drops them; restore writes them again.
    b.memory.forget(zk)
    assert _questions(b, zk) == [] and _strong(b, NEW_NUMPY_Q[0]) == []
    b.memory.restore(zk)
    assert b.agentic.drain(20)
    assert len(_questions(b, zk)) == 1
    # A re-run replaces, never duplicates.
    b.agentic.queue.enqueue(zk, "hype")  # type: ignore[union-attr]
    assert b.agentic.drain(20)
    assert len(_questions(b, zk)) == 1


def test_reclaimed_notes_lose_their_questions(open_brain: Callable[..., Brain]) -> None:
    b = open_brain()
    zk = _add(b, NUMPY)
    assert b.agentic.drain(20)
    # A question point left behind (e.g. by an older version) goes when its note is reclaimed.
    b.store.upsert(b.store.retrieve([hype.hype_point_id(zk, 0)], with_vectors=True))
    b.memory.set_state(zk, forgotten=True, forgotten_ts=1.0)
    assert b.decay.reclaim_forgotten()["retired"] == [zk]
    assert _questions(b, zk) == []


def test_no_model_configured_means_no_questions(brain: Brain) -> None:
    zk = str(brain.memory.add(NUMPY, "p").note["zk_id"])
    assert brain.agentic.queue is None
    assert _questions(brain, zk) == []
    assert brain.agentic.status()["hype"]["questions_per_note"] == 0
    assert brain.memory.search(NUMPY, 5, RecallFilter(project="p"))[0]["zk_id"] == zk


def test_hype_questions_zero_disables_it(open_brain: Callable[..., Brain], stub: Stub) -> None:
    b = open_brain(hype_questions=0)
    _add(b, NUMPY)
    assert b.agentic.drain(20)
    assert _questions(b) == [] and stub.hype_calls == 0


@pytest.mark.parametrize("mode", ["garbage", "empty"])
def test_a_useless_reply_writes_nothing_and_breaks_nothing(
    open_brain: Callable[..., Brain], stub: Stub, mode: str,
) -> None:
    stub.mode = mode
    b = open_brain()
    zk = _add(b, NUMPY)
    assert b.agentic.drain(20)
    assert _questions(b) == []
    jobs = {j["kind"]: j for j in b.agentic.queue.jobs()}  # type: ignore[union-attr]
    assert jobs["hype"]["state"] == "failed" and jobs["enrich"]["state"] == "done"
    assert b.agentic.status()["hype"]["failures"] == 1
    assert b.memory.search(NUMPY, 5, RecallFilter(project="p"))[0]["zk_id"] == zk


def test_an_unreachable_model_writes_nothing(open_brain: Callable[..., Brain]) -> None:
    b = open_brain(base_url="http://127.0.0.1:9/v1")  # nothing listens on the discard port
    zk = _add(b, NUMPY)
    assert b.agentic.drain(30)
    assert _questions(b) == []
    assert b.memory.get(zk)["content"] == NUMPY


def test_questions_are_redacted_before_they_are_stored(
    open_brain: Callable[..., Brain],
) -> None:
    b = open_brain()
    zk = _add(b, SECRET)
    assert b.agentic.drain(20)
    (q,) = _questions(b, zk)
    assert GITHUB not in q["question"] and "heron" in q["question"]


def test_export_skips_them_and_import_writes_them_again(
    open_brain: Callable[..., Brain], tmp_path: Path,
) -> None:
    b = open_brain()
    zk = _add(b, NUMPY)
    assert b.agentic.drain(20)
    out = b.maintenance.export_jsonl(tmp_path / "x.jsonl")
    assert out["notes"] == 1 and out["hype_skipped"] == 3
    lines = [json.loads(x) for x in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert all(x.get("payload", {}).get("kind") != "hype" for x in lines)
    other = open_brain(tmp_path / "other")
    res = other.maintenance.import_jsonl(tmp_path / "x.jsonl")
    assert res["imported"] == 1 and res["hype_queued"] == 1
    assert other.agentic.drain(20)
    assert [q["question"] for q in _questions(other, zk)] == NUMPY_Q
    assert _strong(other, NUMPY_Q[0]) == [zk]


def test_an_import_that_replaces_a_note_drops_its_old_questions(
    open_brain: Callable[..., Brain], tmp_path: Path,
) -> None:
    b = open_brain()
    zk = _add(b, NUMPY)
    keep = _add(b, REDIS)
    assert b.agentic.drain(20)
    kept = _questions(b, keep)
    assert _questions(b, zk) and kept
    b.maintenance.export_jsonl(tmp_path / "x.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "x.jsonl").read_text().splitlines()]
    (tmp_path / "one.jsonl").write_text("\n".join(
        json.dumps(x) for x in lines if x.get("payload", {}).get("zk_id") in (None, zk)) + "\n")
    res = b.maintenance.import_jsonl(tmp_path / "one.jsonl", on_conflict="replace")
    assert res["imported"] == 1
    assert _questions(b, zk) == []  # about the content before the import: gone
    assert _questions(b, keep) == kept  # a note the import did not touch keeps its own


def test_health_counts_them_and_gc_removes_orphans(open_brain: Callable[..., Brain]) -> None:
    b = open_brain()
    zk = _add(b, NUMPY)
    keep = _add(b, REDIS)
    assert b.agentic.drain(20)
    assert b.health.stats()["by_kind"]["hype"] == 4
    rep = b.health.scan(everyone=True)
    assert rep["findings"]["orphan_hype"]["count"] == 0
    assert rep["by_kind"]["hype"] == 4
    assert rep["findings"]["missing_dense"]["count"] == 0
    assert rep["findings"]["missing_bm25"]["count"] == 0
    assert rep["findings"]["missing_fields"]["count"] == 0
    # The note's point disappears behind the service's back: its questions are orphans.
    b.store.delete([point_id(zk)])
    rep = b.health.scan(everyone=True)
    assert rep["findings"]["orphan_hype"]["count"] == 3
    dry = b.health.gc(dry_run=True)
    assert dry["by_kind"]["orphan_hype"] == 3
    done = b.health.gc(dry_run=False, expect=dry["ids"])
    assert done["deleted"] == 3
    assert _questions(b, zk) == [] and len(_questions(b, keep)) == 1
    assert b.memory.stats()["notes"] == 1  # question points are never counted as notes


def test_files_search_never_returns_question_points(open_brain: Callable[..., Brain]) -> None:
    b = open_brain()
    _add(b, NUMPY)
    assert b.agentic.drain(20)
    assert b.files.search(NUMPY_Q[0], 10) == []


def test_parse_questions_is_defensive() -> None:
    assert parse_questions('{"questions": ["What  is\\nX?", "what is x?", 3, "ok?"]}', 3,
                           200) == ["What is X?", "ok?"]
    assert parse_questions('<think>hmm</think>["A b?", "C d?"]', 1, 200) == ["A b?"]
    assert parse_questions('```json\n{"questions": ["' + "z" * 500 + '"]}\n```', 3, 50) == [
        "z" * 50]
    assert parse_questions("no json here", 3, 200) == []
    assert parse_questions('{"questions": {"a": 1}}', 3, 200) == []
    assert parse_questions(None, 3, 200) == []
    assert parse_questions('{"question": "Only one?"}', 3, 200) == ["Only one?"]


def test_a_lingering_question_of_a_forgotten_note_never_surfaces(
    open_brain: Callable[..., Brain],
) -> None:
    b = open_brain()
    zk = _add(b, NUMPY)
    assert b.agentic.drain(20)
    kept = b.store.retrieve([hype.hype_point_id(zk, 0)], with_vectors=True)
    b.memory.forget(zk)
    b.store.upsert(kept)  # as if the drop had been lost: the search filter still holds
    assert _questions(b, zk) != []
    assert _strong(b, NUMPY_Q[0]) == []
    assert b.health.scan(everyone=True)["findings"]["orphan_hype"]["count"] == 1


def test_the_bench_report_states_what_was_not_measured() -> None:
    from bench.hype import NOTE, echo_questions
    from bench.report import hype_section

    note = '(1:56 pm on 8 May, 2023) Caroline said, "I went to a LGBTQ support group. It was great!"'
    assert echo_questions(note) == [
        "What did Caroline say about: I went to a LGBTQ support group?",
        "What did Caroline say about: It was great?"]
    row = {"recall": {"any@1": 0.1, "any@5": 0.2, "any@10": 0.3, "n": 5}, "search_ms_mean": 1.0}
    text = "\n".join(hype_section({"note": NOTE, "split": "dev", "conversations": 1, "notes": 2,
                                   "questions": 5, "per_note": 3, "rows": {"no HyPE": row}}))
    assert "No quality figure is possible" in text and "| no HyPE | 0.100 |" in text


def test_the_start_sweep_rewrites_questions_an_offline_update_dropped(
    open_brain: Callable[..., Brain], home: Path, fake: FakeLLM,
) -> None:
    b = open_brain()
    zk = _add(b, NUMPY)
    assert b.agentic.drain(20)
    b.close()
    offline = open_brain(base_url="")  # no model: the update drops, nothing rewrites
    offline.memory.update(zk, NEW_NUMPY)
    assert _questions(offline, zk) == []
    offline.close()
    again = open_brain()
    assert again.agentic.drain(20)
    assert [q["question"] for q in _questions(again, zk)] == NEW_NUMPY_Q


def test_a_model_switch_re_embeds_a_question_from_its_text() -> None:
    """The rebuild of a model switch (brain/generations) embeds a HyPE point's question again,
    not nothing: a question point without a vector would be lost to search after the swap."""
    from brain.generations.rebuild import dense_text
    from brain.memory.hype import hype_payload

    note = {"zk_id": "zk-1", "project": "p", "user_id": "u", "agent_id": "a"}
    payload = hype_payload(note, 0, "Which queue drains the payments?", "m", "llm", 0.0)
    assert dense_text(payload) == "Which queue drains the payments?"
