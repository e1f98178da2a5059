"""Background LLM refinement of session handoffs (issue 18, "refined in the background when
an LLM is configured"): close_session with a transcript excerpt, the ``handoff`` job run by
the real queue against a real loopback chat server (tests/fake_llm.py), the real Edge store.
Also the hook side: the bounded excerpt events.close sends, from the documented transcript."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from brain.agentic.handoff import MAX_ITEMS, parse_handoff
from brain.app import Brain
from brain.clock import ManualClock
from brain.errors import ContentTooLarge
from brain.hooks import client as hook_client
from brain.hooks import events, summary
from brain.notes import point_id
from brain.process.drain import drain
from brain.trust.limits import MAX_EXCERPT_CHARS
from brain.vector_store import Filter, Match
from brain.workflow import session as session_module
from brain.workflow.session import EXCERPT_KEY
from config import Settings
from tests.conftest import hash_embedder
from tests.fake_llm import FakeLLM, llm_settings

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
EXCERPT = (
    "User: Make the store tests pass on a fresh checkout\n"
    "$ python -m pytest tests/test_store.py -q\n"
    "Failed: Exit code 1 ModuleNotFoundError: No module named 'qdrant_edge'\n"
    f"$ export GITHUB_TOKEN={GITHUB}\n"
    "Assistant: Added qdrant-edge-py to pyproject.toml; the store tests pass (8 passed)."
)
REFINED = {
    "objective": "Get the store tests passing on a fresh checkout",
    "completed": ["Added qdrant-edge-py to the dependencies in pyproject.toml",
                  "Store tests pass (8 passed)"],
    "blockers": [],
    "next_steps": ["Pin the qdrant-edge-py version in the lock file"],
    "key_files": ["pyproject.toml", "src/invented_by_the_model.py"],
}


@pytest.fixture(autouse=True)
def _hub_online(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as hub  # the chat server is on loopback

    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)


class Stub:
    """The handoff answer (``mode``: ok, garbage, empty), a gate that holds handoff replies
    until opened, and plain answers to the enrichment and HyPE prompts."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.gate = threading.Event()
        self.gate.set()
        self.handoff_prompts: list[str] = []

    def __call__(self, request: dict[str, Any]) -> str:
        prompt = str(request["messages"][-1]["content"])
        if "Write the handoff of a coding session" in prompt:
            self.handoff_prompts.append(prompt)
            self.gate.wait(60)
            if self.mode == "garbage":
                return "Sure, the session went well!"
            if self.mode == "empty":
                return '{"objective": "", "completed": "nope", "next_steps": 3}'
            return "```json\n" + json.dumps(REFINED) + "\n```"
        if "questions that a user" in prompt:
            return '{"questions": ["What did the session do?"]}'
        if "Turn this memory into a note" in prompt:
            return json.dumps({"title": "A handoff", "context": "", "keywords": ["k"],
                               "tags": ["t"]})
        return '{"links": []}'


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.gate.set()  # never leave a server thread waiting


@pytest.fixture
def fake(stub: Stub) -> Iterator[FakeLLM]:
    with FakeLLM(stub) as server:
        yield server


def _settings(home: Path, base_url: str) -> Settings:
    s: Settings = llm_settings(home, base_url, job_max_attempts=1)
    return s


@pytest.fixture
def open_brain(home: Path, fake: FakeLLM) -> Iterator[Callable[..., Brain]]:
    opened: list[Brain] = []

    def factory(base_url: str | None = None) -> Brain:
        b = Brain(_settings(home, base_url or fake.base_url), embedder=hash_embedder(),
                  clock=ManualClock()).open()
        opened.append(b)
        return b

    yield factory
    for b in opened:
        b.close()


def _close(b: Brain, excerpt: str | None = EXCERPT) -> dict[str, Any]:
    return b.sessions.close_session(
        "shop", "Make the store tests pass on a fresh checkout",
        ["I'll run the store tests first.", "ran 2 shell command(s), edited 1 file(s)"],
        [], ["Next: pin the version in the lock file."], ["/w/shop/pyproject.toml"],
        transcript_excerpt=excerpt,
    )


