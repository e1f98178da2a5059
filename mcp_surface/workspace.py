"""``[sources] workspace = auto``: the client's workspace becomes a source on first use.

On the first tool call of a stdio session, :class:`Workspace` asks the client for its MCP
roots (Claude Code and OpenCode announce the folder they were started in; the Inspector
announces none), or, failing that, takes the git work tree the server was started in
(brain/sources/workspace.py decides which folders qualify). Each becomes a source of the
call's project (else the folder's name, as the hooks name it) through the ``sources``
tool's ``workspace`` action, sent down the same chain as the call itself: a proxy forwards
it to the owner like any call, and the owner adds it within the caller's allowed roots. A
refusal (a folder outside the policy) is logged and the call goes on as before.

``[memory] workspace_project`` (on by default): the first of those folders also names the
project of every note tool call that names none (:data:`NAMED_BY_WORKSPACE`), as the hooks
name it, so the agent's own notes and searches meet what the hooks captured there.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

import anyio
from fastmcp import Context
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from mcp.server.session import ServerSession
from mcp.types import CallToolRequestParams

from brain import projects
from brain.sources import workspace

log = logging.getLogger(__name__)


ROOTS_TIMEOUT_S = 5.0  # a client that announces roots but never lists them has none

# The tools whose missing project means "the default project" (not "every project", as for
# fs_search, get_inbox or health, nor "the failure's", as for record_resolution): a stdio
# call to one of them that names no project works on the client's workspace project.
NAMED_BY_WORKSPACE = frozenset({
    "add_memory", "search_memory", "deep_search", "preflight_check", "open_session",
    "get_session_context", "close_session", "record_failure", "consolidate_clusters",
})


class Workspace(Middleware):
    """Registers the client's workspace on the server's first tool call (``mode`` auto), and
    with ``name_project`` fills the project of a call to a note tool that names none with
    the workspace's, the name the hooks give it (brain/projects.py): what the agent writes
    and what the hooks capture and brief then share one project. A stdio server has one
    client (never an HTTP server: its callers' roots name another machine's folders)."""

    def __init__(self, mode: str, start_dir: str | None, name_project: bool = False) -> None:
        self.mode = mode
        self.start_dir = start_dir  # the stdio server's start folder; None: no fallback
        self.name_project = name_project
        self.project: str | None = None  # the workspace's, once known
        self._done = mode != "auto" and not name_project
        self._first = anyio.Lock()  # calls racing the first one wait for the workspace

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        if not self._done:
            async with self._first:
                if not self._done:
                    await self._resolve(context, call_next)
                    self._done = True
        args = context.message.arguments or {}
        if (self.project and context.message.name in NAMED_BY_WORKSPACE
                and not args.get("project")):
            context = context.copy(message=CallToolRequestParams(
                name=context.message.name, arguments={**args, "project": self.project}))
        return await call_next(context)

    async def _resolve(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> None:
        folders = workspace.from_roots(await _roots(_session(context.fastmcp_context)))
        if not folders and self.start_dir:
            top = workspace.git_top(self.start_dir)
            folders = [top] if top else []
        if self.name_project and folders:
            self.project = _project_name(folders[0])
            log.info("workspace.project folder=%s project=%s", folders[0], self.project)
        if self.mode == "auto":
            await self._register(context, call_next, folders)

    async def _register(self, context: MiddlewareContext, call_next: CallNext[Any, Any],
                        folders: list[str]) -> None:
        args = context.message.arguments or {}
        for folder in folders:
            project = args.get("project") if isinstance(args.get("project"), str) else None
            message = CallToolRequestParams(name="sources", arguments={
                "action": "workspace", "path": folder,
                "project": project or _project_name(folder)})
            try:
                res = await call_next(context.copy(message=message))
                log.info("workspace.source folder=%s result=%s", folder,
                         getattr(res, "structured_content", None))
            except Exception as exc:  # noqa: BLE001 - the client's own call must go on
                log.info("workspace.skipped folder=%s reason=%s", folder, exc)


def _session(ctx: Context | None) -> ServerSession | None:
    try:
        return ctx.session if ctx is not None else None
    except (RuntimeError, AttributeError):
        return None


async def _roots(session: ServerSession | None) -> list[str]:
    """The client's ``file://`` roots, [] when it announces no roots capability. Only a
    handshake-era session (protocol up to 2025-11-25, as Claude Code and OpenCode speak) can
    be asked; a 2026 one has no channel for it and gets the start folder's fallback."""
    if session is None:
        return []
    params = getattr(session, "client_params", None)
    caps = getattr(params, "capabilities", None)
    if caps is None or getattr(caps, "roots", None) is None:
        return []
    found = None
    try:
        with warnings.catch_warnings(), anyio.move_on_after(ROOTS_TIMEOUT_S):
            warnings.simplefilter("ignore")  # roots are deprecated in the 2026 protocol
            found = await session.list_roots()
    except Exception as exc:  # noqa: BLE001 - a client that cannot answer has no roots
        log.info("workspace.roots_failed error=%s", exc)
        return []
    if found is None:  # the client's own first call waits on this: never for long
        log.info("workspace.roots_failed error=no answer in %.0f s", ROOTS_TIMEOUT_S)
        return []
    return [str(r.uri) for r in found.roots]


def _project_name(folder: str) -> str:
    """The folder's project as the hooks name it (brain/projects.py)."""
    return projects.of_folder(folder)


def start_dir() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None
