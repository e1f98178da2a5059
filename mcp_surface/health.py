"""The ``health`` tool (full profile): vector health in one tool with an ``action``.

Read-only reports (stats, scan, duplicates, hot_files, collection) cover what the caller may
see; gc, repair, rebuild_indexes and quantization are dry runs unless ``dry_run=false``, and
the last two change the store's structure (indexes, quantization), never a point's data.
Each action is also ``brain health <action>``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from pydantic import Field

from mcp_surface.actions import check, uses
from mcp_surface.args import Id, OptProject
from mcp_surface.calls import Call
from mcp_surface.lean import DESTRUCTIVE, tool

MAX_LISTED = 10_000  # ids a GC answer lists, and a GC run accepts back
Action = Literal["stats", "scan", "duplicates", "hot_files", "collection", "gc", "repair",
                 "rebuild_indexes", "quantization"]
USES = uses(stats="project", scan="project", duplicates="project threshold max_points",
            hot_files="project", collection="project", gc="dry_run project expect",
            repair="dry_run project limit", rebuild_indexes="dry_run",
            quantization="mode dry_run")


def _listed(out: dict[str, Any]) -> dict[str, Any]:
    ids = out.get("ids") or []
    if len(ids) > MAX_LISTED:
        return {**out, "ids": ids[:MAX_LISTED], "ids_truncated": True}
    return out


def register(mcp: FastMCP, call: Call) -> None:
    @tool(mcp, DESTRUCTIVE)
    async def health(
        action: Action,
        project: Annotated[OptProject, Field(description="Default: all yours")] = None,
        dry_run: bool = True,
        threshold: Annotated[float | None, Field(gt=0, le=1, allow_inf_nan=False)] = None,
        max_points: Annotated[int, Field(ge=1, le=20_000)] = 2000,
        expect: Annotated[list[Id] | None, Field(
            max_length=MAX_LISTED, description="gc: the ids its dry run listed")] = None,
        limit: Annotated[int, Field(ge=1, le=100_000)] = 10_000,
        mode: Literal["none", "int8"] | None = None,
    ) -> dict[str, Any]:
        """Store health. Reports: stats, scan, duplicates, hot_files, collection. Fixes, dry
        runs unless dry_run=false: gc, repair, rebuild_indexes, quantization."""
        check("health", health, locals(), USES)
        runs = {
            "stats": lambda s: s.health.stats(project),
            "scan": lambda s: s.health.scan(project),
            "duplicates": lambda s: s.health.duplicates(project, threshold, max_points),
            "hot_files": lambda s: s.health.hot_files(project),
            "collection": lambda s: s.health.collection(project),
            "gc": lambda s: s.health.gc(dry_run, project, expect),
            "repair": lambda s: s.health.repair(dry_run, project, limit),
            "rebuild_indexes": lambda s: s.health.rebuild_indexes(dry_run),
            "quantization": lambda s: s.health.apply_quantization(mode, dry_run),
        }
        result = await call(runs[action])
        return _listed(result) if action == "gc" else result
