"""AGENTS.md documents exactly the tools the server lists.

Checked in both directions against the live server (in-process client):
- every tool the server lists has a row in AGENTS.md's tool reference;
- every tool name AGENTS.md mentions in backticks is a tool the server lists.

One honest exception in the second direction: tool groups are built by several people and a
group whose module does not register any tool yet in this checkout is skipped (its rows are
documented ahead of the code). As soon as one tool of a group is live, every documented tool
of that group must be live too, so a renamed or dropped tool still fails this test.
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
    assert {"core", "workflow"} <= groups_live
    text = AGENTS.read_text(encoding="utf-8")
    mentioned = set(BACKTICKED.findall(text))
    # Every bare identifier in backticks is a tool with a reference row (no stray names).
    assert mentioned <= set(rows), f"not in the tool reference: {sorted(mentioned - set(rows))}"
    dead = sorted(n for n, g in rows.items() if g in groups_live and n not in live)
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
