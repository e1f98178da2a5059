"""Many servers, one brain: owner election, forwarding to the owner, HTTP tokens, identity.

Every server process (stdio or ``--http``) on a data dir runs a :class:`Router`. The first to
take ``<home>/owner.lock`` is the *owner*: it opens the Brain (so hooks, watchers and workers
run once per data dir), serves its own client locally, and serves sibling processes on two
Unix sockets: the call channel (``owner.calls.sock``, JSON lines, see owner_rpc.py) and a small
HTTP endpoint (``owner.sock``, ``/status`` for ``brain status``), both behind the per-election
``owner.token``. The others are thin proxies: :class:`Forwarder` sends each ``tools/call``
(name, arguments, caller identity and a request id) over one kept-open channel. A monitor
polls the lock; when the owner dies, one proxy takes the lock, opens the Brain and becomes the
owner, and the rest reconnect to it. A call cut off by the owner's death is resent only when
that cannot duplicate work: reads, and ``add_memory``, whose note carries the request id
checked first. Everything a takeover needs (the sibling server, the embedding model) is
built while waiting, so a takeover costs about one Brain.open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.auth import TokenVerifier
from fastmcp.server.auth.auth import AccessToken
from fastmcp.server.dependencies import get_access_token, get_http_headers
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp.types import CallToolResult
from starlette.requests import Request
from starlette.responses import JSONResponse

from brain import owner as own
from brain import paths
from brain.app import Brain
from brain.errors import BrainError, StoreLocked
from brain.hooks.drain import drain as drain_hook_spool
from brain.identity import Identity, acting_as
from brain.identity import current as current_identity
from brain.notes import public_note
from brain.startup import brain_error_in, one_line
from config import Settings
from mcp_surface import owner_rpc

log = logging.getLogger("brain.routing")
logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per forwarded call otherwise

META = "opencode-brain"  # key of our entry in a forwarded request's _meta
CLIENT_HEADER = "x-brain-client-pid"
WAIT_S = 30.0  # how long a proxied call waits for an owner before giving up
POLL_S = 0.05  # monitor period: how fast a dead owner is noticed
# Idle connections to the owner's status endpoint are never cut under a waiting request.
SERVER_KEEPALIVE_S = 3600
# Tools a proxy may resend after the owner died mid-call: reads (a repeated search only
# stamps access again) and add_memory (its request id is checked before writing again).
RETRY_SAFE = frozenset({"search_memory", "get_related", "brain_stats", "add_memory"})
DEDUPED = frozenset({"add_memory"})
MAX_ATTEMPTS = 6  # sends of one call (each owner lost or connection broken costs one)


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
        ident: Identity | None
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

    def __init__(self, token: str = "") -> None:
        super().__init__()
        self.token = token  # set at each election; empty admits nobody

    async def verify_token(self, token: str) -> AccessToken | None:
        if not own.same_token(token, self.token):
            return None
        return AccessToken(token=token, client_id="sibling", scopes=[], claims={"sibling": True})


class TokenIdentity(Middleware):
    """HTTP front: every call acts as the identity its bearer token maps to (both parts:
    a call without an agent would fall back to the settings identity in the tool gate)."""

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        token = get_access_token()
        claims = token.claims if token is not None else {}
        if not claims.get("user_id") or not claims.get("agent_id"):
            raise ToolError("[UNAUTHORIZED] this call carries no caller identity")
        with acting_as(Identity(claims["user_id"], claims["agent_id"])), paths.via(paths.HTTP):
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
        with paths.via(str(meta.get("transport") or paths.HTTP)):  # unmarked: the strict one
            return await self.router.run_tracked(
                context,
                call_next,
                caller,
                str(meta.get("request_id") or ""),
                bool(meta.get("retry")),
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
    calls: owner_rpc.CallClient | None = None


def calls_path(address: str) -> Path:
    """The owner's call channel sits next to its HTTP socket (``owner.sock``)."""
    path = Path(address)
    return path.with_name(f"{path.stem}.calls{path.suffix}")


