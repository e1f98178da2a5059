"""Many servers, one brain: owner election, forwarding to the owner, HTTP tokens, identity.

Every server process (stdio or ``--http``) on a data dir runs a :class:`Router`. The first to
take ``<home>/owner.lock`` is the *owner*: it opens the Brain (so hooks, watchers and workers
run once per data dir), serves its own client locally, and serves the same tools to sibling
processes on a Unix socket (streamable HTTP, bearer ``owner.token``). The others are thin
proxies: :class:`Forwarder` sends each ``tools/call`` (name, arguments, caller identity and a
request id) to the owner over one kept-open fastmcp Client. A monitor polls the lock; when
the owner dies, one proxy takes the lock, opens the Brain and becomes the owner, and the rest
reconnect to it. A call cut off by the owner's death is retried only when that cannot
duplicate work: reads, and ``add_memory``, whose note carries the request id checked first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn
from fastmcp import Client, FastMCP
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError
from fastmcp.server.auth import TokenVerifier
from fastmcp.server.auth.auth import AccessToken
from fastmcp.server.dependencies import get_access_token, get_http_headers
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from starlette.requests import Request
from starlette.responses import JSONResponse

from brain import owner as own
from brain.app import Brain
from brain.errors import StoreLocked
from brain.identity import Identity, acting_as
from brain.identity import current as current_identity
from brain.notes import public_note
from config import Settings

log = logging.getLogger("brain.routing")
logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per forwarded call otherwise

META = "opencode-brain"  # key of our entry in a forwarded request's _meta
CLIENT_HEADER = "x-brain-client-pid"
WAIT_S = 30.0  # how long a proxied call waits for an owner before giving up
POLL_S = 0.05  # monitor period: how fast a dead owner is noticed
# Tools a proxy may resend after the owner died mid-call: reads (a repeated search only
# stamps access again) and add_memory (its request id is checked before writing again).
RETRY_SAFE = frozenset({"search_memory", "get_related", "brain_stats", "add_memory"})
DEDUPED = frozenset({"add_memory"})


# ------------------------------------------------------------------------------ tokens
class HttpTokenVerifier(TokenVerifier):
    """``brain serve --http``: the home token acts as the configured identity; tokens in
    ``tokens.json`` (stored as digests) each act as their own user/agent."""

    def __init__(self, home: Path, default: Identity) -> None:
        super().__init__()
        self.home = Path(home)
        self.default = default
        self.token, self.token_path, self.created = own.http_token(self.home)
        self._tokens: dict[str, Identity] = {}
        self._mtime = -1.0

    def _identities(self) -> dict[str, Identity]:
        path = self.home / own.TOKENS_FILE
        mtime = path.stat().st_mtime if path.exists() else 0.0
        if mtime != self._mtime:
            self._tokens, self._mtime = own.load_tokens(self.home), mtime
        return self._tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        if own.same_token(token, self.token):
            ident = self.default
        else:
            ident = self._identities().get(own.token_digest(token or ""))
            if ident is None:
                return None
        return AccessToken(
            token=token,
            client_id=ident.agent_id,
            scopes=[],
            claims={"user_id": ident.user_id, "agent_id": ident.agent_id},
        )


class OwnerTokenVerifier(TokenVerifier):
    """The owner's sibling endpoint: only holders of ``owner.token`` (same OS user)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if not own.same_token(token, self.token):
            return None
        return AccessToken(token=token, client_id="sibling", scopes=[], claims={"sibling": True})


class TokenIdentity(Middleware):
    """HTTP front: every call acts as the identity its bearer token maps to."""

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        token = get_access_token()
        claims = token.claims if token is not None else {}
        if not claims.get("user_id"):
            raise ToolError("[UNAUTHORIZED] this call carries no caller identity")
        with acting_as(Identity(claims["user_id"], claims["agent_id"])):
            return await call_next(context)


# ------------------------------------------------------------------------------ owner side
@dataclass
class ClientSeen:
    pid: int
    user_id: str = ""
    agent_id: str = ""
    first_seen: str = field(default_factory=own.now_iso)
    last_seen: float = field(default_factory=time.time)
    calls: int = 0


def _our_meta(context: MiddlewareContext) -> dict[str, Any]:
    ctx = context.fastmcp_context
    meta = ctx.request_context.meta if ctx is not None and ctx.request_context else None
    entry = (meta or {}).get(META) if isinstance(meta, dict) else None
    return entry if isinstance(entry, dict) else {}


