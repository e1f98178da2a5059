"""Code citations of notes (full profile): check a note's cited code against the code as it
is now. ``brain notes verify`` does the same."""

from __future__ import annotations

from typing import Any

from fastmcp import FastMCP

from mcp_surface.args import ZkId
from mcp_surface.calls import Call
from mcp_surface.lean import UPKEEP, tool


def register(mcp: FastMCP, call: Call) -> None:
    @tool(mcp, UPKEEP)
    async def verify_note(zk_id: ZkId) -> dict[str, Any]:
        """A note's cited code as seen then beside as it is now (fresh, changed, gone); fix
        the note with update_memory."""
        return await call(lambda s: s.citations.verify(zk_id))