class Router:
    """Owner election and call routing for one server process on one data dir."""

    def __init__(
        self,
        settings: Settings,
        state: Any,
        front: FastMCP,
        make_sibling: Callable[[TokenVerifier], FastMCP],
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
        self._verifier = OwnerTokenVerifier()
        self._app: Any = None
        self._sibling: Any = None
        self._calls: owner_rpc.CallServer | None = None
        self._standby: Any = None  # embedder warmed while a proxy, used if it takes over
        self._claimed: Brain | None = None  # opened by claim() before the server ran
        self.failed: BrainError | None = None  # why taking over failed (then nobody owns)
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
            try:
                task.result()  # startup failed: raise it
            except BaseExceptionGroup as group:  # the task group's wrapping hides the cause
                err = brain_error_in(group)
                if err is None:
                    raise
                raise err from None
        try:
            yield self
        finally:
            stop.set()
            await task

    async def _main(self, ready: anyio.Event, stop: anyio.Event) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                # Built now, off the failover path: taking over must not stall the loop.
                self._app = self._sibling_app()
                if self.lock.try_acquire():
                    await self._promote()
                else:
                    tg.start_soon(self._monitor)
                    tg.start_soon(self._warm_standby)
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

    def claim(self) -> bool:
        """Before the server runs: take the owner lock if it is free and open the Brain now,
        so that a start failure reaches ``main()`` as the typed error, not from inside the
        server's task groups. ``_main`` then finds the lock held and promotes with this Brain.
        """
        if not self.lock.try_acquire():
            return False
        try:
            self._claimed = self._open_brain()
        except BaseException:
            self.lock.release()
            raise
        return True

    async def _promote(self) -> None:
        """Become the owner: open the Brain, serve siblings on the Unix socket, then this
        process's own calls (siblings first: they have been waiting since the old owner died,
        and this process's backlog would otherwise hold the loop while the endpoint starts)."""
        t0 = time.monotonic()
        brain, self._claimed = self._claimed, None
        if brain is None:
            try:
                brain = await anyio.to_thread.run_sync(self._open_brain)
            except BrainError as exc:  # e.g. a proxy taking over finds the store damaged
                log.error("%s", one_line(exc))
                self.failed = exc  # this process's calls get the reason, not a 30 s wait
                raise
        t1 = time.monotonic()
        own.install_request_stamping(brain)
        own.record_open(self.home, self.kind)
        self.state.brain = brain
        await anyio.to_thread.run_sync(drain_hook_spool, brain)  # hooks run while none owned it
        if self._link is not None:
            self._link.lost.set()
        await self._start_endpoint(brain)
        self.local = True
        log.info(
            "pid %s owns %s; siblings connect at %s (brain opened in %.2f s, endpoint up in "
            "%.2f s)",
            os.getpid(),
            self.home,
            self._sock_path,
            t1 - t0,
            time.monotonic() - t1,
        )

    def _open_brain(self) -> Brain:
        deadline = time.monotonic() + 10
        standby = self._standby
        while True:  # the previous owner's shard lock goes with its process, give it a moment
            try:
                brain = Brain(self.settings, embedder=standby).open()
            except StoreLocked:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
                continue
            if standby is not None and brain.pending_model is not None:
                # The store was built with another model: let the Brain pick the recorded one.
                brain.close()
                standby = None
                continue
            return brain

    async def _warm_standby(self) -> None:
        """While a proxy: load the embedding model in the background, so that taking over
        does not wait for it (a real model takes seconds to load)."""

        def load() -> Any:
            from brain.embedder import build_embedder, resolve_record

            s = self.settings.embedding
            if s.provider != "local":
                return None  # a remote model has nothing to load; never warm a local stand-in
            embedder = build_embedder(resolve_record(s.model, s.dimension), s.batch_size, s.backend)
            embedder.embed_query("warm up")
            return embedder

        try:
            self._standby = await anyio.to_thread.run_sync(load)
        except Exception as exc:  # noqa: BLE001 - promotion then loads it itself
            log.info("standby embedder not preloaded: %s", exc)

    def _sibling_app(self) -> Any:
        """The owner's sibling endpoint (built by every process, served by the owner)."""
        sibling = self.make_sibling(self._verifier)
        sibling.add_middleware(SiblingCalls(self))
        self._sibling = sibling
        verifier = self._verifier

        @sibling.custom_route("/status", methods=["GET"])
        async def status(request: Request) -> JSONResponse:
            auth = request.headers.get("authorization", "")
            if not own.same_token(auth.removeprefix("Bearer ").strip(), verifier.token):
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            report = await anyio.to_thread.run_sync(self.status_report)
            return JSONResponse(report)

        return sibling.http_app(path="/mcp", json_response=True)

    async def _serve_call(self, frame: dict[str, Any], pid: int) -> dict[str, Any]:
        """Run one call sent over the call channel, as its caller, stamped with its request
        id; a resent add_memory whose note exists is answered from that note."""
        ident = frame.get("caller") or {}
        if not ident.get("user_id") or not ident.get("agent_id"):
            raise ToolError("[UNAUTHORIZED] a forwarded call must name its caller")
        caller = Identity(str(ident["user_id"]), str(ident["agent_id"]))
        self.seen(pid, caller, call=True)
        name, args = str(frame["name"]), dict(frame.get("args") or {})
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
        wire = CallToolResult(
            content=res.content, structured_content=res.structured_content, is_error=res.is_error
        )
        return wire.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def _deduplicated(self, request_id: str) -> ToolResult | None:
        brain = self.state.brain
        done = await anyio.to_thread.run_sync(lambda: own.find_request(brain, request_id))
        if done is None:
            return None
        return ToolResult(
            structured_content={
                "note": public_note(done),
                "linked": [],
                "redacted": [],
                "deduplicated": True,
            }
        )

    async def _start_endpoint(self, brain: Brain) -> None:  # noqa: ARG002 - state has it
        self._verifier.token = own.new_owner_token(self.home)
        app = self._app
        path = own.socket_path(self.home)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        os.chmod(path, 0o600)
        self._sock_path = path
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

        self._tg.start_soon(serve)
        while not uv.started:
            await anyio.sleep(0.005)
        verifier = self._verifier
        self._calls = owner_rpc.CallServer(
            calls_path(str(path)), lambda: verifier.token, self._serve_call
        )
        await self._calls.start(self._tg)
        own.write_info(self.home, own.OwnerInfo(os.getpid(), str(path), self.started, self.kind))

    async def _shutdown(self) -> None:
        if self._link is not None:
            self._link.lost.set()
        brain = self.state.brain if self.local else None
        if brain is not None:
            own.clear_info(self.home, os.getpid())
            await anyio.to_thread.run_sync(brain.close)
            self.state.brain = None
        if self._calls is not None:
            await self._calls.aclose()
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
        from brain.owner_report import report

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
        t0 = time.monotonic()
        try:
            calls = await owner_rpc.CallClient.connect(
                str(calls_path(link.info.address)), link.token
            )
        except Exception as exc:  # noqa: BLE001 - any failure just means: find the owner again
            log.warning("cannot reach owner pid %s: %r", link.info.pid, exc)
            link.lost.set()
            return
        link.calls = calls
        link.ready.set()
        log.info("connected to owner pid %s in %.2f s", link.info.pid, time.monotonic() - t0)
        try:
            async with anyio.create_task_group() as tg:

                async def until_lost() -> None:
                    await link.lost.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(until_lost)
                await calls.pump()  # returns when the owner closes the channel (or dies)
                tg.cancel_scope.cancel()
        finally:
            link.lost.set()
            with anyio.CancelScope(shield=True):
                await calls.aclose()
            log.info("link to owner pid %s ended", link.info.pid)

    async def _current_link(self, deadline: float) -> _Link | None:
        """A ready link to the owner, or None once this process has become the owner."""
        while True:
            if self.local:
                return None
            if self.failed is not None:
                raise ToolError(str(self.failed))
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
        attempts = 0
        while True:
            attempts += 1
            if attempts > MAX_ATTEMPTS:
                raise ToolError(
                    f"[OWNER_UNAVAILABLE] {name} failed {MAX_ATTEMPTS} times reaching the owner; "
                    f"{own.held_message(self.home)}"
                )
            link = await self._current_link(deadline)
            if link is None:  # the owner died and this process took over
                return await self.run_tracked(context, call_next, ident, request_id, maybe_reached)
            frame = {
                "name": name,
                "args": args,
                "caller": {"user_id": ident.user_id, "agent_id": ident.agent_id},
                "transport": paths.transport.get(),
                "request_id": request_id,
                "retry": maybe_reached,
            }
            try:
                res = await self._call(link, frame)
            except _OwnerLost as lost:
                maybe_reached = maybe_reached or lost.maybe_reached
                if maybe_reached and name not in RETRY_SAFE:
                    raise ToolError(
                        f"[OWNER_LOST] the owner process stopped (or its connection broke) "
                        f"during {name}; it may or may not have been applied. Check (e.g. "
                        "search_memory) before retrying."
                    ) from None
                log.info("owner pid %s lost during %s; retrying", link.info.pid, name)
                continue
            return ToolResult.from_mcp_result(CallToolResult.model_validate(res))

    async def _call(self, link: _Link, frame: dict[str, Any]) -> dict[str, Any]:
        """Send one call over the link; a channel that closes under it means the owner may
        have applied it (``_OwnerLost(maybe_reached=True)``)."""
        assert link.calls is not None
        try:
            return await link.calls.call(frame)
        except owner_rpc.CallError as exc:  # the owner ran it: a tool error, bad arguments
            raise ToolError(str(exc)) from None
        except (owner_rpc.ChannelClosed, OSError) as exc:
            if own.pid_alive(link.info.pid):
                log.warning("channel to owner pid %s broke: %r", link.info.pid, exc)
                await anyio.sleep(0.05)  # a dying owner: let the monitor see it first
            link.lost.set()
            raise _OwnerLost(maybe_reached=True) from None


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
    make_sibling: Callable[[TokenVerifier], FastMCP],
    kind: str,
) -> Router:
    """Give ``front`` (a server without an injected Brain) its router and forwarding."""
    router = Router(settings, state, front, make_sibling, kind)
    front.add_middleware(Forwarder(router))
    _ROUTERS[front] = router
    return router


_ROUTERS: weakref.WeakKeyDictionary[FastMCP, Router] = weakref.WeakKeyDictionary()


def claim(front: FastMCP) -> bool:
    """Open the Brain of ``front``'s router now if this process is the owner (see
    ``Router.claim``); False for a proxy or a server built around a given Brain."""
    router = _ROUTERS.get(front)
    return router.claim() if router is not None else False


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
    "claim",
    "http_auth",
]
