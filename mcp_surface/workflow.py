"""Coding-agent workflow tools: session start and handoff, mistake memory, decay upkeep."""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import FastMCP
from pydantic import Field

from mcp_surface import outputs as out
from mcp_surface.args import (
    Cites,
    Detail,
    Excerpt,
    Line,
    Lines,
    OptProject,
    Query,
    Signature,
    Text,
    WorkProject,
    ZkId,
)
from mcp_surface.calls import Call
from mcp_surface.lean import PURE_READ, READ, UPKEEP, WRITE, tool

Limit = Annotated[int, Field(ge=1, le=500)]


def register(mcp: FastMCP, call: Call) -> None:
    @tool(mcp, PURE_READ, out.OPENED)
    async def open_session(project: WorkProject = None) -> dict[str, Any]:
        """Call first on a project: get_session_context and get_inbox in one call."""
        return await call(lambda s: s.sessions.open_session(project))

    @tool(mcp, PURE_READ, out.SESSION_CONTEXT)
    async def get_session_context(project: WorkProject = None) -> dict[str, Any]:
        """Project state: context, last handoff, open thread, decisions, mistakes, fixes."""
        return await call(lambda s: s.sessions.get_session_context(project))

    @tool(mcp, PURE_READ, out.INBOX)
    async def get_inbox(project: OptProject = None, limit: Limit = 50) -> dict[str, Any]:
        """Fleeting notes waiting to be distilled or forgotten, oldest first."""
        return await call(lambda s: s.sessions.get_inbox(project, limit))

    @tool(mcp, WRITE, out.CLOSED)
    async def close_session(
        objective: Annotated[Line, Field(min_length=1)],
        project: WorkProject = None,
        completed: Lines = None,
        blockers: Lines = None,
        next_steps: Lines = None,
        key_files: Lines = None,
        transcript_excerpt: Excerpt = None,
    ) -> dict[str, Any]:
        """Call at handoff: stores a session_summary and the new open_thread."""
        return await call(
            lambda s: s.sessions.close_session(
                project, objective, completed, blockers, next_steps, key_files,
                transcript_excerpt,
            )
        )

    @tool(mcp, WRITE, out.FAILURE)
    async def record_failure(
        content: Annotated[Text, Field(description="What failed: error, command, context")],
        failure_signature: Annotated[Signature, Field(
            description="Stable key, e.g. 'pytest:ImportError:qdrant_edge'; repeats count")],
        project: WorkProject = None,
    ) -> dict[str, Any]:
        """Record a failure as it happens (a fleeting mistake note)."""
        return await call(lambda s: s.mistakes.record_failure(content, project, failure_signature))

    @tool(mcp, WRITE, out.RESOLUTION)
    async def record_resolution(
        failure_zk_id: ZkId,
        fix_content: Annotated[Text, Field(description="The validated fix and why it works")],
        project: OptProject = None,
        cites: Cites = None,
    ) -> dict[str, Any]:
        """Store a validated fix, linked to its failure (both become permanent)."""
        return await call(
            lambda s: s.mistakes.record_resolution(failure_zk_id, fix_content, project,
                                                   cites or ())
        )

    @tool(mcp, READ, out.PREFLIGHT)
    async def preflight_check(
        task: Query,
        project: WorkProject = None,
        top_k: Annotated[int | None, Field(ge=1, le=50, description="5")] = None,
        detail: Detail = "compact",
        changed_since: Annotated[str | None, Field(max_length=200, description="A git ref")
                                 ] = None,
    ) -> dict[str, Any]:
        """Before coding: past mistakes (with fixes) and patterns relevant to the task (a
        clear single answer alone unless top_k is given); changed_since also lists notes
        whose cited code changed."""
        return await call(lambda s: s.pages.present(
            s.mistakes.preflight_check(task, project, top_k, changed_since), detail))

    @tool(mcp, UPKEEP, out.ARCHIVED)
    async def archive_stale_notes(dry_run: bool = True) -> dict[str, Any]:
        """Weekly: soft-archive idle, rarely used, unpinned notes."""
        return await call(lambda s: s.decay.archive_stale_notes(dry_run))

    @tool(mcp, PURE_READ, out.DECAY)
    async def decay_report(limit: Limit = 20) -> dict[str, Any]:
        """The notes most likely to be archived next (lowest decay scores)."""
        return await call(lambda s: s.decay.decay_report(limit))
