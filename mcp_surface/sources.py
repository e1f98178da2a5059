"""Source index tools: ``fs_search`` over the files of watched folders (core), and the
``sources`` tool (full profile) that adds, edits, syncs and repairs them, each action also a
``brain source`` / ``brain sync`` command."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from fastmcp import Context, FastMCP
from pydantic import Field

from brain.notes import Visibility
from brain.sources.registry import EDITABLE_FIELDS, Trigger
from brain.trust.limits import MAX_QUERY_CHARS
from mcp_surface import outputs as out
from mcp_surface.actions import check, uses
from mcp_surface.args import (
    Date,
    IntervalS,
    Names,
    OptId,
    OptName,
    OptPath,
    OptPattern,
    OptProject,
    Paths,
    Patterns,
    ScanFiles,
    TagList,
)
from mcp_surface.calls import Call
from mcp_surface.lean import DESTRUCTIVE, PURE_READ, tool

Pinned = Annotated[bool | None, Field(
    description="Syncs under [sync] auto=packages-only (default: holds package content)")]


Action = Literal["add", "workspace", "list", "update", "remove", "sync", "status", "cancel",
                 "rescan", "reset", "reembed", "repair_orphans"]
_EDIT = " ".join(EDITABLE_FIELDS)
USES = uses(add=f"path visibility {_EDIT}", workspace="path project", list="project", update=f"source {_EDIT}",
            remove="source purge", sync="source wait paths", status="job_id source",
            cancel="job_id source", rescan="source", reset="source",
            reembed="source path confirm", repair_orphans="dry_run")
NEEDS = uses(add="path", workspace="path", update="source", remove="source", sync="source", rescan="source",
             reset="source", reembed="source")


def register(mcp: FastMCP, call: Call) -> None:
    @tool(mcp, PURE_READ, out.FS_SEARCH)
    async def fs_search(
        query: Annotated[str, Field(max_length=MAX_QUERY_CHARS,
                                    description="Words, or a pattern for grep")],
        search_mode: Literal["semantic", "filter", "grep"] = "semantic",
        project: OptProject = None,
        source: OptName = None,
        folder: OptPath = None,
        path_glob: Annotated[OptPattern, Field(description="e.g. 'src/**/*.py'")] = None,
        category: Annotated[Names, Field(
            description="code, docs, config, skills, rules, agents, commands, contribution, "
                        "conversation")] = None,
        tags: TagList = None,
        created_after: Date = None,
        created_before: Date = None,
        modified_after: Date = None,
        modified_before: Date = None,
        limit: Annotated[int | None, Field(ge=1, le=200, description="10")] = None,
        fixed: Annotated[bool, Field(description="grep: literal, not regex")] = False,
        case_insensitive: bool = False,
    ) -> dict[str, Any]:
        """Search project files: semantic (hybrid, a row per file; a clear single answer
        alone unless limit is given), filter (metadata, query as keywords) or grep (live
        files, ISO dates)."""
        return await call(
            lambda s: s.sources.search(
                query,
                search_mode,
                project=project,
                source=source,
                folder=folder,
                path_glob=path_glob,
                category=category,
                tags=tags,
                created_after=created_after,
                created_before=created_before,
                modified_after=modified_after,
                modified_before=modified_before,
                limit=limit,
                fixed=fixed,
                case_insensitive=case_insensitive,
            )
        )

    @tool(mcp, DESTRUCTIVE)
    async def sources(  # noqa: C901 - one branch per action
        action: Action,
        ctx: Context,
        source: Annotated[OptName, Field(description="Name or id")] = None,
        path: Annotated[OptPath, Field(description="add: the folder; reembed: a part")] = None,
        name: OptName = None,
        project: OptProject = None,
        trigger: Trigger | None = None,
        exclude: Patterns = None,
        include: Patterns = None,
        max_scan_files: ScanFiles = None,
        interval_s: IntervalS = None,
        use_gitignore: Annotated[bool | None, Field(
            description="Skip what .gitignore files skip (default true)")] = None,
        pinned: Pinned = None,
        visibility: Visibility = "shared",
        purge: Annotated[bool, Field(description="remove: delete its search data now")] = False,
        wait: Annotated[bool, Field(description="sync: wait, reporting progress")] = False,
        paths: Annotated[Paths, Field(description="sync: only these")] = None,
        job_id: OptId = None,
        confirm: Annotated[bool, Field(description="reembed: run it, not estimate")] = False,
        dry_run: bool = True,
    ) -> dict[str, Any]:
        """Indexed folders: add (auto: watched), workspace (add unless held), list, update,
        remove, sync, status, cancel, rescan, reset, reembed, repair_orphans. Credential
        files are never indexed."""
        given = locals()
        check("sources", sources, given, USES, NEEDS)
        src = source or ""
        edits = {k: given[k] for k in EDITABLE_FIELDS if given[k] is not None}
        if action == "add":
            folder = path or ""
            return await call(lambda s: s.sources.add(
                folder, name, project, trigger or "auto", exclude, include, max_scan_files,
                interval_s, use_gitignore=use_gitignore is not False, visibility=visibility,
                pinned=pinned))  # an agent's call is no consent: `brain source add` is
        if action == "workspace":
            folder = path or ""
            return await call(lambda s: s.sources.ensure_workspace(folder, project))
        if action == "list":
            found = await call(lambda s: s.sources.list(project))
            return {"sources": found, "count": len(found)}
        if action == "sync":
            job = await call(lambda s: s.sources.sync(src, paths=paths))
            return await _follow(call, ctx, job) if wait else job
        if action == "status":
            if job_id:
                return await call(lambda s: s.sources.job(job_id))
            jobs = await call(lambda s: s.sources.jobs(source))
            return {"jobs": jobs, "count": len(jobs)}
        runs = {
            "update": lambda s: s.sources.update(src, **edits),
            "remove": lambda s: s.sources.remove(src, purge),
            "cancel": lambda s: s.sources.cancel(job_id, source),
            "rescan": lambda s: s.sources.rescan(src),
            "reset": lambda s: s.sources.reset_state(src),
            "reembed": lambda s: s.sources.reembed(src, path, confirm),
            "repair_orphans": lambda s: s.sources.repair_orphans(dry_run),
        }
        return await call(runs[action])


async def _follow(call: Call, ctx: Context, job: dict[str, Any]) -> dict[str, Any]:
    """Poll a job until it ends, relaying its progress as MCP progress notifications."""
    job_id = job["job_id"]
    while job["status"] in ("queued", "running"):
        p = job.get("progress") or {}
        total = p.get("files_total")
        await ctx.report_progress(
            float(p.get("files_done", 0)),
            float(total) if total else None,
            f"{p.get('phase', job['status'])}: {p.get('chunks_embedded', 0)} chunks embedded",
        )
        await anyio.sleep(0.2)
        job = await call(lambda s: s.sources.job(job_id))
    return job
