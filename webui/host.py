"""Serving the explorer from the process that owns the data dir.

:class:`UIHost` runs the app (webui/app.py) on a loopback port in the owner's task group,
over the owner's live Brain (``state.brain``): the explorer never opens a store of its own.
:func:`attach` gives a server's router its host: started when the process becomes the owner
if ``[ui] enabled``, and on demand when ``brain ui`` asks the running owner for a login link
(the owner endpoint's ``/ui``).
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn  # already loaded: the owner endpoint serves on it too
from anyio.abc import TaskGroup

from brain.errors import BrainError
from brain.trust.identity import Identity
from config import Settings
from mcp_surface.calls import BrainHolder

if TYPE_CHECKING:
    from mcp_surface.election import Router

log = logging.getLogger("brain.ui")


class PortInUse(BrainError):
    code = "UI_PORT_IN_USE"


class UIHost:
    def __init__(self, settings: Settings, state: BrainHolder, default: Identity) -> None:
        from webui.auth import Logins

        self.settings = settings
        self.state = state
        self.logins = Logins(settings.home, default)
        self.port = 0
        self._uv: Any = None
        self._tg: Any = None

    @property
    def running(self) -> bool:
        return self._uv is not None

    def owner_started(self, tg: TaskGroup) -> None:
        """The router's task group, once this process owns the data dir."""
        self._tg = tg

    async def start(self, tg: TaskGroup | None = None) -> None:
        """Serve the explorer on ``[ui] host:port`` (refused with UI_PORT_IN_USE)."""
        from webui.site import create_app

        if self._uv is not None:
            return
        tg = tg or self._tg
        if tg is None:
            raise BrainError("this process does not own the data dir yet")
        ui = self.settings.ui
        family = socket.AF_INET6 if ":" in ui.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((ui.host, ui.port))
        except OSError as exc:
            sock.close()
            raise PortInUse(f"port {ui.port} on {ui.host} is taken ({exc.strerror}): pass a "
                            "free one with 'brain ui --port N', or set it in [ui] port "
                            "(BRAIN__UI__PORT; 0 picks any)", port=ui.port) from exc
        sock.listen(64)
        self.port = sock.getsockname()[1]
        app = create_app(self.state, self.logins)
        server = _Quiet(uvicorn.Config(app, log_level="warning", lifespan="off",
                                       timeout_graceful_shutdown=2))
        self._uv = server

        async def serve() -> None:
            try:
                await server.serve(sockets=[sock])
            finally:
                self._uv = None
                with contextlib.suppress(OSError):
                    sock.close()

        tg.start_soon(serve)
        while not server.started:
            await anyio.sleep(0.005)
        log.info("web explorer on %s", self.base_url)

    @property
    def base_url(self) -> str:
        host = self.settings.ui.host
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def login_url(self) -> str:
        """The URL with a fresh one-time login token (acting as the settings identity)."""
        return f"{self.base_url}/login?token={self.logins.issue_link()}"

    async def open(self) -> dict[str, Any]:
        """What ``brain ui`` asks a running owner for: start if needed, a login URL."""
        await self.start()
        return {"url": self.login_url(), "base_url": self.base_url}

    async def stop(self) -> None:
        if self._uv is not None:
            self._uv.should_exit = True


class _Quiet(uvicorn.Server):
    """uvicorn.Server without its signal handlers (the owner process has its own)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


def attach(router: Router, settings: Settings, *, start: bool) -> UIHost:
    """Give ``router`` an explorer: started on promotion when ``start``, and served on demand
    through the owner endpoint's ``/ui`` either way."""
    host = UIHost(settings, router.state, router.default)

    async def on_owner(tg: TaskGroup) -> None:
        host.owner_started(tg)
        if start:
            try:
                await host.start(tg)
            except Exception as exc:  # noqa: BLE001 - the tools keep working without it
                log.error("web explorer not started: %s", exc)

    router.serve_ui(host, on_owner, host.open)
    return host
