"""Sessions: open/context/inbox/close through MCP, and close_session's crash safety."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.clock import Clock
from brain.embedding.registry import REGISTRY, HashEmbedder

ROOT = Path(__file__).resolve().parents[2]


async def call(client, name: str, **args):  # noqa: ANN001, ANN201
    return (await client.call_tool(name, args)).data


def seed(brain: Brain) -> dict[str, str]:
    m = brain.memory
    ids = {
        "context": m.add(
            "The service is a FastAPI app deployed with docker compose",
            "shop",
            note_kind="project_context",
        ).note["zk_id"],
        "decision": m.add(
            "We chose Postgres over SQLite for concurrent writers", "shop", note_kind="decision"
        ).note["zk_id"],
        "mistake": m.add(
            "alembic upgrade failed: missing env var DATABASE_URL",
            "shop",
            memory_type="fleeting",
            note_kind="mistake",
        ).note["zk_id"],
        "pinned": m.add(
            "Never run migrations against prod without a snapshot", "shop", pinned=True
        ).note["zk_id"],
        "other": m.add("Unrelated project note about rust lifetimes", "other").note["zk_id"],
    }
    brain.clock.advance(hours=1)
    ids["fleeting"] = m.add(
        "maybe cache the product list in redis", "shop", memory_type="fleeting"
    ).note["zk_id"]
    return ids


async def test_open_session_returns_context_and_inbox(brain: Brain, client) -> None:  # noqa: ANN001
    ids = seed(brain)
    out = await call(client, "open_session", project="shop")
    ctx, inbox = out["context"], out["inbox"]
    assert [n["zk_id"] for n in ctx["project_context"]] == [ids["context"]]
    assert [n["zk_id"] for n in ctx["recent_decisions"]] == [ids["decision"]]
    assert [n["zk_id"] for n in ctx["recent_mistakes"]] == [ids["mistake"]]
    assert [n["zk_id"] for n in ctx["pinned"]] == [ids["pinned"]]
    assert ctx["handoff"] is None
    assert ctx["counts"]["notes"] == 5 and ctx["counts"]["inbox"] == 2
    # Oldest first, with age; notes of another project never appear.
    assert [n["zk_id"] for n in inbox["notes"]] == [ids["mistake"], ids["fleeting"]]
    assert inbox["notes"][0]["age_days"] == pytest.approx(1 / 24, abs=1e-3)
    assert inbox["notes"][1]["age_days"] == 0
    # The one-call bootstrap returns what the two canonical calls return (compared by ids:
    # background enrichment may refine a note's text between the calls).
    ctx2 = await call(client, "get_session_context", project="shop")
    inbox2 = await call(client, "get_inbox", project="shop")
    assert ctx2.keys() == ctx.keys() and ctx2["counts"] == ctx["counts"]
    for key in ("project_context", "recent_decisions", "recent_mistakes", "pinned"):
        assert [n["zk_id"] for n in ctx2[key]] == [n["zk_id"] for n in ctx[key]]
    assert [n["zk_id"] for n in inbox2["notes"]] == [n["zk_id"] for n in inbox["notes"]]


async def test_get_inbox_all_projects_and_limit(brain: Brain, client) -> None:  # noqa: ANN001
    seed(brain)
    brain.memory.add("fleeting thought elsewhere", "other", memory_type="fleeting")
    out = await call(client, "get_inbox", limit=2)
    assert out["count"] == 3 and len(out["notes"]) == 2 and out["truncated"] is True
    with pytest.raises(ToolError):
        await client.call_tool("get_inbox", {"limit": 0})


async def test_close_session_writes_handoff_and_archives_previous(brain: Brain, client) -> None:  # noqa: ANN001
    first = await call(
        client,
        "close_session",
        project="shop",
        objective="add checkout",
        completed=["cart model"],
        blockers=[],
        next_steps=["payment form"],
        key_files=["shop/cart.py"],
    )
    assert first["archived_threads"] == []
    assert first["session_summary"]["note_kind"] == "session_summary"
    assert first["open_thread"]["note_kind"] == "open_thread"
    brain.clock.advance(minutes=5)
    second = await call(
        client,
        "close_session",
        project="shop",
        objective="payment form",
        completed=["payment form"],
        next_steps=["refunds"],
    )
    assert second["archived_threads"] == [first["open_thread"]["zk_id"]]
    old = brain.memory.get_payload(first["open_thread"]["zk_id"])
    assert old["memory_type"] == "archived" and old["thread_state"] == "superseded"
    ctx = await call(client, "get_session_context", project="shop")
    assert ctx["handoff"]["thread_zk_id"] == second["open_thread"]["zk_id"]
    assert ctx["handoff"]["next_steps"] == ["refunds"]
    assert ctx["handoff"]["summary_zk_id"] == second["session_summary"]["zk_id"]
    assert ctx["other_active_threads"] == []
    # The thread links back to the summary it was written with.
    thread = (await call(client, "get_note", zk_id=ctx["handoff"]["thread_zk_id"]))["note"]
    assert {"zk_id": second["session_summary"]["zk_id"], "relation": "extends"} in thread["links"]


async def test_close_session_redacts_every_field(brain: Brain, client) -> None:  # noqa: ANN001
    key = "AKIAIOSFODNN7EXAMPLE"
    out = await call(
        client,
        "close_session",
        project="shop",
        objective="rotate keys",
        completed=[f"rotated {key}"],
        next_steps=["check ghp_" + "a" * 36],
    )
    assert set(out["redacted"]) == {"aws_access_key", "github_token"}
    for zk in (out["session_summary"]["zk_id"], out["open_thread"]["zk_id"]):
        payload = brain.memory.get_payload(zk)
        assert key not in repr(payload) and "ghp_" not in repr(payload)


async def test_close_session_bad_input_changes_nothing(brain: Brain, client) -> None:  # noqa: ANN001
    before = brain.store.count()
    with pytest.raises(ToolError, match="INVALID_ARGUMENT"):
        await client.call_tool("close_session", {"project": "shop", "objective": "   "})
    with pytest.raises(ToolError):
        await client.call_tool(
            "close_session",
            {"project": "shop", "objective": "x", "completed": [""], "key_files": [3]},
        )
    assert brain.store.count() == before


CRASH_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from brain.app import Brain
    from brain.embedding.registry import REGISTRY, HashEmbedder
    import brain.workflow.session as session
    from config import load_settings

    step = sys.argv[2]
    def crash(name):
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)
    session.after_step = crash
    s = load_settings(home=sys.argv[1])
    s.embedding.model = "offline/hash-384"
    b = Brain(s, embedder=HashEmbedder(REGISTRY["offline/hash-384"])).open()
    b.sessions.close_session("shop", "second session", ["b"], [], ["next of second"])
    print("not killed")
""")


