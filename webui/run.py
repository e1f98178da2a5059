"""``brain ui``: the web explorer of this data dir, served by the process that owns it.

If a server already owns the data dir, it is asked (over its owner endpoint, behind the
owner token) to serve the explorer and make a one-time login link; otherwise this process
becomes the owner, exactly as a server would (same election, same sibling endpoint, so agents
started later forward their tool calls to it), and serves the explorer until stopped.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from brain.process import owner as own
from config import Settings

if TYPE_CHECKING:
    from mcp_surface.election import Router


def ask_owner(settings: Settings) -> dict[str, Any] | None:
    """The running owner's explorer URL (started on demand), or None without an owner."""
    import httpx

    info = own.read_info(settings.home)
    token = own.read_owner_token(settings.home)
    if info is None or not info.alive or not info.address or not token:
        return None
    transport = httpx.HTTPTransport(uds=info.address)
    with httpx.Client(transport=transport, timeout=30.0) as http:
        res = http.post("http://localhost/ui", headers={"Authorization": f"Bearer {token}"})
    data: dict[str, Any] = res.json()
    if res.status_code != 200:
        raise RuntimeError(f"the owner (pid {info.pid}) refused: {data.get('message', data)}")
    return {**data, "owner_pid": info.pid}


def _announce(data: dict[str, Any], note: str) -> None:
    print(f"opencode-brain web explorer ({note}): {data['url']}", flush=True)
    print("  the link logs in once; run `brain ui` again for another", file=sys.stderr,
          flush=True)


def serve(settings: Settings, create_server: Callable[[Settings], Any]) -> int:
    """Print the explorer's login URL; serve it here when no other process owns the data dir.
    ``create_server`` is mcp_server's, handed down by its ``--ui`` entry (so this module does
    not import the tool layer that imports it)."""
    found = ask_owner(settings)
    if found is not None:
        _announce(found, f"served by the owner, pid {found['owner_pid']}")
        return 0
    from mcp_surface import routing

    server = create_server(settings)
    router = routing.router_of(server)
    assert router is not None  # a server built from settings always has one
    router.kind = router.endpoint.kind = "ui"
    routing.claim(server)
    anyio.run(_own_and_serve, router, settings)
    return 0


async def _own_and_serve(router: Router, settings: Settings) -> None:
    async with router.running():
        if not router.local:  # another process won the election meanwhile: it serves
            found = await anyio.to_thread.run_sync(ask_owner, settings)
            if found is not None:
                _announce(found, f"served by the owner, pid {found['owner_pid']}")
            return
        ui = router.ui
        assert ui is not None  # webui/host.attach gave it one (mcp_server.create_server)
        await ui.start()
        _announce({"url": ui.login_url()}, "this process owns the data dir; Ctrl-C "
                  "stops it")
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                return
