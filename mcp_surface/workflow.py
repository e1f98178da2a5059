"""Coding-agent workflow tools: session start and handoff, mistake memory, decay upkeep."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import ToolAnnotations
from pydantic import Field

from brain.presentation import present
from mcp_surface.args import (
    Detail,
    Excerpt,
    Line,
    Lines,
    OptProject,
    Project,
    Query,
    Signature,
    Text,
    ZkId,
)

READ = ToolAnnotations(readOnlyHint=False, idempotentHint=False, openWorldHint=False)
PURE_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)


def register(mcp: Any, call: Any) -> None:
    @mcp.tool(annotations=PURE_READ)
    async def open_session(project: Project) -> dict[str, Any]:
        """Call first when you start work on a project: returns get_session_context and
        get_inbox in one call (project context, last handoff, decisions, mistakes, inbox)."""
        return await call(lambda b: b.sessions.open_session(project))

    @mcp.tool(annotations=PURE_READ)
    async def get_session_context(project: Project) -> dict[str, Any]:
        """Project state to resume work: project_context notes, the latest session summary,
        the active open thread, recent decisions, mistakes and fixes, pinned notes, counts."""
        return await call(lambda b: b.sessions.get_session_context(project))

    @mcp.tool(annotations=PURE_READ)
    async def get_inbox(
        project: OptProject = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        """Fleeting notes waiting to be distilled (oldest first, with age in days). Distill
        the ones worth keeping with distill_to_permanent, forget the rest."""
        return await call(lambda b: b.sessions.get_inbox(project, limit))

    @mcp.tool(annotations=WRITE)
    async def close_session(
        project: Project,
        objective: Annotated[
            Line, Field(min_length=1, description="What the session set out to do")
        ],
        completed: Lines = None,
        blockers: Lines = None,
        next_steps: Lines = None,
        key_files: Lines = None,
        transcript_excerpt: Excerpt = None,
    ) -> dict[str, Any]:
        """Call at handoff: writes one session_summary and one active open_thread; older open
        threads are archived only after the new handoff is durably stored. With a
        transcript_excerpt and a chat model configured, the model rewrites the handoff in
        the background ("refining": true); the excerpt is redacted and dropped after."""
        return await call(
            lambda b: b.sessions.close_session(
                project, objective, completed, blockers, next_steps, key_files,
                transcript_excerpt,
            )
        )

    @mcp.tool(annotations=WRITE)
    async def record_failure(
        content: Annotated[Text, Field(description="What failed: error, command, context")],
        project: Project,
        failure_signature: Annotated[
            Signature,
            Field(
                description="Stable key of this failure (e.g. 'pytest:ImportError:qdrant_edge'); "
                "the same key again counts an occurrence instead of a new note",
            ),
        ],
    ) -> dict[str, Any]:
        """Capture a fresh failure as a fleeting mistake note, right when it happens."""
        return await call(lambda b: b.mistakes.record_failure(content, project, failure_signature))

    @mcp.tool(annotations=WRITE)
    async def record_resolution(
        failure_zk_id: ZkId,
        fix_content: Annotated[Text, Field(description="The validated fix and why it works")],
        project: OptProject = None,
    ) -> dict[str, Any]:
        """Once a fix is validated: stores a permanent fix note linked to the failure and
        promotes the failure to permanent knowledge."""
        return await call(
            lambda b: b.mistakes.record_resolution(failure_zk_id, fix_content, project)
        )

    @mcp.tool(annotations=READ)
    async def preflight_check(
        task: Annotated[Query, Field(description="The task you are about to do")],
        project: OptProject = None,
        top_k: Annotated[int | None, Field(ge=1, le=50, description="Notes of each kind (5)")] = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Before coding: past mistakes (each with its fixes), fixes and patterns relevant to
        the task, so known failures are not repeated. A clear single answer comes alone
        unless top_k is given (answer, more_hits as in search_memory). Notes are compact unless
        detail="full"; get_note reads one whole."""
        return await call(lambda b: present(b.mistakes.preflight_check(task, project, top_k),
                                            detail, b.settings.memory.snippet_chars))

    @mcp.tool(
        annotations=ToolAnnotations(
            readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False
        )
    )
    async def archive_stale_notes(dry_run: bool = True) -> dict[str, Any]:
        """Weekly maintenance: soft-archive notes idle > 45 days with < 2 accesses and a decay
        score < 0.3 (never pinned ones). Dry run by default; restore_note undoes it."""
        return await call(lambda b: b.decay.archive_stale_notes(dry_run))

    @mcp.tool(annotations=PURE_READ)
    async def decay_report(limit: Annotated[int, Field(ge=1, le=500)] = 20) -> dict[str, Any]:
        """The notes with the lowest decay scores (most likely to be archived next)."""
        return await call(lambda b: b.decay.decay_report(limit))
