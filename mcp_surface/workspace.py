"""``[sources] workspace = auto``: the client's workspace becomes a source on first use.

On the first tool call of a stdio session, :class:`Workspace` asks the client for its MCP
roots (Claude Code and OpenCode announce the folder they were started in; the Inspector
announces none), or, failing that, takes the git work tree the server was started in
(brain/sources/workspace.py decides which folders qualify). Each becomes a source of the
call's project (else the folder's name, as the hooks name it) through the ``sources``
tool's ``workspace`` action, sent down the same chain as the call itself: a proxy forwards
it to the owner like any call, and the owner adds it within the caller's allowed roots. A
refusal (a folder outside the policy) is logged and the call goes on as before.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

from fastmcp import Context
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from mcp.server.session import ServerSession
from mcp.types import CallToolRequestParams

from brain import projects
from brain.sources import workspace

log = logging.getLogger(__name__)


class Workspace(Middleware):
    """Registers the client's workspace on the server's first tool call: a stdio server has
    one client (never an HTTP server: its callers' roots name another machine's folders)."""

    def __init__(self, mode: str, start_dir: str | None) -> None:
        self.mode = mode
        self.start_dir = start_dir  # the stdio server's start folder; None: no fallback
        self._done = mode != "auto"

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        if not self._done:
            self._done = True
            await self._register(context, call_next, _session(context.fastmcp_context))
        return await call_next(context)

    async def _register(self, context: MiddlewareContext, call_next: CallNext[Any, Any],
                        session: ServerSession | None) -> None:
        folders = workspace.from_roots(await _roots(session))
        if not folders and self.start_dir:
            top = workspace.git_top(self.start_dir)
            folders = [top] if top else []
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
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated in the 2026 protocol
            found = await session.list_roots()
    except Exception as exc:  # noqa: BLE001 - a client that cannot answer has no roots
        log.info("workspace.roots_failed error=%s", exc)
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