def _open(home: Path) -> Brain:
    from config import load_settings

    s = load_settings(home=home)
    s.embedding.model = "offline/hash-384"
    return Brain(s, embedder=HashEmbedder(REGISTRY["offline/hash-384"]), clock=Clock()).open()


@pytest.mark.parametrize("step", ["summary_written", "handoff_durable"])
def test_killed_between_writes_keeps_previous_handoff(home: Path, step: str) -> None:
    b = _open(home)
    first = b.sessions.close_session("shop", "first session", ["a"], [], ["next of first"])
    b.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(home), step],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert "not killed" not in proc.stdout
    b = _open(home)
    try:
        prev = b.memory.get_payload(first["open_thread"]["zk_id"])
        assert prev["memory_type"] == "permanent" and prev["thread_state"] == "active"
        ctx = b.sessions.get_session_context("shop")
        handoff = ctx["handoff"]
        thread = b.memory.get_payload(handoff["thread_zk_id"])
        summary = b.memory.get_payload(handoff["summary_zk_id"])
        # A consistent handoff: the thread and the summary written with it.
        assert thread["handoff_id"] == summary["handoff_id"] == handoff["handoff_id"]
        if step == "summary_written":
            assert handoff["thread_zk_id"] == first["open_thread"]["zk_id"]
            assert handoff["next_steps"] == ["next of first"]
        else:
            assert handoff["next_steps"] == ["next of second"]
            assert ctx["other_active_threads"] == [first["open_thread"]["zk_id"]]
        # The next close heals it: exactly one active thread remains.
        b.sessions.close_session("shop", "third session", ["c"], [], ["next of third"])
        assert len(b.sessions.active_threads("shop")) == 1
    finally:
        b.close()
