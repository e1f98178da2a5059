"""Brain files tools: upload documents (PDF, DOCX, HTML, Markdown, text) and search them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.types import ToolAnnotations
from pydantic import Field

from brain.embed_credential import search_warnings
from brain.files.service import MAX_SEARCH_LIMIT, clamp_limit
from brain.presentation import present, search_page
from mcp_surface.args import Detail, Id, OptFileName, OptProject, PathArg, Query, Similarity

WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)
PURE_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

FileId = Annotated[Id, Field(min_length=1, description="File id from ingest_file/list_files")]


def register(mcp: Any, call: Any) -> None:
    @mcp.tool(annotations=WRITE)
    async def ingest_file(
        path: Annotated[PathArg, Field(min_length=1, description="Path of a document on this machine")],
        project: Annotated[OptProject, Field(description="Project to file it under")] = None,
        visibility: Annotated[Literal["shared", "private"], Field(
            description="shared: every agent of your user finds it; private: only this agent"
        )] = "shared",
    ) -> dict[str, Any]:
        """Upload a document (PDF, DOCX, HTML, Markdown, text; at most 50 MB) so its passages
        can be searched with search_files. Returns at once with status 'processing'; poll
        get_file until 'ready' (or 'failed' with a reason). The same bytes uploaded again
        return the existing record with deduped=true."""
        return await call(lambda b: b.files.ingest(path, project, visibility))

    @mcp.tool(annotations=PURE_READ)
    async def search_files(
        query: Annotated[Query, Field(description="What to look for, in words")],
        limit: Annotated[int | None, Field(
            ge=1, le=10_000,
            description=f"How many passages to return (10; above {MAX_SEARCH_LIMIT}: clamped)"
        )] = None,
        file_name: Annotated[OptFileName, Field(description="Only this exact file name")] = None,
        threshold: Annotated[Similarity | None, Field(
            description="Optional minimum cosine similarity of a passage (default: none)"
        )] = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Search uploaded documents by meaning and keywords (hybrid dense + BM25, the same
        ranking as search_memory and fs_search): passages of ready files, best first, each
        with file, chunk index, page (PDFs), score, similarity and the passage text to quote.
        The best match is always returned; weaker ones are dropped only below the relative
        floor (retrieval.relative_floor x the best score; 0 = none). A limit above
        the maximum is clamped and the result says so in 'note'. Excerpts are cut to a
        snippet (memory.snippet_chars) unless detail="full". A clear single answer comes
        alone unless limit is given (answer, more_hits as in search_memory)."""
        used, note = clamp_limit(limit or 10)

        def run(b: Any) -> dict[str, Any]:
            hits = b.files.search(query, used, file_name, threshold)
            out: dict[str, Any] = {"results": hits, "count": len(hits)}
            if note:
                out["limit"], out["note"] = used, note
            out = search_page(out, b.settings.memory.relevance_band, explicit=limit is not None,
                              warnings=search_warnings(b.embedder))
            return present(out, detail, b.settings.memory.snippet_chars, passages=True,
                           query=query)

        return await call(run)

    @mcp.tool(annotations=PURE_READ)
    async def list_files(
        status: Literal["processing", "ready", "failed"] | None = None,
    ) -> dict[str, Any]:
        """List uploaded documents with their status, chunk count and failure reason."""
        files = await call(lambda b: b.files.list(status))
        return {"files": files, "count": len(files)}

    @mcp.tool(annotations=PURE_READ)
    async def get_file(file_id: FileId) -> dict[str, Any]:
        """Status of one uploaded document: processing, ready (with chunks_count) or failed
        (with a reason)."""
        return await call(lambda b: b.files.get(file_id))

    @mcp.tool(annotations=WRITE)
    async def reprocess_file(file_id: FileId) -> dict[str, Any]:
        """Re-chunk and re-embed a document from its stored, redacted text (re-parsed from
        its bytes only when files.keep_raw kept them), after a chunk-size or model change.
        Its old passages are dropped first. A failed upload is retried by uploading again."""
        return await call(lambda b: b.files.reprocess(file_id))

    @mcp.tool(annotations=DESTRUCTIVE)
    async def delete_file(file_id: FileId) -> dict[str, Any]:
        """Delete an uploaded document: its record, its passages and its stored text."""
        return await call(lambda b: b.files.delete(file_id))