def _jobs(b: Brain, kind: str = "handoff") -> list[dict[str, Any]]:
    assert b.agentic.queue is not None
    return [j for j in b.agentic.queue.jobs() if j["kind"] == kind]


def _summaries(b: Brain) -> list[dict[str, Any]]:
    return list(b.memory.notes(Filter(must=(Match("note_kind", "session_summary"),))))


# ------------------------------------------------------------------------------ refined
def test_a_handoff_is_refined_in_the_background(
    open_brain: Callable[..., Brain], stub: Stub
) -> None:
    b = open_brain()
    stub.gate.clear()  # the model "thinks" until the test lets it answer
    res = _close(b)
    # close_session returned while the model was still held: it never waits on it.
    assert res["refining"] is True and not stub.gate.is_set()
    zk = res["session_summary"]["zk_id"]
    stored = b.memory.get_payload(zk)
    assert stored[EXCERPT_KEY].startswith("User: Make the store tests pass")
    assert stored["session"]["refined"] is False
    heuristic = stored["content"]
    stub.gate.set()
    assert b.agentic.drain(30)

    note = b.memory.get_payload(zk)
    s = note["session"]
    assert s["refined"] is True and s["refined_by"].startswith("llm:")
    assert s["objective"] == REFINED["objective"]
    assert s["completed"] == REFINED["completed"]
    assert s["next_steps"] == REFINED["next_steps"]
    assert s["key_files"] == ["pyproject.toml"]  # a path the excerpt never named is dropped
    assert s["closed_at"] == stored["session"]["closed_at"]
    assert note[EXCERPT_KEY] == ""  # dropped once used
    assert note["content"] != heuristic
    assert note["content"].startswith(f"Session summary (shop): {REFINED['objective']}")
    assert "Pin the qdrant-edge-py version" in note["content"]
    # Re-embedded through the update path: the stored vector is the refined content's.
    [point] = b.store.retrieve([point_id(zk)], with_vectors=True)
    assert point.dense is not None
    assert point.dense == pytest.approx(b.memory.embed_notes([note])[0].tolist(), abs=1e-5)
    assert point.dense != pytest.approx(b.memory.embed_notes([stored])[0].tolist(), abs=1e-3)
    # The open thread of the same handoff says the same; the briefing shows it.
    ctx = b.sessions.get_session_context("shop")
    assert ctx["handoff"]["objective"] == REFINED["objective"]
    assert ctx["handoff"]["refined"] is True
    thread = b.memory.get_payload(ctx["handoff"]["thread_zk_id"])
    assert "Pin the qdrant-edge-py version" in thread["content"]
    assert [j["state"] for j in _jobs(b)] == ["done"]
    assert b.agentic.status()["handoffs"] == {"refined": 1, "junk": 0, "failures": 0}


def test_a_second_run_of_a_refined_handoff_does_nothing(
    open_brain: Callable[..., Brain], stub: Stub
) -> None:
    b = open_brain()
    zk = _close(b)["session_summary"]["zk_id"]
    assert b.agentic.drain(30)
    before = b.memory.get_payload(zk)
    assert b.agentic.queue_handoff(zk)
    assert b.agentic.drain(30)
    assert len(stub.handoff_prompts) == 1
    after = b.memory.get_payload(zk)
    assert (after["content"], after["session"]) == (before["content"], before["session"])
    assert [j["state"] for j in _jobs(b)] == ["done", "done"]


def test_the_excerpt_is_redacted_at_rest_and_in_what_the_model_gets(
    open_brain: Callable[..., Brain], stub: Stub, fake: FakeLLM
) -> None:
    b = open_brain()
    stub.gate.clear()
    res = _close(b)
    assert "github_token" in res["redacted"]
    stored = b.memory.get_payload(res["session_summary"]["zk_id"])
    assert GITHUB not in stored[EXCERPT_KEY]
    assert "export GITHUB_TOKEN=[REDACTED:" in stored[EXCERPT_KEY]
    stub.gate.set()
    assert b.agentic.drain(30)
    [prompt] = stub.handoff_prompts
    assert "[REDACTED:" in prompt and "No module named 'qdrant_edge'" in prompt
    assert all(GITHUB not in json.dumps(r.body) for r in fake.requests)


