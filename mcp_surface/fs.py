"""File tools over sources (full profile): ``fs`` reads and lists the live disk with index
presence and writes with a change journal; ``changes`` reviews the journalled changes
(approve / revert by fingerprint). Each action is also a ``brain fs`` / ``brain changes``
command."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from pydantic import Field

from mcp_surface.actions import check, uses
from mcp_surface.args import Id, Name, PathArg, Text
from mcp_surface.calls import Call
from mcp_surface.lean import DESTRUCTIVE, WRITE, tool
from mcp_surface.tool_errors import CodedToolError

Source = Annotated[Name, Field(min_length=1, description="Source name or id")]
FS_USES = uses(read="path", list="path limit", write="path content")
CHANGE_USES = uses(list="source status limit", preview="change_id",
                   approve="change_id fingerprint", revert="change_id fingerprint")
CHANGE_NEEDS = uses(list="", preview="change_id", approve="change_id fingerprint",
                    revert="change_id fingerprint")


def register(mcp: FastMCP, call: Call) -> None:
    @tool(mcp, WRITE)
    async def fs(
        action: Literal["read", "list", "write"],
        source: Source,
        path: Annotated[PathArg, Field(description="Relative to the source root; list: a "
                                                   "folder, '' the root")] = "",
        content: Text | None = None,
        limit: Annotated[int, Field(ge=1, le=20_000)] = 1000,
    ) -> dict[str, Any]:
        """A source's files on disk: read (with index presence), list a folder, write
        (indexed at once, journalled for changes). Credential files refused; secrets
        redacted."""
        check("fs", fs, locals(), FS_USES, uses(read="path", list="", write="path"))
        if action == "read":
            return await call(lambda s: s.fs.read(source, path))
        if action == "list":
            return await call(lambda s: s.fs.list(source, path, limit))
        if content is None:
            raise CodedToolError("INVALID_ARGUMENT", "fs(action='write') needs content",
                                 {"field": "content", "action": action})
        text = content
        return await call(lambda s: s.fs.write(source, path, text))

    @tool(mcp, DESTRUCTIVE)
    async def changes(
        action: Literal["list", "preview", "approve", "revert"],
        change_id: Annotated[Id | None, Field(min_length=1)] = None,
        fingerprint: Annotated[str | None, Field(
            min_length=1, max_length=64, description="What preview returned")] = None,
        source: Annotated[Name | None, Field(description="list: one source's")] = None,
        status: Literal["pending", "approved", "reverted", "all"] = "pending",
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """Review fs writes: list, preview (disk now, what it wrote and replaced, the
        fingerprint), approve or revert one as previewed."""
        check("changes", changes, locals(), CHANGE_USES, CHANGE_NEEDS)
        cid, fp = change_id or "", fingerprint or ""
        runs = {
            "list": lambda s: s.changes.list(source, status, limit),
            "preview": lambda s: s.changes.preview(cid),
            "approve": lambda s: s.changes.approve(cid, fp),
            "revert": lambda s: s.changes.revert(cid, fp),
        }
        return await call(runs[action])
