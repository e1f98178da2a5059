"""Vector health tools: stats, integrity scan, duplicates, hot files and the collection report
(read-only), GC, repair, index rebuild and quantization switch (destructive, dry runs by
default). Each data report covers what the caller may see; the collection actions change the
store's structure (indexes, quantization), never a point's data."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.types import ToolAnnotations
from pydantic import Field

from mcp_surface.args import Id, OptProject

DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)
PURE_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

MAX_LISTED = 10_000  # ids a GC answer lists, and a GC run accepts back
ScopeProject = Annotated[OptProject, Field(description="Only this project (default: all yours)")]
DryRun = Annotated[bool, Field(description="true (default): only report what would change")]


def _listed(out: dict[str, Any]) -> dict[str, Any]:
    ids = out.get("ids") or []
    if len(ids) > MAX_LISTED:
        return {**out, "ids": ids[:MAX_LISTED], "ids_truncated": True}
    return out


def register(mcp: Any, call: Any) -> None:
    @mcp.tool(annotations=PURE_READ)
    async def health_stats(project: ScopeProject = None) -> dict[str, Any]:
        """Cheap health figures: points per kind, forgotten and fleeting notes, the active
        model (and a pending switch), queue depths, hot files."""
        return await call(lambda b: b.health.stats(project))

    @mcp.tool(annotations=PURE_READ)
    async def health_scan(project: ScopeProject = None) -> dict[str, Any]:
        """Integrity scan (read-only, a full pass): orphan points, links to missing notes,
        notes missing from the graph, vectors of another model, points missing a dense or
        BM25 vector, payloads missing fields; counts and sample ids. Fix with health_gc
        (orphans) and health_repair (the rest)."""
        return await call(lambda b: b.health.scan(project))

    @mcp.tool(annotations=PURE_READ)
    async def health_duplicates(
        project: ScopeProject = None,
        threshold: Annotated[float | None, Field(
            gt=0, le=1, allow_inf_nan=False,
            description="Cosine similarity for a duplicate (default [health] duplicate_threshold)")
        ] = None,
        max_points: Annotated[int, Field(ge=1, le=20_000, description="Points examined at most")
                              ] = 2000,
    ) -> dict[str, Any]:
        """Near-identical notes and chunks, in groups. Removes nothing: merge notes with
        consolidate_clusters."""
        return await call(lambda b: b.health.duplicates(project, threshold, max_points))

    @mcp.tool(annotations=PURE_READ)
    async def health_hot_files(project: ScopeProject = None) -> dict[str, Any]:
        """Source files rewritten at or above [health] hot_file_threshold times within the
        rolling window (an automated writer: exclude it from its source)."""
        return await call(lambda b: b.health.hot_files(project))

    @mcp.tool(annotations=DESTRUCTIVE)
    async def health_gc(
        dry_run: DryRun = True,
        project: ScopeProject = None,
        expect: Annotated[list[Id] | None, Field(
            max_length=MAX_LISTED,
            description="The ids a dry run listed: only these are deleted (still orphans)")
        ] = None,
    ) -> dict[str, Any]:
        """Garbage collection of orphan points (chunks and files of removed sources or
        files, passages of deleted documents). dry_run=true lists the ids; pass them back as
        expect with dry_run=false to delete exactly those. ACTION_IN_PROGRESS while another
        GC or repair runs for the project."""
        return _listed(await call(lambda b: b.health.gc(dry_run, project, expect)))

    @mcp.tool(annotations=DESTRUCTIVE)
    async def health_repair(
        dry_run: DryRun = True,
        project: ScopeProject = None,
        limit: Annotated[int, Field(ge=1, le=100_000, description="Points repaired at most")
                         ] = 10_000,
    ) -> dict[str, Any]:
        """Repair what can be rebuilt: drop links to missing notes, put notes back in the
        graph, re-encode missing BM25 vectors, re-embed missing or other-model dense vectors.
        Bounded by limit; run again to go on. ACTION_IN_PROGRESS while another run holds the
        project."""
        return await call(lambda b: b.health.repair(dry_run, project, limit))

    @mcp.tool(annotations=PURE_READ)
    async def health_collection(project: ScopeProject = None) -> dict[str, Any]:
        """Collection report (read-only): payload indexes missing or with another schema
        than declared, the store's quantization against [index] quantization (and the store
        meta's record), points missing their BM25 vector. ``fix`` names the tool for each."""
        return await call(lambda b: b.health.collection(project))

    @mcp.tool(annotations=DESTRUCTIVE)
    async def health_rebuild_indexes(dry_run: DryRun = True) -> dict[str, Any]:
        """Create again, with their declared settings, the payload indexes the collection
        report lists as missing or different. Whole store; ACTION_IN_PROGRESS while another
        health action runs."""
        return await call(lambda b: b.health.rebuild_indexes(dry_run))

    @mcp.tool(annotations=DESTRUCTIVE)
    async def health_quantization(
        mode: Annotated[Literal["none", "int8"] | None, Field(
            description="Target mode (default: the [index] quantization setting)")] = None,
        dry_run: DryRun = True,
    ) -> dict[str, Any]:
        """Switch the store's dense vector quantization (int8: scalar, searched with
        rescoring) and record it in the store. Rebuilds the store's segments (on Qdrant Edge
        out of process, searches keep answering); NOT_SUPPORTED on qdrant-client local mode.
        ACTION_IN_PROGRESS while another health action runs."""
        return await call(lambda b: b.health.apply_quantization(mode, dry_run))