@pytest.mark.parametrize("mode", ["garbage", "empty"])
def test_a_junk_reply_keeps_the_heuristic_handoff(
    open_brain: Callable[..., Brain], stub: Stub, mode: str
) -> None:
    stub.mode = mode
    b = open_brain()
    zk = _close(b)["session_summary"]["zk_id"]
    heuristic = b.memory.get_payload(zk)
    assert b.agentic.drain(30)
    note = b.memory.get_payload(zk)
    assert note["session"] == heuristic["session"] and note["session"]["refined"] is False
    assert note["content"] == heuristic["content"]
    assert note[EXCERPT_KEY] == ""
    assert [j["state"] for j in _jobs(b)] == ["done"]
    assert b.agentic.status()["handoffs"]["junk"] == 1


def test_an_unreachable_model_keeps_the_heuristic_handoff(
    open_brain: Callable[..., Brain],
) -> None:
    b = open_brain(base_url="http://127.0.0.1:9/v1")  # nothing listens on the discard port
    zk = _close(b)["session_summary"]["zk_id"]
    heuristic = b.memory.get_payload(zk)
    assert b.agentic.drain(30)
    note = b.memory.get_payload(zk)
    assert note["content"] == heuristic["content"] and note["session"]["refined"] is False
    assert heuristic[EXCERPT_KEY] and not note.get(EXCERPT_KEY)  # no use left: not kept
    assert [j["state"] for j in _jobs(b)] == ["failed"]
    assert b.agentic.status()["handoffs"]["failures"] == 1


# ------------------------------------------------------------------------------ no model
def test_without_a_model_nothing_is_queued_and_the_excerpt_is_not_kept(brain: Brain) -> None:
    res = _close(brain)
    assert res["refining"] is False
    note = brain.memory.get_payload(res["session_summary"]["zk_id"])
    assert EXCERPT_KEY not in note and "refined" not in note["session"]
    assert GITHUB not in json.dumps(note)
    assert brain.agentic.queue is None


def test_without_an_excerpt_nothing_is_queued(open_brain: Callable[..., Brain]) -> None:
    b = open_brain()
    res = _close(b, excerpt="   ")
    assert res["refining"] is False
    assert EXCERPT_KEY not in b.memory.get_payload(res["session_summary"]["zk_id"])
    assert _jobs(b) == []


# ------------------------------------------------------------------------------ bounds
def test_an_excerpt_over_the_cap_is_refused_and_changes_nothing(
    open_brain: Callable[..., Brain],
) -> None:
    b = open_brain()
    with pytest.raises(ContentTooLarge) as err:
        _close(b, excerpt="x" * (MAX_EXCERPT_CHARS + 1))
    assert err.value.code == "CONTENT_TOO_LARGE" and "transcript_excerpt" in err.value.message
    assert _summaries(b) == [] and _jobs(b) == []


async def test_the_tool_refuses_an_excerpt_over_the_cap(client: Any, brain: Brain) -> None:
    res = await client.call_tool("close_session", {
        "project": "shop", "objective": "o", "transcript_excerpt": "x" * (MAX_EXCERPT_CHARS + 1),
    }, raise_on_error=False)
    assert res.is_error
    err = res.structured_content["error"]
    assert err["code"] == "CONTENT_TOO_LARGE"
    assert err["details"]["problems"][0]["field"] == "transcript_excerpt"
    assert _summaries(brain) == []
    ok = await client.call_tool("close_session", {
        "project": "shop", "objective": "o", "transcript_excerpt": EXCERPT})
    assert ok.structured_content["refining"] is False  # the offline brain: no model


