"""What the owner serves to the other server processes on its data dir.

Two Unix sockets, both behind the per-election ``owner.token``: the call channel
(``owner.calls.sock``, JSON lines, see owner_rpc.py), where proxies send their tool calls, and
a small HTTP endpoint (``owner.sock``: ``/status`` for ``brain status``, ``/command`` for every
other ``brain`` command (brain/cli/ops.py), ``/ui`` for ``brain ui``, and MCP for a sibling
that speaks it, through :class:`SiblingCalls`). Every call runs as the caller the proxy names,
stamped with its request id, so a resent ``add_memory`` is answered from the note it already
made instead of writing a second one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from anyio.abc import TaskGroup
from fastmcp import FastMCP
from fastmcp.exceptions import ValidationError
from fastmcp.server.auth import TokenVerifier
from fastmcp.server.dependencies import get_http_headers
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp.types import CallToolResult
from starlette.requests import Request
from starlette.responses import JSONResponse

from brain.cli import ops
from brain.errors import BrainError
from brain.process import owner as own
from brain.process.report import report
from brain.trust import paths
from brain.trust.identity import Identity, acting_as
from mcp_surface import owner_rpc
from mcp_surface.args import argument_error
from mcp_surface.calls import BrainHolder, live
from mcp_surface.http_tokens import OwnerTokenVerifier
from mcp_surface.profiles import current_shape
from mcp_surface.tool_errors import CodedToolError

META = "opencode-brain"  # key of our entry in a forwarded request's _meta
CLIENT_HEADER = "x-brain-client-pid"
# Idle connections to the owner's status endpoint are never cut under a waiting request.
SERVER_KEEPALIVE_S = 3600
DEDUPED = frozenset({"add_memory"})  # writes whose request id is checked before a resend


log = logging.getLogger("brain.owner")


@dataclass
class ClientSeen:
    pid: int
    user_id: str = ""
    agent_id: str = ""
    first_seen: str = field(default_factory=own.now_iso)
    last_seen: float = field(default_factory=time.time)
    calls: int = 0


def calls_path(address: str) -> Path:
    """The owner's call channel sits next to its HTTP socket (``owner.sock``)."""
    path = Path(address)
    return path.with_name(f"{path.stem}.calls{path.suffix}")


def _our_meta(context: MiddlewareContext) -> dict[str, Any]:
    ctx = context.fastmcp_context
    meta = ctx.request_context.meta if ctx is not None and ctx.request_context else None
    entry = (meta or {}).get(META) if isinstance(meta, dict) else None
    return entry if isinstance(entry, dict) else {}


