"""The explorer's ASGI app: the pages (webui/pages.py), the actions (webui/actions.py) and
the static files behind the security layer of webui/app.py."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from mcp_surface.calls import BrainHolder
from webui import actions, pages
from webui.app import HERE, LOOPBACK_HOSTS, UI, Guard
from webui.auth import Logins


def create_app(state: BrainHolder, logins: Logins, *, hosts: Iterable[str] | None = None) -> Starlette:
    """The explorer over ``state.brain``. ``hosts``: the Host names accepted (default the
    loopback names; the port is not checked)."""
    if hosts is None:
        hosts = LOOPBACK_HOSTS
    routes: list[BaseRoute] = [*pages.ROUTES, *actions.ROUTES,
                               Mount("/static", StaticFiles(directory=str(HERE / "static")),
                                     name="static")]
    app = Starlette(routes=routes, middleware=[Middleware(Guard, hosts=hosts)])
    app.state.ui = UI(state, logins)
    return app


