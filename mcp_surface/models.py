"""Embedding model switch tools (read-only): where a switch stands, and what one would cost.
Switching itself is an operator's command (``brain model switch``): it rebuilds the store."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import ToolAnnotations
from pydantic import Field

PURE_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

ModelId = Annotated[str | None, Field(
    max_length=300, description="Target model id (default: the configured model pending a "
    "switch)")]
Dimension = Annotated[int, Field(ge=0, le=8192, description="Target dimension; 0 = its default")]


def register(mcp: Any, call: Any) -> None:
    @mcp.tool(annotations=PURE_READ)
    async def model_status() -> dict[str, Any]:
        """The active embedding model and generation, a rebuild in progress (status, progress,
        checkpoint, rate), the previous generation kept for rollback, a pending switch."""
        return await call(lambda b: b.model_switch.status())

    @mcp.tool(annotations=PURE_READ)
    async def model_estimate(model: ModelId = None, dimension: Dimension = 0) -> dict[str, Any]:
        """What switching to a model would take: points per kind, a sample embedded with it,
        a time range and (remote models) a token count. Changes nothing."""
        from brain.generations.wiring import run_command

        return await call(lambda b: run_command(b.model_switch, "estimate", model or "",
                                                dimension, b.settings.embedding.provider))
