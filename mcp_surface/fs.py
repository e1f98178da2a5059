"""File tools over sources: read and list the live disk with index presence, write with a
change journal, and review the journalled changes (approve / revert by fingerprint)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.types import ToolAnnotations
from pydantic import Field

from mcp_surface.args import Id, Name, PathArg, Text

WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)
PURE_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

Source = Annotated[Name, Field(min_length=1, description="Source name or id (see list_sources)")]
FilePath = Annotated[PathArg, Field(min_length=1, description="File path relative to the source "
                                                              "root (or absolute inside it)")]
ChangeId = Annotated[Id, Field(min_length=1, description="Change id (see list_changes)")]
Fingerprint = Annotated[str, Field(min_length=1, max_length=64,
                                   description="The fingerprint preview_change returned")]


def register(mcp: Any, call: Any) -> None:
    @mcp.tool(annotations=PURE_READ)
    async def fs_read(source: Source, path: FilePath) -> dict[str, Any]:
        """Read a file of a source from the disk (even before it is indexed), with its index
        presence: synced, unindexed, stale_indexed (changed or gone on disk) or brain (only
        the index has it). Credential files are refused; secrets in content are redacted."""
        return await call(lambda b: b.fs.read(source, path))

    @mcp.tool(annotations=PURE_READ)
    async def fs_list(
        source: Source,
        folder: Annotated[PathArg, Field(description="Folder inside the source; '' the root")] = "",
        limit: Annotated[int, Field(ge=1, le=20_000, description="Entries at most")] = 1000,
    ) -> dict[str, Any]:
        """List a folder of a source from the disk, each file with its index presence; files
        only the index still holds are listed too. Filtered like a sync (no credential file)."""
        return await call(lambda b: b.fs.list(source, folder, limit))

    @mcp.tool(annotations=WRITE)
    async def fs_write(source: Source, path: FilePath, content: Text) -> dict[str, Any]:
        """Write a text file inside a source. It is indexed before the call returns and the
        change is journalled with the content it replaced (see list_changes). Secrets in
        content are redacted; credential files and excluded paths are refused."""
        return await call(lambda b: b.fs.write(source, path, content))

    @mcp.tool(annotations=PURE_READ)
    async def list_changes(
        source: Annotated[Name | None, Field(description="Changes of one source")] = None,
        status: Literal["pending", "approved", "reverted", "all"] = "pending",
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """Changes fs_write made, from the durable journal (still listed when the index is
        down), each with whether the index holds what it wrote."""
        return await call(lambda b: b.changes.list(source, status, limit))

    @mcp.tool(annotations=PURE_READ)
    async def preview_change(change_id: ChangeId) -> dict[str, Any]:
        """Review a change: the bytes on disk now, the snapshot it wrote and the baseline it
        replaced, plus the fingerprint approve_change / revert_change need."""
        return await call(lambda b: b.changes.preview(change_id))

    @mcp.tool(annotations=WRITE)
    async def approve_change(change_id: ChangeId, fingerprint: Fingerprint) -> dict[str, Any]:
        """Accept a change as previewed; refused (CHANGE_CONFLICT) if it moved on since."""
        return await call(lambda b: b.changes.approve(change_id, fingerprint))

    @mcp.tool(annotations=DESTRUCTIVE)
    async def revert_change(change_id: ChangeId, fingerprint: Fingerprint) -> dict[str, Any]:
        """Put back what a change replaced (or remove the file it created) and re-index it.
        Refused when it moved on since the preview, when the baseline was not kept, or
        when the path now holds other content."""
        return await call(lambda b: b.changes.revert(change_id, fingerprint))
