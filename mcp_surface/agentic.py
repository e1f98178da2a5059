"""Agentic memory tools: multi-hop deep search, cluster consolidation, capabilities."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import ToolAnnotations
from pydantic import Field

from brain.embed_credential import search_warnings
from brain.presentation import present, search_page
from mcp_surface.args import Detail, Ids, Project, Query
from mcp_surface.recall import (
    AllProjects,
    ConfidenceMin,
    CustomFilters,
    FilterProject,
    FingerprintMatch,
    IncludeContextual,
    IncludeFleeting,
    IncludeSiblings,
    MaxAgeDays,
    MinSalience,
    NoteKinds,
    Tags,
    recall_from,
)

Similarity = Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)]

READ = ToolAnnotations(readOnlyHint=False, idempotentHint=False, openWorldHint=False)
PURE_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)


def register(mcp: Any, call: Any) -> None:
    @mcp.tool(annotations=READ)
    async def deep_search(
        query: Annotated[Query, Field(description="The question, in words")],
        project: FilterProject = None,
        hops: Annotated[int, Field(ge=0, le=4, description="Search-and-follow rounds")] = 2,
        top_k: Annotated[int | None, Field(ge=1, le=100, description="Notes to return (10)")] = None,
        include_contextual: IncludeContextual = False,
        include_fleeting: IncludeFleeting = False,
        note_kind: NoteKinds = None,
        tags: Tags = None,
        max_age_days: MaxAgeDays = None,
        min_salience: MinSalience = None,
        confidence_min: ConfidenceMin = None,
        fingerprint_match: FingerprintMatch = True,
        custom_filters: CustomFilters = None,
        include_siblings: IncludeSiblings = False,
        all_projects: AllProjects = False,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Multi-hop search for complex or causal questions ("why does X break?", "how did
        we solve Y?"): searches, follows links from what it found, and searches again near
        what it found, for notes not found yet. Each result says which hop found it and
        through which link (via, relation). Takes the same filters as search_memory, applied
        to every hop. For simple lookups use search_memory. A clear single answer comes alone
        unless top_k is given (answer, more_hits as in search_memory). Hits are compact unless
        detail="full"; get_note reads one whole."""

        args = locals()

        def run(b: Any) -> dict[str, Any]:
            rf = recall_from(args)
            result: dict[str, Any] = b.agentic.deep_search(query, rf, hops, top_k or 10)
            result = search_page(result, b.settings.memory.relevance_band,
                                 explicit=top_k is not None, warnings=search_warnings(b.embedder))
            return present(result, detail, b.settings.memory.snippet_chars)

        return await call(run)

    @mcp.tool(annotations=DESTRUCTIVE)
    async def consolidate_clusters(
        project: Project,
        dry_run: bool = True,
        selected_cluster_ids: Ids = None,
        min_similarity: Similarity = 0.9,
        min_link_similarity: Similarity = 0.75,
        max_clusters: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> dict[str, Any]:
        """Find clusters of near-duplicate or strongly linked notes in a project. Always run
        with dry_run=true first (changes nothing) and review the proposals; then call with
        dry_run=false and the cluster_id values to merge. Each merged cluster becomes one
        permanent note that supersedes the originals; originals are archived, and
        restore_note brings them back."""
        return await call(
            lambda b: b.agentic.consolidate_clusters(
                project,
                dry_run,
                selected_cluster_ids,
                min_similarity,
                min_link_similarity,
                max_clusters,
            )
        )

    @mcp.tool(annotations=PURE_READ)
    async def brain_capabilities() -> dict[str, Any]:
        """Which chat model is live, whether enrichment is LLM or heuristic, the enrichment
        queue (pending, running, done, failed, paused by the token cap), tokens used today,
        fallbacks, the Obsidian mirror's state, the reranker, the storage backend and what
        runs degraded (and why). Never shows keys."""
        return await call(lambda b: b.capabilities())
