"""Mistake memory end to end: record_failure, record_resolution, preflight_check."""

from __future__ import annotations

import pytest
from fastmcp.exceptions import ToolError

from brain.app import Brain


async def call(client, name: str, **args):  # noqa: ANN001, ANN201
    return (await client.call_tool(name, args)).data


SIG = "pytest:ImportError:qdrant_edge"


async def test_record_failure_same_signature_counts_occurrences(brain: Brain, client) -> None:  # noqa: ANN001
    first = await call(
        client,
        "record_failure",
        project="shop",
        failure_signature=SIG,
        content="ImportError: No module named qdrant_edge when running pytest",
    )
    assert first["duplicate"] is False and first["occurrences"] == 1
    note = first["note"]
    assert note["memory_type"] == "fleeting" and note["note_kind"] == "mistake"
    brain.clock.advance(hours=2)
    again = await call(
        client,
        "record_failure",
        project="shop",
        failure_signature=SIG,
        content="same ImportError again, this time inside the CI container",
    )
    assert again["duplicate"] is True and again["occurrences"] == 2
    assert again["note"]["zk_id"] == note["zk_id"]
    payload = brain.memory.get_payload(note["zk_id"])
    assert payload["occurrences"] == 2
    assert "No module named qdrant_edge" in payload["content"]
    assert "inside the CI container" in payload["content"]
    assert payload["failure_signature"] == SIG
    mistakes = [n for n in brain.memory.notes() if n.get("note_kind") == "mistake"]
    assert len(mistakes) == 1
    # Another project or signature is another mistake.
    other = await call(
        client,
        "record_failure",
        project="api",
        failure_signature=SIG,
        content="ImportError in the api project",
    )
    assert other["note"]["zk_id"] != note["zk_id"] and other["occurrences"] == 1


async def test_record_failure_redacts_and_rejects_bad_input(brain: Brain, client) -> None:  # noqa: ANN001
    out = await call(
        client,
        "record_failure",
        project="shop",
        failure_signature="auth:401",
        content="401 from the API with token ghp_" + "b" * 36,
    )
    assert out["redacted"] == ["github_token"]
    again = await call(
        client,
        "record_failure",
        project="shop",
        failure_signature="auth:401",
        content="again with AKIAIOSFODNN7EXAMPLE",
    )
    assert again["redacted"] == ["aws_access_key"]
    content = brain.memory.get_payload(out["note"]["zk_id"])["content"]
    assert "ghp_" not in content and "AKIAIOSFODNN7EXAMPLE" not in content
    before = brain.store.count()
    with pytest.raises(ToolError, match="INVALID_ARGUMENT"):
        await client.call_tool(
            "record_failure", {"content": "x", "project": "shop", "failure_signature": "   "}
        )
    with pytest.raises(ToolError):
        await client.call_tool(
            "record_failure", {"content": "", "project": "shop", "failure_signature": "s"}
        )
    assert brain.store.count() == before


async def test_record_resolution_links_fix_and_promotes_failure(brain: Brain, client) -> None:  # noqa: ANN001
    fail = await call(
        client,
        "record_failure",
        project="shop",
        failure_signature=SIG,
        content="ImportError: No module named qdrant_edge when running pytest",
    )
    fid = fail["note"]["zk_id"]
    out = await call(
        client,
        "record_resolution",
        failure_zk_id=fid,
        project="shop",
        fix_content="Install qdrant-edge-py==0.9.0 in the venv; pin it in "
        "pyproject so CI gets the same wheel",
    )
    fix = out["fix"]
    assert fix["memory_type"] == "permanent" and fix["note_kind"] == "fix"
    assert {"zk_id": fid, "relation": "fixes"} in fix["links"]
    failure = brain.memory.get_payload(fid)
    assert failure["memory_type"] == "permanent" and failure["resolved"] is True
    assert failure["fix_ids"] == [fix["zk_id"]]
    assert (fix["zk_id"], fid, "fixes") in brain.graph.edges()
    # Recurring after the fix still counts on the same note and says so.
    again = await call(
        client,
        "record_failure",
        project="shop",
        failure_signature=SIG,
        content="ImportError qdrant_edge came back",
    )
    assert again["note"]["zk_id"] == fid and again["recurred_after_fix"] is True
    # A non-mistake note is refused, nothing written.
    plain = brain.memory.add("just a note", "shop").note["zk_id"]
    before = brain.store.count()
    with pytest.raises(ToolError, match="INVALID_ARGUMENT"):
        await client.call_tool("record_resolution", {"failure_zk_id": plain, "fix_content": "x"})
    with pytest.raises(ToolError, match="NOTE_NOT_FOUND"):
        await client.call_tool(
            "record_resolution", {"failure_zk_id": "ZK-00000000", "fix_content": "x"}
        )
    assert brain.store.count() == before


