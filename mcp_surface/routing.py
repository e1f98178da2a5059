"""Many servers, one brain: how the server processes on one data dir share it.

Every server process (stdio or ``--http``) on a data dir runs a :class:`Router`:

- election.py: who owns the data dir. The first process to take ``<home>/owner.lock`` opens
  the Brain; when it dies, a waiting process takes over.
- owner_endpoint.py: what the owner serves the others, on two Unix sockets behind the
  per-election ``owner.token``: the call channel (owner_rpc.py) and ``/status``.
- forwarding.py: what the others do, as thin proxies: send each ``tools/call`` to the owner
  and resend one cut off by its death only when that cannot duplicate work.
- http_tokens.py: bearer tokens and per-token identity of ``brain serve --http``.

This module puts them together for ``mcp_server.create_server``.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable

from fastmcp import FastMCP
from fastmcp.server.auth import TokenVerifier

from config import Settings
from mcp_surface.calls import BrainHolder
from mcp_surface.election import Router
from mcp_surface.forwarding import Forwarder
from mcp_surface.http_tokens import HttpTokenVerifier, OwnerTokenVerifier, TokenIdentity, http_auth
from mcp_surface.owner_endpoint import SiblingCalls

logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per forwarded call otherwise


def attach(
    front: FastMCP,
    settings: Settings,
    state: BrainHolder,
    make_sibling: Callable[[TokenVerifier], FastMCP],
    kind: str,
) -> Router:
    """Give ``front`` (a server without an injected Brain) its router and forwarding."""
    router = Router(settings, state, front, make_sibling, kind)
    front.add_middleware(Forwarder(router.proxy))
    _ROUTERS[front] = router
    return router


_ROUTERS: weakref.WeakKeyDictionary[FastMCP, Router] = weakref.WeakKeyDictionary()


def router_of(front: FastMCP) -> Router | None:
    """The router :func:`attach` gave ``front`` (``brain ui`` runs it without a transport)."""
    return _ROUTERS.get(front)


def claim(front: FastMCP) -> bool:
    """Open the Brain of ``front``'s router now if this process is the owner (see
    ``Router.claim``); False for a proxy or a server built around a given Brain."""
    router = _ROUTERS.get(front)
    return router.claim() if router is not None else False


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
