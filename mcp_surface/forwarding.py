"""The proxy side: a server that does not own the data dir sends its tool calls to the owner.

One kept-open link per owner (a generation) on the owner's call channel (owner_rpc.py). Each
``tools/call`` goes over it with its name, arguments, caller identity and a request id. A
call cut off by the owner's death is resent only when that cannot duplicate work: reads, and
``add_memory``, whose note carries the request id the owner checks first. When this process
itself becomes the owner, the call runs here.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp.types import CallToolResult

from brain.errors import BrainError
from brain.process import owner as own
from brain.trust import paths
from brain.trust.identity import Identity
from brain.trust.identity import current as current_identity
from mcp_surface import idempotency, owner_rpc
from mcp_surface.owner_endpoint import calls_path
from mcp_surface.tool_errors import CodedToolError

log = logging.getLogger("brain.routing")

WAIT_S = 30.0  # how long a proxied call waits for an owner before giving up
# Tools a proxy may resend after the owner died mid-call: reads (a repeated search only
# stamps access again) and add_memory (its request id is checked before writing again).
RETRY_SAFE = frozenset({"search_memory", "get_related", "brain_stats", "add_memory"})
MAX_ATTEMPTS = 6  # sends of one call (each owner lost or connection broken costs one)


class Host(Protocol):
    """What the proxy needs of its process's router (election.py's ``Router``)."""

    local: bool  # this process owns the data dir now: run calls here
    failed: BrainError | None  # why taking over failed (then nobody owns)

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None: ...

    async def run_tracked(
        self,
        context: MiddlewareContext,
        call_next: CallNext[Any, Any],
        caller: Identity,
        request_id: str,
        retry: bool,
    ) -> Any: ...


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


class Proxy:
    """The link to the current owner, and the calls sent over it."""

    def __init__(self, home: Path, default: Identity, host: Host) -> None:
        self.home = home
        self.default = default
        self.host = host
        self._link: _Link | None = None
        self._connect_lock = anyio.Lock()

    def drop(self) -> None:
        """The owner is gone (or this process is it now): calls in flight go to the retry
        path, and the next call finds the owner again."""
        if self._link is not None:
            self._link.lost.set()

    def check_owner(self) -> None:
        """Drop the link when its owner is no longer the one on record, or is dead."""
        link = self._link
        if link is not None and not link.lost.is_set():
            info = own.read_info(self.home)
            if info is None or info.pid != link.info.pid or not own.pid_alive(link.info.pid):
                link.lost.set()

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
            if self.host.local:
                return None
            if self.host.failed is not None:
                raise CodedToolError.of(self.host.failed)
            link = self._link
            if link is not None and not link.lost.is_set():
                if link.ready.is_set():
                    return link
            else:
                async with self._connect_lock:
                    if self._link is link:
                        self._link = self._new_link()
                        if self._link is not None:
                            self.host.start_soon(self._run_link, self._link)
            if time.monotonic() > deadline:
                raise CodedToolError("OWNER_UNAVAILABLE", own.held_message(self.home))
            await anyio.sleep(0.01)

    def _new_link(self) -> _Link | None:
        info = own.read_info(self.home)
        token = own.read_owner_token(self.home)
        if info is None or not info.address or not token or info.pid == os.getpid():
            return None
        if not own.pid_alive(info.pid):
            return None
        return _Link(info, token)

    async def forward(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        name = context.message.name
        args = dict(context.message.arguments or {})
        ident = current_identity.get() or self.default
        keyed = idempotency.current_key.get()  # a keyed HTTP call: the owner checks it first
        request_id = keyed or uuid.uuid4().hex
        maybe_reached = False
        deadline = time.monotonic() + WAIT_S
        attempts = 0
        while True:
            attempts += 1
            if attempts > MAX_ATTEMPTS:
                raise CodedToolError(
                    "OWNER_UNAVAILABLE",
                    f"{name} failed {MAX_ATTEMPTS} times reaching the owner; "
                    f"{own.held_message(self.home)}",
                )
            link = await self._current_link(deadline)
            if link is None:  # the owner died and this process took over
                return await self.host.run_tracked(
                    context, call_next, ident, request_id, maybe_reached or bool(keyed)
                )
            frame = {
                "name": name,
                "args": args,
                "caller": {"user_id": ident.user_id, "agent_id": ident.agent_id},
                "transport": paths.transport.get(),
                "request_id": request_id,
                "retry": maybe_reached or bool(keyed),
            }
            try:
                res = await self._call(link, frame)
            except _OwnerLost as lost:
                maybe_reached = maybe_reached or lost.maybe_reached
                if maybe_reached and name not in RETRY_SAFE:
                    raise CodedToolError(
                        "OWNER_LOST",
                        f"the owner process stopped (or its connection broke) during {name}; "
                        "it may or may not have been applied. Check (e.g. search_memory) "
                        "before retrying.",
                    ) from None
                log.info("owner pid %s lost during %s; retrying", link.info.pid, name)
                continue
            result = CallToolResult.model_validate(res)
            refused = CodedToolError.of_result(result)
            if refused is not None:  # the owner's coded error is this server's own
                raise refused
            return ToolResult.from_mcp_result(result)

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

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        if self.proxy.host.local:
            keyed = idempotency.current_key.get()
            if keyed is None:
                return await call_next(context)
            # A keyed call runs tracked: its notes carry the key's request id, and an
            # add_memory whose note is there already answers from it (after a restart).
            ident = current_identity.get() or self.proxy.default
            return await self.proxy.host.run_tracked(context, call_next, ident, keyed, True)
        return await self.proxy.forward(context, call_next)
