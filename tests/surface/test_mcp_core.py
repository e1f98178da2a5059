"""The core memory tools end to end through an in-process MCP client."""

from __future__ import annotations

import pytest
from fastmcp.exceptions import ToolError

CORE_TOOLS = {"add_memory", "update_memory", "search_memory", "get_related",
              "distill_to_permanent", "restore_note", "brain_stats", "forget_memory"}


async def _add(client, content: str, **kw) -> dict:  # noqa: ANN001
    res = await client.call_tool("add_memory", {"content": content, **kw})
    return res.structured_content["note"]


async def test_lists_core_tools_with_schemas(client) -> None:  # noqa: ANN001
    tools = {t.name: t for t in await client.list_tools()}
    assert tools.keys() >= CORE_TOOLS
    props = tools["add_memory"].inputSchema["properties"]
    assert set(props["memory_type"]["enum"]) == {"fleeting", "permanent"}
    assert "session_summary" in props["note_kind"]["enum"]


async def test_add_search_related_update_stats(client) -> None:  # noqa: ANN001
    a = await _add(client, "uvicorn workers share nothing: use redis for the rate limiter",
                   project="api", note_kind="decision")
    b = await _add(client, "rate limiter counters must live in redis, not per uvicorn worker",
                   project="api")
    res = await client.call_tool("search_memory", {"query": "rate limiter redis", "project": "api"})
    hits = res.structured_content["results"]
    assert {h["zk_id"] for h in hits} == {a["zk_id"], b["zk_id"]}
    for key in ("zk_id", "title", "snippet", "score", "project", "note_kind", "created",
                "tags", "links"):
        assert key in hits[0]
    assert "content" not in hits[0] and isinstance(hits[0]["links"], int)
    full = (await client.call_tool("search_memory", {"query": "rate limiter redis",
                                                     "project": "api", "detail": "full"}))
    whole = {h["zk_id"]: h for h in full.structured_content["results"]}
    assert whole[a["zk_id"]]["content"].startswith("uvicorn workers share nothing")
    assert [h["zk_id"] for h in full.structured_content["results"]] == [h["zk_id"] for h in hits]
    note = (await client.call_tool("get_note", {"zk_id": a["zk_id"]})).structured_content["note"]
    assert note["content"] == whole[a["zk_id"]]["content"]
    assert note["links"] == whole[a["zk_id"]]["links"]
    rel = (await client.call_tool("get_related", {"zk_id": a["zk_id"]})).structured_content
    assert [r["zk_id"] for r in rel["related"]] == [b["zk_id"]]
    upd = await client.call_tool("update_memory", {"zk_id": a["zk_id"],
                                                   "new_content": "use redis for rate limits"})
    assert upd.structured_content["note"]["content"] == "use redis for rate limits"
    stats = (await client.call_tool("brain_stats", {})).structured_content
    assert stats["by_memory_type"]["permanent"] == 2
    assert stats["graph"]["edges"] == 2


async def test_fleeting_distill_forget_restore(client) -> None:  # noqa: ANN001
    f = await _add(client, "pytest-xdist breaks the sqlite fixture", memory_type="fleeting")
    res = await client.call_tool("search_memory", {"query": "xdist sqlite fixture"})
    assert res.structured_content["count"] == 0
    d = await client.call_tool("distill_to_permanent", {"zk_id": f["zk_id"]})
    assert d.structured_content["note"]["memory_type"] == "permanent"
    await client.call_tool("forget_memory", {"zk_id": f["zk_id"]})
    res = await client.call_tool("search_memory", {"query": "xdist sqlite fixture"})
    assert res.structured_content["count"] == 0
    r = await client.call_tool("restore_note", {"zk_id": f["zk_id"]})
    assert r.structured_content["restored_from"] == "forgotten"
    res = await client.call_tool("search_memory", {"query": "xdist sqlite fixture"})
    assert res.structured_content["count"] == 1


@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("add_memory", {"content": ""}, "INVALID_ARGUMENT"),
        ("add_memory", {"content": "x" * 60_000}, "CONTENT_TOO_LARGE"),
        ("get_related", {"zk_id": "ZK-00000000"}, "NOTE_NOT_FOUND"),
        ("distill_to_permanent", {"zk_id": "bogus"}, "INVALID_ARGUMENT"),
    ],
)
async def test_errors_carry_stable_codes(client, tool: str, args: dict, code: str) -> None:  # noqa: ANN001
    with pytest.raises(ToolError) as err:
        await client.call_tool(tool, args)
    assert f"[{code}]" in str(err.value)
    stats = (await client.call_tool("brain_stats", {})).structured_content
    assert stats["notes"] == 0


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("add_memory", {"content": "ok", "memory_type": "archived"}),
        ("add_memory", {"content": "ok", "note_kind": "nonsense"}),
        ("search_memory", {"query": "x", "top_k": 0}),
        ("search_memory", {"query": "x", "top_k": 1000}),
    ],
)
async def test_schema_rejects_invalid_enums_and_ranges(client, tool: str, args: dict) -> None:  # noqa: ANN001
    with pytest.raises(ToolError):
        await client.call_tool(tool, args)
    stats = (await client.call_tool("brain_stats", {})).structured_content
    assert stats["notes"] == 0


@pytest.mark.model
async def test_paraphrase_with_no_shared_keyword_is_top1(real_client) -> None:  # noqa: ANN001
    notes = [
        "The staging database password rotates every ninety days via Vault.",
        "Our CI pipeline caches node_modules between runs to save time.",
        "Kubernetes pods are restarted when the liveness probe fails three times.",
        "The mobile app crashes on Android 12 when the camera permission is denied.",
        "We picked PostgreSQL over MongoDB because we need transactions.",
    ]
    ids = [(await _add(real_client, n, project="para"))["zk_id"] for n in notes]
    query = "why did we choose a relational engine instead of a document store"
    res = await real_client.call_tool("search_memory", {"query": query, "project": "para",
                                                        "top_k": 1})
    top = res.structured_content["results"][0]
    assert top["zk_id"] == ids[4]
    shared = set(query.lower().split()) & set(notes[4].lower().replace(".", "").split())
    assert shared <= {"we", "a", "the"}  # nothing meaningful in common: meaning alone found it


async def test_search_stays_in_one_project_unless_asked(client) -> None:  # noqa: ANN001
    await _add(client, "blue-green deploys need sticky sessions off", project="alpha")
    await _add(client, "blue-green deploys switch the load balancer", project="general")
    res = await client.call_tool("search_memory", {"query": "blue-green deploys"})
    assert {h["project"] for h in res.structured_content["results"]} == {"general"}
    res = await client.call_tool("search_memory", {"query": "blue-green deploys",
                                                   "all_projects": True})
    assert {h["project"] for h in res.structured_content["results"]} == {"alpha", "general"}


async def test_search_memory_can_include_uploaded_files(client, tmp_path) -> None:  # noqa: ANN001
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nRotate the TLS certificates on the ingress every sixty days.\n")
    rec = (await client.call_tool("ingest_file", {"path": str(doc)})).structured_content
    file_id = rec.get("id") or rec.get("file", {}).get("id")
    for _ in range(100):
        got = (await client.call_tool("get_file", {"file_id": file_id})).structured_content
        if got.get("status", got.get("file", {}).get("status")) == "ready":
            break
        import asyncio

        await asyncio.sleep(0.1)
    res = await client.call_tool("search_memory", {"query": "rotate tls certificates ingress",
                                                   "include_files": True,
                                                   "files_threshold": 0.0})
    files = res.structured_content["files"]
    assert files and files[0]["file"] == "runbook.md"