class _QuietUvicorn(uvicorn.Server):
    """Uvicorn inside a process that has its own signal handling (the stdio server)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


class OwnerEndpoint:
    """The owner's sibling endpoint and its bookkeeping (which processes call, as whom).

    Every process builds it (:meth:`build`, off the failover path); only the owner serves it
    (:meth:`start`), from the moment it holds the Brain in ``state.brain``."""

    def __init__(
        self,
        home: Path,
        kind: str,
        state: BrainHolder,
        default: Identity,
        make_sibling: Callable[[TokenVerifier], FastMCP],
    ) -> None:
        self.home = home
        self.kind = kind
        self.state = state
        self.default = default
        self.make_sibling = make_sibling
        self.clients: dict[int, ClientSeen] = {}
        self.started = own.now_iso()
        self.verifier = OwnerTokenVerifier()
        self.sock_path: Path | None = None
        self._uv: _QuietUvicorn | None = None
        self._uv_done = anyio.Event()
        self._app: Any = None
        self._sibling: Any = None
        self._calls: owner_rpc.CallServer | None = None
        # ``brain ui`` asking the owner for its web explorer (set by webui/host.attach)
        self.open_ui: Callable[[], Awaitable[dict[str, Any]]] | None = None
        self.jobs = ops.Jobs()  # long ``brain`` commands, followed by the command's process

    # -------------------------------------------------------------- lifecycle
    def build(self) -> None:
        """The sibling server and its HTTP app (built by every process, served by the owner)."""
        sibling = self.make_sibling(self.verifier)
        sibling.add_middleware(SiblingCalls(self))
        self._sibling = sibling
        verifier = self.verifier

        @sibling.custom_route("/status", methods=["GET"])
        async def status(request: Request) -> JSONResponse:
            auth = request.headers.get("authorization", "")
            if not own.same_token(auth.removeprefix("Bearer ").strip(), verifier.token):
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            data = await anyio.to_thread.run_sync(self.status_report)
            return JSONResponse(data)

        async def owner_body(request: Request) -> dict[str, Any] | JSONResponse:
            """The JSON object a ``brain`` command posts, once its owner token is checked; a
            refusal (401, or 400 for a body that is not a JSON object) otherwise."""
            auth = request.headers.get("authorization", "")
            if not own.same_token(auth.removeprefix("Bearer ").strip(), verifier.token):
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            try:
                body = await request.json()
            except ValueError:
                body = None
            if not isinstance(body, dict):
                return JSONResponse({"error": "INVALID_ARGUMENT",
                                     "message": "the body must be a JSON object"}, status_code=400)
            return body

        @sibling.custom_route("/command", methods=["POST"])
        async def command(request: Request) -> JSONResponse:
            """Any ``brain`` command's work (brain/cli/ops.py) while this process owns the data
            dir (owner token only): run on the live Brain in a worker thread, as the caller
            the command names, under the path policy of a local caller (it holds the owner
            token, so it runs as this user on this machine)."""
            body = await owner_body(request)
            if isinstance(body, JSONResponse):
                return body
            return await self.run_command(body)

        @sibling.custom_route("/ui", methods=["POST"])
        async def ui(request: Request) -> JSONResponse:
            """``brain ui`` while this process owns the data dir: the explorer's login URL
            (started now if it is not running; owner token only)."""
            auth = request.headers.get("authorization", "")
            if not own.same_token(auth.removeprefix("Bearer ").strip(), verifier.token):
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            if self.open_ui is None:
                return JSONResponse({"error": "NO_UI", "message": "this owner has no web "
                                     "explorer"}, status_code=404)
            try:
                return JSONResponse(await self.open_ui())
            except BrainError as exc:
                return JSONResponse({"error": exc.code, "message": exc.message},
                                    status_code=409)

        self._app = sibling.http_app(path="/mcp", json_response=True)

    async def start(self, tg: TaskGroup) -> None:
        """Serve both sockets in ``tg`` under a new owner token, then publish the owner info."""
        self.verifier.token = own.new_owner_token(self.home)
        app = self._app
        path = own.socket_path(self.home)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        os.chmod(path, 0o600)
        self.sock_path = path
        self._uv = _QuietUvicorn(
            uvicorn.Config(
                app,
                log_level="warning",
                lifespan="on",
                timeout_graceful_shutdown=2,
                timeout_keep_alive=SERVER_KEEPALIVE_S,
            )
        )
        uv = self._uv

        async def serve() -> None:
            try:
                await uv.serve(sockets=[sock])
            finally:
                self._uv_done.set()

        tg.start_soon(serve)
        while not uv.started:
            await anyio.sleep(0.005)
        verifier = self.verifier
        self._calls = owner_rpc.CallServer(
            calls_path(str(path)), lambda: verifier.token, self._serve_call
        )
        await self._calls.start(tg)
        own.write_info(self.home, own.OwnerInfo(os.getpid(), str(path), self.started, self.kind))

    async def finish(self) -> None:
        """Let in-flight sibling calls finish (up to 3 s), then stop the HTTP endpoint."""
        if self._uv is None:
            return
        self._uv.should_exit = True
        with anyio.move_on_after(3.0):
            while not self._uv_done.is_set():
                await anyio.sleep(0.01)

    async def close(self) -> None:
        if self._calls is not None:
            await self._calls.aclose()
        if self.sock_path is not None:
            with contextlib.suppress(OSError):
                self.sock_path.unlink()

    # -------------------------------------------------------------- commands
    async def run_command(self, body: dict[str, Any]) -> JSONResponse:
        """One ``brain`` command posted to ``/command``: ``{command, args, caller, pid}``."""
        raw_caller, raw_args = body.get("caller"), body.get("args")
        ident: dict[str, Any] = raw_caller if isinstance(raw_caller, dict) else {}
        args: dict[str, Any] | None = raw_args if isinstance(raw_args, dict) else None
        if not ident.get("user_id") or not ident.get("agent_id"):
            return _refused("UNAUTHORIZED", "a command must name its caller (user_id, "
                            "agent_id): update the brain CLI", 401)
        if args is None:
            return _refused("INVALID_ARGUMENT", "args must be a JSON object", 400)
        caller = Identity(str(ident["user_id"]), str(ident["agent_id"]))
        if str(body.get("pid", "")).isdigit():
            self.seen(int(body["pid"]), caller, call=True)
        name = str(body.get("command") or "")

        given = args

        def work() -> Any:
            with acting_as(caller), paths.via(paths.LOCAL):
                return ops.execute(live(self.state), name, given)

        try:
            if name == "job.status":
                data = self.jobs.get(str(args.get("job") or ""), caller)
            elif ops.get(name).background:
                data = self.jobs.start(name, work, caller)
            else:
                data = await anyio.to_thread.run_sync(work)
        except BrainError as exc:
            return _refused(exc.code, exc.message, 409, exc.details)
        except Exception as exc:  # noqa: BLE001 - the command's process gets one clear line
            log.exception("brain command %s failed", name)
            return _refused("BRAIN_ERROR", f"{name} failed in the server: "
                            f"{type(exc).__name__}: {exc}; details in its brain.log", 500)
        return JSONResponse({"result": data})

    # -------------------------------------------------------------- calls
    async def _serve_call(self, frame: dict[str, Any], pid: int) -> dict[str, Any]:
        """Run one call sent over the call channel, as its caller, stamped with its request
        id; a resent add_memory whose note exists is answered from that note. A refused call
        is answered with its structured error result, as the proxy's own client gets it."""
        try:
            res = await self._run_call(frame, pid)
        except ValidationError as exc:  # the proxy forwards unchecked arguments: type them here
            res = argument_error(exc).result()
        except CodedToolError as exc:
            res = exc.result()
        wire = CallToolResult(
            content=res.content, structured_content=res.structured_content, is_error=res.is_error
        )
        return wire.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def _run_call(self, frame: dict[str, Any], pid: int) -> ToolResult:
        ident = frame.get("caller") or {}
        if not ident.get("user_id") or not ident.get("agent_id"):
            raise CodedToolError("UNAUTHORIZED", "a forwarded call must name its caller")
        caller = Identity(str(ident["user_id"]), str(ident["agent_id"]))
        self.seen(pid, caller, call=True)
        # scripts and hooks call here directly, maybe in an earlier release's shape
        name, args = current_shape(str(frame["name"]), dict(frame.get("args") or {}))
        request_id = str(frame.get("request_id") or "")
        res: ToolResult | None = None
        if frame.get("retry") and request_id and name in DEDUPED:
            res = await self._deduplicated(request_id)
        if res is None:
            token = own.current_request.set(request_id or None)
            try:
                # The proxy's transport decides the path policy; unmarked is the strict one.
                with acting_as(caller), paths.via(str(frame.get("transport") or paths.HTTP)):
                    res = await self._sibling.call_tool(name, args, run_middleware=False)
            finally:
                own.current_request.reset(token)
        return res

    async def _deduplicated(self, request_id: str) -> ToolResult | None:
        brain = live(self.state)
        done = await anyio.to_thread.run_sync(lambda: own.find_request(brain, request_id))
        if done is None:
            return None
        return ToolResult(
            structured_content={
                "note": brain.memory.public(done),
                "linked": [],
                "redacted": [],
                "deduplicated": True,
            }
        )

    async def run_tracked(
        self,
        context: MiddlewareContext,
        call_next: CallNext[Any, Any],
        caller: Identity,
        request_id: str,
        retry: bool,
    ) -> Any:
        """Run a call for ``caller`` here; a resent write whose note exists is not redone."""
        if retry and request_id and context.message.name in DEDUPED:
            done = await self._deduplicated(request_id)
            if done is not None:
                return done
        token = own.current_request.set(request_id or None)
        try:
            with acting_as(caller):
                return await call_next(context)
        finally:
            own.current_request.reset(token)

    # -------------------------------------------------------------- bookkeeping
    def seen(self, pid: int, ident: Identity | None = None, call: bool = False) -> None:
        c = self.clients.get(pid) or self.clients.setdefault(pid, ClientSeen(pid))
        c.last_seen = time.time()
        if ident is not None:
            c.user_id, c.agent_id = ident.user_id, ident.agent_id
        c.calls += int(call)

    def status_report(self) -> dict[str, Any]:
        clients = [
            {
                "pid": os.getpid(),
                "kind": f"{self.kind} (owner)",
                "agent_id": self.default.agent_id,
                "user_id": self.default.user_id,
            }
        ]
        for c in list(self.clients.values()):
            if own.pid_alive(c.pid) and c.pid != os.getpid():
                clients.append(
                    {
                        "pid": c.pid,
                        "kind": "proxy",
                        "agent_id": c.agent_id,
                        "user_id": c.user_id,
                        "calls": c.calls,
                        "since": c.first_seen,
                    }
                )
        info = own.OwnerInfo(os.getpid(), str(self.sock_path or ""), self.started, self.kind)
        return report(live(self.state), info, clients)


