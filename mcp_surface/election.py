"""Owner election: which server process on a data dir opens the Brain.

The first process to take ``<home>/owner.lock`` is the owner: it opens the Brain (so hooks,
watchers and workers run once per data dir), serves its own client locally and the other
processes on its sibling endpoint (owner_endpoint.py). The others are proxies
(forwarding.py). A monitor polls the lock; when the owner dies, one proxy takes the lock,
opens the Brain and becomes the owner, and the rest reconnect to it. Everything a takeover
needs (the sibling server, the embedding model) is built while waiting, so a takeover costs
about one Brain.open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup
from fastmcp import FastMCP
from fastmcp.server.auth import TokenVerifier
from fastmcp.server.middleware import CallNext, MiddlewareContext

from brain.app import Brain
from brain.errors import BrainError, StoreLocked
from brain.process import owner as own
from brain.process.drain import drain as drain_hook_spool
from brain.process.startup import brain_error_in, one_line
from brain.trust.identity import Identity
from config import Settings
from mcp_surface.calls import BrainHolder
from mcp_surface.forwarding import Proxy
from mcp_surface.owner_endpoint import OwnerEndpoint

log = logging.getLogger("brain.routing")

POLL_S = 0.05  # monitor period: how fast a dead owner is noticed


class Explorer(Protocol):
    """What the router holds of the web explorer it serves (webui/host.UIHost)."""

    async def start(self, tg: TaskGroup | None = None) -> None: ...
    def login_url(self) -> str: ...


class Router:
    """Owner election and call routing for one server process on one data dir."""

    def __init__(
        self,
        settings: Settings,
        state: BrainHolder,
        front: FastMCP,
        make_sibling: Callable[[TokenVerifier], FastMCP],
        kind: str = "stdio",
    ) -> None:
        self.settings = settings
        self.home = Path(settings.home)
        self.state = state
        self.front = front
        self.kind = kind
        self.lock = own.OwnerLock(self.home)
        self.local = False
        self._tg: Any = None
        self._standby: Any = None  # embedder warmed while a proxy, used if it takes over
        self._claimed: Brain | None = None  # opened by claim() before the server ran
        self.failed: BrainError | None = None  # why taking over failed (then nobody owns)
        self.default = Identity(settings.identity.user_id, settings.identity.agent_id)
        self.endpoint = OwnerEndpoint(self.home, kind, state, self.default, make_sibling)
        self.proxy = Proxy(self.home, self.default, self)
        # Run once this process owns the data dir, with the router's task group (the web
        # explorer starts here when [ui] enabled: serve_ui, from mcp_server.create_server).
        self.on_owner: list[Callable[[TaskGroup], Awaitable[None]]] = []
        self.ui: Explorer | None = None

    def serve_ui(self, ui: Explorer, on_owner: Callable[[TaskGroup], Awaitable[None]],
                 open_ui: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        """The web explorer this router's owner serves (webui/host.UIHost): ``on_owner`` runs
        once this process owns the data dir, ``open_ui`` answers ``brain ui``."""
        self.ui = ui
        self.on_owner.append(on_owner)
        self.endpoint.open_ui = open_ui

    # -------------------------------------------------------------- what the proxy uses
    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._tg.start_soon(fn, *args)

    async def run_tracked(
        self,
        context: MiddlewareContext,
        call_next: CallNext[Any, Any],
        caller: Identity,
        request_id: str,
        retry: bool,
    ) -> Any:
        return await self.endpoint.run_tracked(context, call_next, caller, request_id, retry)

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
                self.endpoint.build()
                if self.lock.try_acquire():
                    await self._promote()
                else:
                    tg.start_soon(self._monitor)
                    tg.start_soon(self._warm_standby)
                ready.set()
                await stop.wait()
                await self.endpoint.finish()  # finish in-flight sibling calls, then close
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
        own.record_open(self.home, self.kind)
        self.state.brain = brain
        await anyio.to_thread.run_sync(drain_hook_spool, brain)  # hooks run while none owned it
        self.proxy.drop()
        await self.endpoint.start(self._tg)
        self.local = True
        for hook in self.on_owner:
            await hook(self._tg)
        log.info(
            "pid %s owns %s; siblings connect at %s (brain opened in %.2f s, endpoint up in "
            "%.2f s)",
            os.getpid(),
            self.home,
            self.endpoint.sock_path,
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
        does not wait for it (a real model takes seconds to load), and the modules the open
        imports on first use (tens of ms of a takeover otherwise)."""

        def load() -> Any:
            import numpy.ma  # noqa: F401 - NumPy's first np.unique (the graph's ids) imports it

            import brain.vector_store.edge  # noqa: F401
            from brain.embedding.registry import build_embedder, resolve_record

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

    async def _shutdown(self) -> None:
        self.proxy.drop()
        brain = self.state.brain if self.local else None
        if brain is not None:
            own.clear_info(self.home, os.getpid())
            await anyio.to_thread.run_sync(brain.close)
            self.state.brain = None
        await self.endpoint.close()
        self.lock.release()

    async def _monitor(self) -> None:
        """Take the lock the moment the owner dies; drop links to owners that are gone."""
        while not self.local:
            if self.lock.try_acquire():
                self.proxy.drop()  # calls in flight go to the retry path now
                try:
                    await self._promote()
                except BaseException:
                    self.lock.release()
                    raise
                return
            self.proxy.check_owner()
            await anyio.sleep(POLL_S)