class SiblingCalls(Middleware):
    """Owner's sibling endpoint: act as the forwarding process's caller, stamp its request
    id on new notes, and answer a resent write from the note it already made."""

    def __init__(self, router: Router) -> None:
        self.router = router

    async def on_request(self, context: MiddlewareContext, call_next: Any) -> Any:
        pid = get_http_headers(include={CLIENT_HEADER}).get(CLIENT_HEADER, "")
        if pid.isdigit():
            self.router.seen(int(pid))
        return await call_next(context)

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        meta = _our_meta(context)
        ident = meta.get("identity") or {}
        if not ident.get("user_id") or not ident.get("agent_id"):
            raise ToolError("[UNAUTHORIZED] a forwarded call must name its caller")
        caller = Identity(str(ident["user_id"]), str(ident["agent_id"]))
        if str(meta.get("pid", "")).isdigit():
            self.router.seen(int(meta["pid"]), caller, call=True)
        return await self.router.run_tracked(
            context, call_next, caller, str(meta.get("request_id") or ""), bool(meta.get("retry"))
        )


class _QuietUvicorn(uvicorn.Server):
    """Uvicorn inside a process that has its own signal handling (the stdio server)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


# ------------------------------------------------------------------------------ proxy side
class _OwnerLost(Exception):
    def __init__(self, maybe_reached: bool) -> None:
        super().__init__("owner lost")
        self.maybe_reached = maybe_reached


@dataclass
class _Link:
    """One connection to one owner (a generation); replaced when that owner goes away."""

    info: own.OwnerInfo
    token: str
    ready: anyio.Event = field(default_factory=anyio.Event)
    lost: anyio.Event = field(default_factory=anyio.Event)
    client: Client | None = None


def _uds_factory(path: str) -> Callable[..., httpx2.AsyncClient]:
    def factory(
        headers: Any = None, timeout: Any = None, auth: Any = None, **_: Any
    ) -> httpx2.AsyncClient:
        # Unbounded pool, no pool timeout: a busy owner queues calls; it must not time out
        # a waiting connection (that would tear the whole session down).
        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=64)
        return httpx2.AsyncClient(
            transport=httpx2.AsyncHTTPTransport(uds=path, limits=limits),
            headers=headers,
            auth=auth,
            follow_redirects=True,
            timeout=httpx2.Timeout(30.0, read=None, pool=None),
        )

    return factory


class Router:
    """Owner election and call routing for one server process on one data dir."""

    def __init__(
        self,
        settings: Settings,
        state: Any,
        front: FastMCP,
        make_sibling: Callable[[Brain, TokenVerifier], FastMCP],
        kind: str = "stdio",
    ) -> None:
        self.settings = settings
        self.home = Path(settings.home)
        self.state = state
        self.front = front
        self.make_sibling = make_sibling
        self.kind = kind
        self.lock = own.OwnerLock(self.home)
        self.local = False
        self.clients: dict[int, ClientSeen] = {}
        self.started = own.now_iso()
        self._link: _Link | None = None
        self._connect_lock = anyio.Lock()
        self._tg: Any = None
        self._uv: _QuietUvicorn | None = None
        self._uv_done = anyio.Event()
        self._sock_path: Path | None = None
        self.default = Identity(settings.identity.user_id, settings.identity.agent_id)

    # -------------------------------------------------------------- lifecycle
    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Router]:
        # fastmcp exits a lifespan inside its own shielded scope, so the router's task group
        # lives in a task of its own rather than across this context manager's yield.
        ready, stop = anyio.Event(), anyio.Event()
        task = asyncio.ensure_future(self._main(ready, stop))
        waiter = asyncio.ensure_future(ready.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            task.result()  # startup failed: raise it
        try:
            yield self
        finally:
            stop.set()
            await task

    async def _main(self, ready: anyio.Event, stop: anyio.Event) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                if self.lock.try_acquire():
                    await self._promote()
                else:
                    tg.start_soon(self._monitor)
                ready.set()
                await stop.wait()
                if self._uv is not None:  # finish in-flight sibling calls, then close
                    self._uv.should_exit = True
                    with anyio.move_on_after(3.0):
                        while not self._uv_done.is_set():
                            await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._shutdown()

    async def _promote(self) -> None:
        """Become the owner: open the Brain, then serve siblings on the Unix socket."""
        brain = await anyio.to_thread.run_sync(self._open_brain)
        own.install_request_stamping(brain)
        own.record_open(self.home, self.kind)
        self.state.brain = brain
        self.local = True
        if self._link is not None:
            self._link.lost.set()
        await self._start_endpoint(brain)
        log.info("pid %s owns %s; siblings connect at %s", os.getpid(), self.home, self._sock_path)

    def _open_brain(self) -> Brain:
        deadline = time.monotonic() + 10
        while True:  # the previous owner's shard lock goes with its process, give it a moment
            try:
                return Brain(self.settings).open()
            except StoreLocked:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    async def _start_endpoint(self, brain: Brain) -> None:
        token = own.new_owner_token(self.home)
        sibling = self.make_sibling(brain, OwnerTokenVerifier(token))
        sibling.add_middleware(SiblingCalls(self))

        @sibling.custom_route("/status", methods=["GET"])
        async def status(request: Request) -> JSONResponse:
            auth = request.headers.get("authorization", "")
            if not own.same_token(auth.removeprefix("Bearer ").strip(), token):
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            report = await anyio.to_thread.run_sync(self.status_report)
            return JSONResponse(report)

        app = sibling.http_app(path="/mcp", json_response=True)
        path = own.socket_path(self.home)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        os.chmod(path, 0o600)
        self._sock_path = path
        self._uv = _QuietUvicorn(
            uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
        )
        uv = self._uv

        async def serve() -> None:
            try:
                await uv.serve(sockets=[sock])
            finally:
                self._uv_done.set()

        self._tg.start_soon(serve)
        while not uv.started:
            await anyio.sleep(0.005)
        own.write_info(self.home, own.OwnerInfo(os.getpid(), str(path), self.started, self.kind))

    async def _shutdown(self) -> None:
        if self._link is not None:
            self._link.lost.set()
        brain = self.state.brain if self.local else None
        if brain is not None:
            own.clear_info(self.home, os.getpid())
            await anyio.to_thread.run_sync(brain.close)
            self.state.brain = None
        if self._sock_path is not None:
            with contextlib.suppress(OSError):
                self._sock_path.unlink()
        self.lock.release()

    # -------------------------------------------------------------- owner bookkeeping
    def seen(self, pid: int, ident: Identity | None = None, call: bool = False) -> None:
        c = self.clients.get(pid) or self.clients.setdefault(pid, ClientSeen(pid))
        c.last_seen = time.time()
        if ident is not None:
            c.user_id, c.agent_id = ident.user_id, ident.agent_id
        c.calls += int(call)

    def status_report(self) -> dict[str, Any]:
        from brain.cli_owner import report

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
        info = own.OwnerInfo(os.getpid(), str(self._sock_path or ""), self.started, self.kind)
        return report(self.state.brain, info, clients)

    async def run_tracked(
        self,
        context: MiddlewareContext,
        call_next: Any,
        caller: Identity,
        request_id: str,
        retry: bool,
    ) -> Any:
        """Run a call for ``caller`` here; a resent write whose note exists is not redone."""
        name = context.message.name
        if retry and request_id and name in DEDUPED:
            brain = self.state.brain
            done = await anyio.to_thread.run_sync(lambda: own.find_request(brain, request_id))
            if done is not None:
                return ToolResult(
                    structured_content={
                        "note": public_note(done),
                        "linked": [],
                        "redacted": [],
                        "deduplicated": True,
                    }
                )
        token = own.current_request.set(request_id or None)
        try:
            with acting_as(caller):
                return await call_next(context)
        finally:
            own.current_request.reset(token)

    # -------------------------------------------------------------- proxy side
    async def _monitor(self) -> None:
        """Take the lock the moment the owner dies; drop links to owners that are gone."""
        while not self.local:
            if self.lock.try_acquire():
                if self._link is not None:  # calls in flight go to the retry path now
                    self._link.lost.set()
                try:
                    await self._promote()
                except BaseException:
                    self.lock.release()
                    raise
                return
            link = self._link
            if link is not None and not link.lost.is_set():
                info = own.read_info(self.home)
                if info is None or info.pid != link.info.pid or not own.pid_alive(link.info.pid):
                    link.lost.set()
            await anyio.sleep(POLL_S)

    async def _run_link(self, link: _Link) -> None:
        transport = StreamableHttpTransport(
            "http://localhost/mcp",
            auth=link.token,
            headers={CLIENT_HEADER: str(os.getpid())},
            httpx_client_factory=_uds_factory(link.info.address),
        )
        try:
            with anyio.CancelScope() as scope:
                async with Client(transport) as client:
                    link.client = client
                    link.ready.set()
                    await link.lost.wait()
                    scope.deadline = anyio.current_time() + 1.0  # bounded goodbye
        except Exception as exc:  # noqa: BLE001 - any failure just means: find the owner again
            log.warning("link to owner pid %s ended: %r", link.info.pid, exc)
        finally:
            link.lost.set()

    async def _current_link(self, deadline: float) -> _Link | None:
        """A ready link to the owner, or None once this process has become the owner."""
        while True:
            if self.local:
                return None
            link = self._link
            if link is not None and not link.lost.is_set():
                if link.ready.is_set():
                    return link
            else:
                async with self._connect_lock:
                    if self._link is link:
                        self._link = self._new_link()
                        if self._link is not None:
                            self._tg.start_soon(self._run_link, self._link)
            if time.monotonic() > deadline:
                raise ToolError(f"[OWNER_UNAVAILABLE] {own.held_message(self.home)}")
            await anyio.sleep(0.01)

    def _new_link(self) -> _Link | None:
        info = own.read_info(self.home)
        token = own.read_owner_token(self.home)
        if info is None or not info.address or not token or info.pid == os.getpid():
            return None
        if not own.pid_alive(info.pid):
            return None
        return _Link(info, token)

    async def forward(self, context: MiddlewareContext, call_next: Any) -> Any:
        name = context.message.name
        args = dict(context.message.arguments or {})
        ident = current_identity.get() or self.default
        request_id = uuid.uuid4().hex
        maybe_reached = False
        deadline = time.monotonic() + WAIT_S
        while True:
            link = await self._current_link(deadline)
            if link is None:  # the owner died and this process took over
                return await self.run_tracked(context, call_next, ident, request_id, maybe_reached)
            meta = {
                META: {
                    "identity": {"user_id": ident.user_id, "agent_id": ident.agent_id},
                    "request_id": request_id,
                    "retry": maybe_reached,
                    "pid": os.getpid(),
                }
            }
            try:
                res = await self._call(link, name, args, meta, context)
            except _OwnerLost as lost:
                maybe_reached = maybe_reached or lost.maybe_reached
                if maybe_reached and name not in RETRY_SAFE:
                    raise ToolError(
                        f"[OWNER_LOST] the owner process stopped during {name}; it may or may "
                        "not have been applied. Check (e.g. search_memory) before retrying."
                    ) from None
                log.info("owner pid %s lost during %s; retrying", link.info.pid, name)
                continue
            return ToolResult(
                content=res.content,
                structured_content=res.structuredContent,
                is_error=bool(res.is_error),
            )

    async def _call(
        self,
        link: _Link,
        name: str,
        args: dict[str, Any],
        meta: dict[str, Any],
        context: MiddlewareContext,
    ) -> Any:
        ctx = context.fastmcp_context
        relay = None
        if ctx is not None:

            async def relay(progress: float, total: float | None, message: str | None) -> None:
                await ctx.report_progress(progress, total, message)

        lost = False
        result: Any = None
        error: Exception | None = None
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal lost
                await link.lost.wait()
                lost = True
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                result = await link.client.call_tool_mcp(
                    name, args, meta=meta, progress_handler=relay
                )
            except Exception as exc:  # noqa: BLE001 - transport failure or a dead owner
                error = exc
            tg.cancel_scope.cancel()
        if error is not None:
            with anyio.move_on_after(1.0):  # the monitor tells a dead owner within ~50 ms
                await link.lost.wait()
            if not link.lost.is_set():
                raise ToolError(f"[OWNER_ERROR] forwarding {name} failed: {error}") from error
            lost = True
        if lost or result is None:
            raise _OwnerLost(maybe_reached=True)
        return result


class Forwarder(Middleware):
    """Proxy mode: send each tool call to the owner; owner mode: run it here."""

    def __init__(self, router: Router) -> None:
        self.router = router

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        if self.router.local:
            return await call_next(context)
        return await self.router.forward(context, call_next)


def attach(
    front: FastMCP,
    settings: Settings,
    state: Any,
    make_sibling: Callable[[Brain, TokenVerifier], FastMCP],
    kind: str,
) -> Router:
    """Give ``front`` (a server without an injected Brain) its router and forwarding."""
    router = Router(settings, state, front, make_sibling, kind)
    front.add_middleware(Forwarder(router))
    return router


def http_auth(settings: Settings) -> HttpTokenVerifier:
    return HttpTokenVerifier(
        settings.home, Identity(settings.identity.user_id, settings.identity.agent_id)
    )


__all__ = [
    "Forwarder",
    "HttpTokenVerifier",
    "OwnerTokenVerifier",
    "Router",
    "SiblingCalls",
    "TokenIdentity",
    "attach",
    "http_auth",
]