def _refused(code: str, message: str, status: int,
             details: dict[str, Any] | None = None) -> JSONResponse:
    return JSONResponse({"error": code, "message": message,
                         "details": ops.plain(details or {})}, status_code=status)


class SiblingCalls(Middleware):
    """Owner's sibling endpoint: act as the forwarding process's caller, stamp its request
    id on new notes, and answer a resent write from the note it already made."""

    def __init__(self, endpoint: OwnerEndpoint) -> None:
        self.endpoint = endpoint

    async def on_request(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        pid = get_http_headers(include={CLIENT_HEADER}).get(CLIENT_HEADER, "")
        if pid.isdigit():
            self.endpoint.seen(int(pid))
        return await call_next(context)

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        meta = _our_meta(context)
        ident = meta.get("identity") or {}
        if not ident.get("user_id") or not ident.get("agent_id"):
            raise CodedToolError("UNAUTHORIZED", "a forwarded call must name its caller")
        caller = Identity(str(ident["user_id"]), str(ident["agent_id"]))
        if str(meta.get("pid", "")).isdigit():
            self.endpoint.seen(int(meta["pid"]), caller, call=True)
        with paths.via(str(meta.get("transport") or paths.HTTP)):  # unmarked: the strict one
            return await self.endpoint.run_tracked(
                context,
                call_next,
                caller,
                str(meta.get("request_id") or ""),
                bool(meta.get("retry")),
            )
