"""Code citations of notes: check a note's cited code against the code as it is now."""

from __future__ import annotations

from typing import Any

from mcp.types import ToolAnnotations

from mcp_surface.args import ZkId

READ = ToolAnnotations(readOnlyHint=False, idempotentHint=True, openWorldHint=False)


def register(mcp: Any, call: Any) -> None:
    @mcp.tool(annotations=READ)
    async def verify_note(zk_id: ZkId) -> dict[str, Any]:
        """The code a note cites, as seen when it was written beside how it is now (state
        fresh / changed / gone per citation), so you can confirm the note or correct it with
        update_memory, which re-anchors its citations."""
        return await call(lambda b: b.citations.verify(zk_id))
