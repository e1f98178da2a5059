"""Agentic memory tools: multi-hop deep search, cluster consolidation, capabilities."""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import FastMCP
from pydantic import Field

from mcp_surface import outputs as out
from mcp_surface.args import Detail, Ids, Query, WorkProject
from mcp_surface.calls import Call, Services
from mcp_surface.lean import DESTRUCTIVE, PURE_READ, READ, tool
from mcp_surface.recall import RecallFilters, recall_filter, with_project_hint

Similarity = Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)]



def register(mcp: FastMCP, call: Call) -> None:
    @tool(mcp, READ, out.DEEP)
    async def deep_search(
        query: Query,
        project: WorkProject = None,
        hops: Annotated[int, Field(ge=0, le=4)] = 2,
        top_k: Annotated[int | None, Field(ge=1, le=100)] = None,
        filters: RecallFilters | None = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Multi-hop search for why/how questions: searches, follows links, searches
        again. A clear single answer comes alone unless top_k is given (10)."""

        def run(s: Services) -> dict[str, Any]:
            rf = recall_filter(project, filters)
            result = s.agentic.deep_search(query, rf, hops, top_k or 10)
            page = s.pages.search(result, detail, explicit=top_k is not None)
            return with_project_hint(s, rf, page)

        return await call(run)

    @tool(mcp, DESTRUCTIVE, out.CLUSTERS)
    async def consolidate_clusters(
        project: WorkProject = None,
        dry_run: bool = True,
        selected_cluster_ids: Ids = None,
        min_similarity: Similarity = 0.9,
        min_link_similarity: Similarity = 0.75,
        max_clusters: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> dict[str, Any]:
        """Merge near-duplicate notes: dry run first, then dry_run=false with cluster ids
        (originals archived)."""
        return await call(
            lambda s: s.agentic.consolidate_clusters(
                project,
                dry_run,
                selected_cluster_ids,
                min_similarity,
                min_link_similarity,
                max_clusters,
            )
        )

    @tool(mcp, PURE_READ)
    async def brain_capabilities() -> dict[str, Any]:
        """Chat model, enrichment mode and queue, token use, reranker, storage, and what runs
        degraded and why. Never shows keys."""
        return await call(lambda s: s.capabilities())
