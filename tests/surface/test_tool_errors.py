"""Tool errors reach the client twice: as ``[CODE] message`` text and as structured content.

Through a real fastmcp Client on the in-memory transport, over a real brain (issue 19: errors
no longer lose their details at the edge). Each failure kind has its own path to the wire: a
service's BrainError (the gate in mcp_server.py), a schema violation (TypedArgumentErrors) and
a lone surrogate (ValidText, before any tool runs). Last, the same through a second server
process that forwards its calls to the owner of the data dir (real stdio processes).
"""

from __future__ import annotations

import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError

ROOT = Path(__file__).resolve().parents[2]


async def _error(client: Any, tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    res = await client.call_tool(tool, args, raise_on_error=False)
    assert res.is_error
    assert len(res.content) == 1 and res.content[0].type == "text"
    assert res.structured_content is not None
    return res.content[0].text, res.structured_content["error"]


async def test_a_service_error_arrives_with_its_code_and_details(client) -> None:  # noqa: ANN001
    text, err = await _error(client, "search_memory", {
        "query": "anything", "custom_filters": [{"key": "user_id", "value": "mallory"}],
    })
    assert err["code"] == "INVALID_ARGUMENT"
    assert err["details"] == {"field": "custom"}
    assert "cannot override 'user_id'" in err["message"]
    assert text == f"[INVALID_ARGUMENT] {err['message']}"


async def test_a_missing_note_names_its_code(client) -> None:  # noqa: ANN001
    text, err = await _error(client, "get_related", {"zk_id": "ZK-00000000"})
    assert err["code"] == "NOTE_NOT_FOUND"
    assert isinstance(err["details"], dict)
    assert text.startswith("[NOTE_NOT_FOUND] ")
    # The default client raises the text form, as before.
    with pytest.raises(ToolError, match=r"^\[NOTE_NOT_FOUND\] "):
        await client.call_tool("get_related", {"zk_id": "ZK-00000000"})


async def test_a_schema_violation_lists_the_fields_without_their_values(client) -> None:  # noqa: ANN001
    text, err = await _error(client, "get_related", {"zk_id": "ZK-1", "depth": 9})
    assert err["code"] == "INVALID_ARGUMENT"
    assert err["details"]["count"] == 1
    [problem] = err["details"]["problems"]
    assert problem["field"] == "depth"
    assert "3" in problem["problem"]  # the bound to respect, not the value sent
    assert "9" not in str(err["details"])
    assert text == f"[INVALID_ARGUMENT] {err['message']}"

    text, err = await _error(client, "add_memory", {"content": "x" * 2_000_000})
    assert err["code"] == "CONTENT_TOO_LARGE"
    assert err["details"]["problems"][0]["field"] == "content"
    assert text.startswith("[CONTENT_TOO_LARGE] ")


async def test_a_lone_surrogate_is_refused_in_structure_too(client) -> None:  # noqa: ANN001
    text, err = await _error(client, "add_memory", {"content": "ok", "tags": ["fine", "\ud800"]})
    assert err["code"] == "INVALID_ARGUMENT"
    assert err["details"] == {"field": "tags[1]"}
    assert text.startswith("[INVALID_ARGUMENT] tags[1] holds a lone UTF-16 surrogate")


async def test_a_successful_call_has_no_error(client) -> None:  # noqa: ANN001
    res = await client.call_tool("add_memory", {"content": "Errors carry codes", "project": "e"})
    assert not res.is_error
    assert "error" not in res.structured_content
    assert res.structured_content["note"]["zk_id"].startswith("ZK-")


def _stdio(home: Path, agent: str) -> Client:
    env = {**os.environ, "BRAIN__HOME": str(home), "BRAIN__EMBEDDING__MODEL": "offline/hash-384",
           "BRAIN__IDENTITY__AGENT_ID": agent, "PYTHONPATH": str(ROOT),
           "BRAIN__WORKERS__ENRICHMENT__ENABLED": "false"}
    transport = StdioTransport(command=sys.executable, args=[str(ROOT / "mcp_server.py")],
                               env=env, cwd=str(ROOT), keep_alive=False)
    return Client(transport, timeout=120)


async def test_a_forwarded_call_keeps_its_structured_error(tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        owner = await stack.enter_async_context(_stdio(tmp_path, "owner"))
        await owner.call_tool("brain_stats", {})  # the first server owns the data dir
        proxy = await stack.enter_async_context(_stdio(tmp_path, "proxy"))
        # Refused by the owner's service, sent back over the call channel.
        text, err = await _error(proxy, "get_related", {"zk_id": "ZK-00000000"})
        assert err["code"] == "NOTE_NOT_FOUND"
        assert text == f"[NOTE_NOT_FOUND] {err['message']}"
        # Refused by the owner's schema: typed as it is without a proxy in between.
        text, err = await _error(proxy, "get_related", {"zk_id": "ZK-1", "depth": 9})
        assert err["code"] == "INVALID_ARGUMENT"
        assert [p["field"] for p in err["details"]["problems"]] == ["depth"]
        assert text.startswith("[INVALID_ARGUMENT] invalid arguments: depth: ")
        with pytest.raises(ToolError, match=r"^\[NOTE_NOT_FOUND\] "):
            await proxy.call_tool("get_related", {"zk_id": "ZK-00000000"})
        stats = (await proxy.call_tool("brain_stats", {})).structured_content
        assert stats["data_dir"] == str(tmp_path)  # the proxy answers, from the owner's brain


async def test_every_output_schema_admits_the_error_shape(client) -> None:  # noqa: ANN001
    """A client that validated an error result against the tool's output schema anyway (the
    TypeScript SDK does) would still accept it, while a result missing a key its tool always
    returns is refused: the schemas say what comes back and still admit the error shape."""
    import jsonschema

    from mcp_surface.profiles import CORE

    error = {"error": {"code": "INVALID_ARGUMENT", "message": "m", "details": {"field": "x"}}}
    tools = await client.list_tools()
    assert len(tools) >= len(CORE) + 7  # the full profile: core plus the admin tools
    precise = 0
    for tool in tools:
        assert tool.output_schema is not None, tool.name
        jsonschema.validate(error, tool.output_schema)
        if "anyOf" in tool.output_schema:
            precise += 1
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate({}, tool.output_schema)
    assert precise >= len(CORE)  # every core tool says what its result always carries
