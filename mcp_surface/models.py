"""The ``model`` tool (full profile, read-only): where an embedding model switch stands, and
what one would cost. Switching itself is an operator's command (``brain model switch``): it
rebuilds the store."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from pydantic import Field

from mcp_surface.actions import check, uses
from mcp_surface.calls import Call
from mcp_surface.lean import PURE_READ, tool

ModelId = Annotated[str | None, Field(
    max_length=300, description="Default: the configured model pending a switch")]
Dimension = Annotated[int, Field(ge=0, le=8192, description="0 = the model's default")]
USES = uses(status="", estimate="model dimension")


def register(mcp: FastMCP, call: Call) -> None:
    @tool(mcp, PURE_READ)
    async def model(
        action: Literal["status", "estimate"],
        model: ModelId = None,
        dimension: Dimension = 0,
    ) -> dict[str, Any]:
        """Embedding model: status (active model, rebuild progress, pending switch) or
        estimate (what switching to a model would take; changes nothing)."""
        check("model", _model, locals(), USES)
        if action == "status":
            return await call(lambda s: s.model_switch.status())
        from brain.generations.wiring import run_command

        return await call(lambda s: run_command(s.model_switch, "estimate", model or "",
                                                dimension, s.model_switch.provider))

    _model = model