def test_parse_handoff_bounds_the_reply() -> None:
    long = {"objective": "  do   it  ", "completed": [f"step {i}" for i in range(20)] + [7],
            "blockers": "one blocker", "next_steps": ["x" * 1000], "key_files": ["a.py", "b.py"]}
    out = parse_handoff(json.dumps(long), "draft a.py")
    assert out is not None
    assert out["objective"] == "do it"
    assert out["completed"] == [f"step {i}" for i in range(MAX_ITEMS)]
    assert out["blockers"] == ["one blocker"]
    assert len(out["next_steps"][0]) == 300
    assert out["key_files"] == ["a.py"]
    assert parse_handoff("no json", "") is None
    assert parse_handoff('{"objective": "", "completed": ["done"]}', "") is None
    assert parse_handoff('{"completed": ["done"]}', "") is None
    assert parse_handoff('[1, 2]', "") is None


# ------------------------------------------------------------------------------ crashes
def test_a_summary_whose_job_was_never_queued_is_swept_at_start(
    open_brain: Callable[..., Brain], home: Path, fake: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kill between the durable handoff and the queue insert: the next start queues it."""
    b = open_brain()

    def crash(step: str) -> None:
        if step == "handoff_durable":
            raise RuntimeError("killed")

    monkeypatch.setattr(session_module, "after_step", crash)
    with pytest.raises(RuntimeError):
        _close(b)
    monkeypatch.setattr(session_module, "after_step", None)
    [summ] = _summaries(b)
    assert summ[EXCERPT_KEY] and _jobs(b) == []
    b.close()
    b2 = open_brain()
    assert b2.agentic.drain(30)
    assert b2.memory.get_payload(summ["zk_id"])["session"]["refined"] is True


CHILD = textwrap.dedent(
    """
    import sys, time
    from brain.app import Brain
    from brain.clock import ManualClock
    from brain.embedding.registry import REGISTRY, HashEmbedder
    from config import load_settings

    home, base_url, excerpt = sys.argv[1], sys.argv[2], sys.argv[3]
    s = load_settings(home=home)
    s.embedding.model = "offline/hash-384"
    s.llm.base_url = base_url
    s.llm.max_retries = 0
    s.memory.hype_questions = 0
    b = Brain(s, embedder=HashEmbedder(REGISTRY["offline/hash-384"]), clock=ManualClock()).open()
    res = b.sessions.close_session("shop", "fix the store tests", ["ran tests"],
                                   transcript_excerpt=excerpt)
    print(res["session_summary"]["zk_id"], flush=True)
    time.sleep(600)
    """
)


def _states(db: Path) -> dict[str, str]:
    con = sqlite3.connect(str(db), timeout=5)
    try:
        return dict(con.execute("SELECT kind, state FROM jobs WHERE kind='handoff'"))
    except sqlite3.OperationalError:
        return {}
    finally:
        con.close()


def test_a_kill_9_mid_job_refines_at_the_next_start(
    home: Path, tmp_path: Path, stub: Stub, fake: FakeLLM
) -> None:
    stub.gate.clear()  # the killed process's model call never returns
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "0"}
    child = subprocess.Popen([sys.executable, str(script), str(home), fake.base_url, EXCERPT],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                             cwd=ROOT, text=True)
    try:
        assert child.stdout is not None
        zk = child.stdout.readline().strip()
        db = home / "agentic" / "jobs.sqlite3"
        deadline = time.monotonic() + 60
        while _states(db).get("handoff") != "running" or not stub.handoff_prompts:
            assert time.monotonic() < deadline, _states(db)
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert _states(db) == {"handoff": "running"}
    stub.gate.set()
    b = Brain(_settings(home, fake.base_url), embedder=hash_embedder(),
              clock=ManualClock()).open()
    try:
        assert b.agentic.drain(60)
        note = b.memory.get_payload(zk)
        [job] = _jobs(b)
    finally:
        b.close()
    assert note["session"]["refined"] is True and note[EXCERPT_KEY] == ""
    assert job["state"] == "done" and job["attempts"] == 2 and job["completions"] == 1


# ------------------------------------------------------------------------------ the hook
def _records(tmp_path: Path) -> list[dict[str, Any]]:
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text((FIXTURES / "transcript.jsonl").read_text().replace("@CWD@", "/w"))
    return summary.load_transcript({"transcript_path": str(transcript)})


def test_the_excerpt_of_the_documented_transcript(tmp_path: Path) -> None:
    records = _records(tmp_path)
    pending = [{"command": "make lint", "error": "ExitCode"}]
    text = summary.excerpt(records, pending)
    assert text.splitlines() == [
        "User: Make the store tests pass on a fresh checkout",
        "Assistant: I'll run the store tests first.",
        "$ python -m pytest tests/test_store.py -q",
        "Failed: Exit code 1 ModuleNotFoundError: No module named 'qdrant_edge'",
        "$ python -m pytest tests/test_store.py tests/test_edge.py -q",
        "Assistant: Added qdrant-edge-py to the project dependencies; the store tests pass "
        "(8 passed). Next: pin the version in the lock file.",
        "Still failing: `make lint` (ExitCode)",
    ]
    short = summary.excerpt(records, pending, cap=150)
    assert len(short) <= 150 and short.endswith("Still failing: `make lint` (ExitCode)")
    assert "User:" not in short  # the newest lines are kept


def test_a_long_session_sends_at_most_the_cap(tmp_path: Path) -> None:
    records = [{"role": r, "text": f"turn {i} " + "word " * 400}
               for i in range(100) for r in ("user", "assistant")]
    text = summary.excerpt(records, [])
    assert 0 < len(text) <= summary.EXCERPT_CHARS <= MAX_EXCERPT_CHARS
    assert "turn 99" in text and "turn 0 " not in text
    assert all(len(line) <= 1500 + len("Assistant: ") for line in text.splitlines())


def test_a_spooled_handoff_is_refined_once_a_server_with_a_model_drains_it(
    tmp_path: Path, home: Path, open_brain: Callable[..., Brain]
) -> None:
    ctx = events.Context(home, _Owner(absent=True), SimpleNamespace(project="shop"))  # type: ignore[arg-type]
    events.close("session-end", _payload(tmp_path), "shop", ctx)
    b = open_brain()
    assert drain(b) == 1
    assert b.agentic.drain(30)
    [summ] = _summaries(b)
    assert summ["session"]["refined"] is True and summ[EXCERPT_KEY] == ""
    assert summ["session"]["objective"] == REFINED["objective"]


class _Owner:
    caller = {"user_id": "default", "agent_id": "default"}

    def __init__(self, absent: bool = False) -> None:
        self.absent = absent
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if self.absent:
            raise hook_client.NoOwner("no server")
        self.calls.append((name, args))
        return {}


def _payload(tmp_path: Path) -> dict[str, Any]:
    transcript = tmp_path / "transcript.jsonl"
    text = (FIXTURES / "transcript.jsonl").read_text().replace("@CWD@", "/w")
    transcript.write_text(text.replace("the store tests pass (8 passed)",
                                       f"the store tests pass; token {GITHUB}"))
    return {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(tmp_path)}


def test_the_close_hook_sends_the_excerpt_and_spools_it_redacted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    owner = _Owner()
    ctx = events.Context(home, owner, SimpleNamespace(project="shop"))  # type: ignore[arg-type]
    events.close("session-end", _payload(tmp_path), "shop", ctx)
    [(name, args)] = owner.calls
    assert name == "close_session"
    assert args["transcript_excerpt"].startswith("User: Make the store tests pass")
    assert len(args["transcript_excerpt"]) <= summary.EXCERPT_CHARS

    spooled = tmp_path / "spooled"
    spooled.mkdir()
    absent = events.Context(spooled, _Owner(absent=True), SimpleNamespace(project="shop"))  # type: ignore[arg-type]
    events.close("session-end", _payload(tmp_path), "shop", absent)
    raw = (spooled / hook_client.SPOOL_FILE).read_text()
    entry = json.loads(raw)
    assert "transcript_excerpt" in entry["args"] and GITHUB not in raw
