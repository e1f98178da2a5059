"""Forgetting: tombstone, restore within the grace period, reclamation retires the id."""

from __future__ import annotations

import time

import pytest
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.notes import point_id
from tests.timing import HANG_S


async def call(client, name: str, **args):  # noqa: ANN001, ANN201
    return (await client.call_tool(name, args)).data


async def test_forget_hides_at_once_and_restore_within_grace(brain: Brain, client) -> None:  # noqa: ANN001
    brain.workers.stop()
    a = brain.memory.add("terraform state lock stuck in dynamodb", "ops").note["zk_id"]
    b = brain.memory.add("terraform state lock dynamodb force-unlock", "ops").note["zk_id"]
    out = await call(client, "forget_memory", zk_id=a)
    assert out["forgotten"] is True
    hits = await call(
        client,
        "search_memory",
        query="terraform state lock dynamodb",
        include_fleeting=True,
        include_contextual=True,
    )
    assert a not in [h["zk_id"] for h in hits["results"]]
    related = await call(client, "get_related", zk_id=b)
    assert a not in [r["zk_id"] for r in related["related"]]
    with pytest.raises(ToolError, match="NOTE_NOT_FOUND"):
        await client.call_tool("update_memory", {"zk_id": a, "new_content": "x"})
    brain.clock.advance(days=6)
    assert brain.workers.run_now("reclamation")["count"] == 0
    back = await call(client, "restore_note", zk_id=a)
    assert back["restored_from"] == "forgotten"
    hits = await call(client, "search_memory", query="terraform state lock dynamodb", project="ops")
    assert a in [h["zk_id"] for h in hits["results"]]


async def test_reclamation_after_grace_retires_the_id(brain: Brain, client, monkeypatch) -> None:  # noqa: ANN001
    brain.workers.stop()
    a = brain.memory.add("kubectl rollout restart deployment api", "ops").note["zk_id"]
    b = brain.memory.add("kubectl rollout status deployment api", "ops").note["zk_id"]
    brain.memory.link(b, a, "extends")
    assert a in brain.memory.get_payload(b)["links"]
    await call(client, "forget_memory", zk_id=a)
    brain.clock.advance(days=7)  # exactly the grace period: still restorable
    assert brain.workers.run_now("reclamation")["count"] == 0
    brain.clock.advance(seconds=1)
    assert brain.workers.run_now("reclamation")["retired"] == [a]
    tomb = brain.store.retrieve([point_id(a)])[0].payload
    assert tomb["kind"] == "retired" and tomb["zk_id"] == a and "content" not in tomb
    other = brain.memory.get_payload(b)
    assert a not in other["links"] and a not in other["link_types"]
    assert all(a not in (s, d) for s, d, _ in brain.graph.edges())
    assert brain.stats()["forgotten_pending"] == 0
    with pytest.raises(ToolError, match="NOTE_NOT_FOUND"):
        await client.call_tool("restore_note", {"zk_id": a})
    # The retired id is never handed out again.
    ids = iter([a, "ZK-0000ABCD"])
    monkeypatch.setattr("brain.memory.write.new_zk_id", lambda: next(ids))
    assert brain.memory.add("a new note", "ops").note["zk_id"] == "ZK-0000ABCD"


def test_reclamation_worker_runs_on_the_moved_clock(brain: Brain) -> None:
    a = brain.memory.add("note to be reclaimed by the scheduler", "ops").note["zk_id"]
    brain.memory.forget(a)
    brain.clock.advance(days=8)
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        if brain.store.retrieve([point_id(a)])[0].payload.get("kind") == "retired":
            break
        time.sleep(0.05)
    assert brain.store.retrieve([point_id(a)])[0].payload["kind"] == "retired", (
        brain.workers.status()
    )
