"""Source index tools: watched folders, their sync jobs, and fs_search over their files."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from fastmcp import Context
from mcp.types import ToolAnnotations
from pydantic import Field

from brain.limits import MAX_QUERY_CHARS
from mcp_surface.args import (
    Date,
    IntervalS,
    Name,
    Names,
    OptId,
    OptName,
    OptPath,
    OptPattern,
    OptProject,
    PathArg,
    Paths,
    Patterns,
    ScanFiles,
    TagList,
)

WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)
PURE_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

Source = Annotated[Name, Field(min_length=1, description="Source name or id (see list_sources)")]
Trigger = Literal["auto", "manual", "interval"]
Pinned = Annotated[bool | None, Field(
    description="Keep syncing in the background when [sync] auto is packages-only "
                "(default: when it holds skills, rules, agents or a package manifest)")]


def register(mcp: Any, call: Any) -> None:  # noqa: C901 - one closure per tool
    @mcp.tool(annotations=WRITE)
    async def add_source(
        path: Annotated[PathArg, Field(min_length=1, description="Folder on this machine")],
        name: Annotated[OptName, Field(description="Short name; default the folder")] = None,
        project: Annotated[OptProject, Field(description="Project the files belong to")] = None,
        trigger: Trigger = "auto",
        exclude: Patterns = None,
        include: Patterns = None,
        max_scan_files: ScanFiles = None,
        interval_s: IntervalS = None,
        visibility: Annotated[Literal["shared", "private"], Field(
            description="shared: every agent of your user searches it; private: only this agent"
        )] = "shared",
        pinned: Pinned = None,
    ) -> dict[str, Any]:
        """Index a folder so fs_search finds its files by meaning, metadata or text. 'auto'
        watches it and re-indexes changed files within seconds; 'manual' syncs only on
        sync_source; 'interval' every interval_s. Credential stores, .env files, key material,
        node_modules and build output are never indexed. Starts a first sync job."""
        return await call(
            lambda b: b.sources.add(
                path, name, project, trigger, exclude, include, max_scan_files, interval_s,
                visibility=visibility, pinned=pinned,
            )
        )

    @mcp.tool(annotations=PURE_READ)
    async def list_sources(project: OptProject = None) -> dict[str, Any]:
        """List sources with trigger, filters and the last index snapshot (indexed /
        unindexed / total files; a total like '200000+' means the scan cap was hit)."""
        found = await call(lambda b: b.sources.list(project))
        return {"sources": found, "count": len(found)}

    @mcp.tool(annotations=WRITE)
    async def update_source(
        source: Source,
        name: OptName = None,
        project: OptProject = None,
        trigger: Trigger | None = None,
        exclude: Patterns = None,
        include: Patterns = None,
        max_scan_files: ScanFiles = None,
        interval_s: IntervalS = None,
        pinned: Pinned = None,
    ) -> dict[str, Any]:
        """Change a source. New exclude/include rules start a sync that removes the search
        data of files the rules no longer cover."""
        changes = {
            k: v
            for k, v in dict(
                name=name,
                project=project,
                trigger=trigger,
                exclude=exclude,
                include=include,
                max_scan_files=max_scan_files,
                interval_s=interval_s,
                pinned=pinned,
            ).items()
            if v is not None
        }
        return await call(lambda b: b.sources.update(source, **changes))

    @mcp.tool(annotations=DESTRUCTIVE)
    async def remove_source(source: Source, purge: bool = False) -> dict[str, Any]:
        """Stop indexing a source. Its search data stays (as orphans, see repair_orphans)
        unless purge=true deletes it now."""
        return await call(lambda b: b.sources.remove(source, purge))

    @mcp.tool(annotations=WRITE)
    async def sync_source(
        source: Source,
        ctx: Context,
        wait: Annotated[bool, Field(description="Wait for the job, reporting progress")] = False,
        paths: Annotated[Paths, Field(description="Only these relative paths")] = None,
    ) -> dict[str, Any]:
        """Reconcile a source with the disk now (unchanged files cost nothing). Returns the
        job at once; wait=true reports progress and returns the finished job."""
        job = await call(lambda b: b.sources.sync(source, paths=paths))
        return await _follow(call, ctx, job) if wait else job

    @mcp.tool(annotations=PURE_READ)
    async def sync_status(
        job_id: Annotated[OptId, Field(description="One job; omit for all")] = None,
        source: Annotated[OptName, Field(description="Jobs of one source")] = None,
    ) -> dict[str, Any]:
        """Status, progress and result of sync jobs (queued, running, done, cancelled,
        failed)."""
        if job_id:
            return await call(lambda b: b.sources.job(job_id))
        found = await call(lambda b: b.sources.jobs(source))
        return {"jobs": found, "count": len(found)}

    @mcp.tool(annotations=WRITE)
    async def cancel_sync(job_id: OptId = None, source: OptName = None) -> dict[str, Any]:
        """Cancel a sync job (or every job of a source) within about a second. What it
        already indexed stays valid; the next sync picks up where it stopped."""
        return await call(lambda b: b.sources.cancel(job_id, source))

    @mcp.tool(annotations=PURE_READ)
    async def fs_search(
        query: Annotated[
            str,
            Field(max_length=MAX_QUERY_CHARS,
                  description="Words (semantic/filter) or pattern (grep)"),
        ],
        search_mode: Literal["semantic", "filter", "grep"] = "semantic",
        project: OptProject = None,
        source: OptName = None,
        folder: Annotated[
            OptPath, Field(description="Absolute folder inside a source, or relative to source")
        ] = None,
        path_glob: Annotated[OptPattern, Field(description="e.g. '**/*.py' or 'src/**'")] = None,
        category: Names = None,
        tags: TagList = None,
        created_after: Date = None,
        created_before: Date = None,
        modified_after: Date = None,
        modified_before: Date = None,
        limit: Annotated[int | None, Field(ge=1, le=200, description="Rows (10)")] = None,
        fixed: Annotated[bool, Field(description="grep: literal text, not a regex")] = False,
        case_insensitive: bool = False,
    ) -> dict[str, Any]:
        """Search the files of indexed sources. semantic: by meaning (hybrid dense + BM25,
        the same ranking as search_memory and search_files), one row per file with its best
        chunk; the best match is always returned, weaker ones dropped only below the relative
        floor (retrieval.relative_floor x the best score; 0 = none);
        filter: by category (code, docs, config, skills, rules, agents, commands,
        contribution, conversation), tags, glob or dates, with query as keywords ranked by
        frequency (empty query lists files); grep: regex/literal over the live files, always
        current. Results carry path, line range, score and a snippet. semantic: a clear single
        answer comes alone unless limit is given (answer, more_hits as in search_memory)."""
        return await call(
            lambda b: b.sources.search(
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

    @mcp.tool(annotations=WRITE)
    async def rescan_source(source: Source) -> dict[str, Any]:
        """Walk the whole source again and re-read every file; files whose content did not
        change keep their vectors. Use when changes were missed."""
        return await call(lambda b: b.sources.rescan(source))

    @mcp.tool(annotations=WRITE)
    async def reset_source_state(source: Source) -> dict[str, Any]:
        """Forget what the last sync saw and cancel its running job, so the next sync
        compares every file. Deletes no file and no vector."""
        return await call(lambda b: b.sources.reset_state(source))

    @mcp.tool(annotations=WRITE)
    async def reembed(
        source: Source,
        path: Annotated[OptPath, Field(description="A folder or file in the source")] = None,
        confirm: Annotated[bool, Field(description="Run it; false only estimates")] = False,
    ) -> dict[str, Any]:
        """Embed a source, folder or file again, changed or not (costly). Without
        confirm=true it only returns a sample-based time estimate range."""
        return await call(lambda b: b.sources.reembed(source, path, confirm))

    @mcp.tool(annotations=DESTRUCTIVE)
    async def repair_orphans(dry_run: bool = True) -> dict[str, Any]:
        """Find search data of removed sources; dry_run=false deletes it."""
        return await call(lambda b: b.sources.repair_orphans(dry_run))


async def _follow(call: Any, ctx: Context, job: dict[str, Any]) -> dict[str, Any]:
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
        job = await call(lambda b: b.sources.job(job_id))
    return job
