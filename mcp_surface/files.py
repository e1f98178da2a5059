"""Brain files: ``search_files`` over uploaded documents (core), and the ``files`` tool (full
profile) that uploads (PDF, DOCX, HTML, Markdown, text), lists, reprocesses and deletes them,
each action also a ``brain ingest`` / ``brain files`` command."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from pydantic import Field

from brain.files.service import MAX_SEARCH_LIMIT, clamp_limit
from brain.notes import Visibility
from mcp_surface import outputs as out
from mcp_surface.actions import check, uses
from mcp_surface.args import Detail, Id, OptFileName, OptPath, OptProject, Query, Similarity
from mcp_surface.calls import Call, Services
from mcp_surface.lean import DESTRUCTIVE, PURE_READ, tool

USES = uses(ingest="path project visibility", list="status", get="file_id",
            reprocess="file_id", delete="file_id")
NEEDS = uses(ingest="path", get="file_id", reprocess="file_id", delete="file_id")


def register(mcp: FastMCP, call: Call) -> None:
    @tool(mcp, PURE_READ, out.PASSAGES)
    async def search_files(
        query: Query,
        limit: Annotated[int | None, Field(ge=1, le=10_000,
                                           description=f"10; clamped to {MAX_SEARCH_LIMIT}")
                         ] = None,
        file_name: OptFileName = None,
        threshold: Similarity | None = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Search uploaded documents: passages with file, page and text. A clear single
        answer comes alone unless limit is given."""
        used, note = clamp_limit(limit or 10)

        def run(s: Services) -> dict[str, Any]:
            hits = s.files.search(query, used, file_name, threshold)
            out: dict[str, Any] = {"results": hits, "count": len(hits)}
            if note:
                out["limit"], out["note"] = used, note
            return s.pages.search(out, detail, explicit=limit is not None, passages=True,
                                  query=query)

        return await call(run)

    @tool(mcp, DESTRUCTIVE)
    async def files(
        action: Literal["ingest", "list", "get", "reprocess", "delete"],
        path: Annotated[OptPath, Field(description="ingest: a document on this machine")] = None,
        file_id: Annotated[Id | None, Field(min_length=1)] = None,
        project: OptProject = None,
        visibility: Visibility = "shared",
        status: Literal["processing", "ready", "failed"] | None = None,
    ) -> dict[str, Any]:
        """Uploaded documents: ingest (at most 50 MB; poll get until ready), list, get,
        reprocess (re-chunk, re-embed), delete."""
        check("files", files, locals(), USES, NEEDS)
        if action == "list":
            found = await call(lambda s: s.files.list(status))
            return {"files": found, "count": len(found)}
        fid, where = file_id or "", path or ""
        runs = {
            "ingest": lambda s: s.files.ingest(where, project, visibility),
            "get": lambda s: s.files.get(fid),
            "reprocess": lambda s: s.files.reprocess(fid),
            "delete": lambda s: s.files.delete(fid),
        }
        return await call(runs[action])
