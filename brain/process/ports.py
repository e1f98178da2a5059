"""The HTTP server's port, checked before anything starts (``brain serve --http`` and
``python mcp_server.py --http`` alike)."""

from __future__ import annotations

import socket

from brain.errors import PortInUse

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def port_free(host: str, port: int) -> None:
    """Refuse a taken HTTP port before anything starts: no token printed, no "Starting ...
    on :PORT" line, no store opened. Bound as uvicorn binds (SO_REUSEADDR), then let go; a
    process that takes the port in between still fails the start, later."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise PortInUse(f"port {port} on {host} is taken ({exc.strerror}): stop what holds "
                            "it, or serve on another with 'brain serve --http --port N' (the "
                            f"default is {DEFAULT_PORT}; clients then use that port in their "
                            "URL)", host=host, port=port) from None
