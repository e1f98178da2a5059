"""AGENTS.md documents exactly the tools the server lists.

Checked in both directions against the live server (in-process client):
- every tool the server lists has a row in AGENTS.md's tool reference;
- every tool name AGENTS.md mentions in backticks is a tool the server lists.

Every group of the tool reference must be live: tool groups are registered by plain import
(mcp_server.TOOL_GROUPS), so a group that registers nothing is a broken group, not one
documented ahead of its code.
"""

from __future__ import annotations

import re
from pathlib import Path

AGENTS = Path(__file__).resolve().parent.parent / "AGENTS.md"
ROW = re.compile(r"^\| `([a-z_]+)` \| ([a-z]+) \|", re.M)
BACKTICKED = re.compile(r"`([a-z][a-z_]*)`")


def documented() -> dict[str, str]:
    return {name: group for name, group in ROW.findall(AGENTS.read_text(encoding="utf-8"))}


async def test_every_listed_tool_is_documented(client) -> None:  # noqa: ANN001
    live = {t.name for t in await client.list_tools()}
    missing = sorted(live - set(documented()))
    assert not missing, f"tools the server lists but AGENTS.md does not document: {missing}"


async def test_every_documented_tool_exists(client) -> None:  # noqa: ANN001
    live = {t.name for t in await client.list_tools()}
    rows = documented()
    groups_live = {group for name, group in rows.items() if name in live}
    assert groups_live == set(rows.values()), (
        f"tool groups documented but registering nothing: {set(rows.values()) - groups_live}"
    )
    text = AGENTS.read_text(encoding="utf-8")
    mentioned = set(BACKTICKED.findall(text))
    # Every bare identifier in backticks is a tool with a reference row (no stray names).
    assert mentioned <= set(rows), f"not in the tool reference: {sorted(mentioned - set(rows))}"
    dead = sorted(n for n in rows if n not in live)
    assert not dead, f"AGENTS.md documents tools the server does not list: {dead}"


def test_protocol_covers_the_workflow_order() -> None:
    text = AGENTS.read_text(encoding="utf-8")
    order = [
        "`open_session`",
        "`preflight_check`",
        "`record_failure`",
        "`record_resolution`",
        "`close_session`",
        "`archive_stale_notes`",
    ]
    positions = [text.index(t) for t in order]
    assert positions == sorted(positions)


async def test_every_tool_group_registers_its_documented_tools() -> None:
    """Each module of mcp_server.TOOL_GROUPS, registered alone, adds exactly the tools of its
    AGENTS.md group: none is empty, and none hides in another group's rows."""
    from fastmcp import FastMCP

    import mcp_server

    rows = documented()
    for group in mcp_server.TOOL_GROUPS:
        probe = FastMCP("probe")
        group.register(probe, None)  # the gate is only called when a tool runs
        names = {t.name for t in await probe.list_tools()}
        short = group.__name__.rsplit(".", 1)[-1]
        assert names, f"{group.__name__} registers no tool"
        assert names == {n for n, g in rows.items() if g == short}, group.__name__