async def test_preflight_check_attaches_fixes(brain: Brain, client) -> None:  # noqa: ANN001
    fail = await call(
        client,
        "record_failure",
        project="shop",
        failure_signature="alembic:env",
        content="alembic upgrade head failed: DATABASE_URL env var missing",
    )
    fix = await call(
        client,
        "record_resolution",
        failure_zk_id=fail["note"]["zk_id"],
        fix_content="export DATABASE_URL from .env before alembic upgrade head",
    )
    open_fail = await call(
        client,
        "record_failure",
        project="shop",
        failure_signature="alembic:lock",
        content="alembic upgrade hung waiting on a database lock",
    )
    brain.memory.add(
        "Run alembic migrations in a transaction per revision", "shop", note_kind="pattern"
    )
    brain.memory.add("alembic notes from another project", "other", note_kind="mistake")
    brain.memory.add("alembic is a migration tool", "shop", note_kind="general")
    out = await call(
        client, "preflight_check", task="run alembic upgrade head database", project="shop", top_k=5
    )
    by_id = {m["zk_id"]: m for m in out["mistakes"]}
    assert set(by_id) == {fail["note"]["zk_id"], open_fail["note"]["zk_id"]}
    assert [f["zk_id"] for f in by_id[fail["note"]["zk_id"]]["fixes"]] == [fix["fix"]["zk_id"]]
    assert by_id[open_fail["note"]["zk_id"]]["fixes"] == []
    assert out["unresolved_mistakes"] == [open_fail["note"]["zk_id"]]
    assert [f["zk_id"] for f in out["fixes"]] == [fix["fix"]["zk_id"]]
    assert out["fixes"][0]["fixes_mistakes"][0]["zk_id"] == fail["note"]["zk_id"]
    assert len(out["patterns"]) == 1
    assert all(n["project"] == "shop" for n in out["mistakes"] + out["fixes"] + out["patterns"])
    with pytest.raises(ToolError):
        await client.call_tool("preflight_check", {"task": "x", "top_k": 0})


async def test_recurring_failure_stays_bounded_and_identical_repeats_only_count(
    brain: Brain, client  # noqa: ANN001
) -> None:
    """A failure that recurs keeps its first and latest occurrence (not every one), and the
    same failure again only counts: its text and vectors stand (no re-embed)."""
    args = {"project": "shop", "failure_signature": "make:build:linker"}
    await call(client, "record_failure", content="ld: undefined reference to foo_init", **args)
    await call(client, "record_failure", content="ld: undefined reference to bar_v2", **args)
    third = await call(client, "record_failure", content="ld: undefined reference to baz_x", **args)
    zk = third["note"]["zk_id"]
    before = brain.memory.get_payload(zk)
    content = before["content"]
    assert "foo_init" in content and "baz_x" in content and "bar_v2" not in content
    assert "earlier occurrences elided" in content and third["occurrences"] == 3
    brain.clock.advance(hours=1)
    for n in (4, 5, 6):  # the latest failure again, with other whitespace
        again = await call(client, "record_failure",
                           content="ld:  undefined reference to baz_x\n", **args)
        assert again["duplicate"] is True and again["occurrences"] == n
    after = brain.memory.get_payload(zk)
    assert after["content"] == content and after["updated"] == before["updated"]
    assert after["occurrences"] == 6 and after["last_seen"] != before["last_seen"]
