"""One JSON POST with a hard time limit, on the standard library (no new dependency).

A socket timeout bounds each read, not the request: a server that trickles a byte every few
seconds would hold the caller for ever. A timer shuts the socket down when the limit passes,
which wakes a blocked read at once, so one request never outlives ``limit_s``.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# The largest reply accepted: 2048 vectors of 3072 floats as JSON fit well under it.
MAX_REPLY_BYTES = 256 * 1024 * 1024


class RequestTimedOut(Exception):
    """The request passed its time limit (connect, send or read)."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def post_json(url: str, payload: Any, headers: dict[str, str], limit_s: float,
              max_bytes: int = MAX_REPLY_BYTES) -> Reply:
    """POST ``payload`` as JSON to ``url``; raise RequestTimedOut after ``limit_s`` seconds,
    OSError / http.client.HTTPException when the connection fails or the reply passes
    ``max_bytes``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=limit_s)
    fired = threading.Event()

    def abort() -> None:
        fired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

    timer = threading.Timer(limit_s, abort)
    timer.daemon = True
    timer.start()
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    data = json.dumps(payload).encode()
    try:
        conn.request("POST", path, body=data, headers={
            "Content-Type": "application/json", "Accept": "application/json", **headers})
        resp = conn.getresponse()
        body = resp.read(max_bytes + 1)
        if fired.is_set():
            raise RequestTimedOut(f"no complete reply within {limit_s:g}s")
        if len(body) > max_bytes:
            raise http.client.HTTPException(f"reply larger than {max_bytes} bytes")
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    except (OSError, http.client.HTTPException) as exc:
        if fired.is_set() or isinstance(exc, TimeoutError):
            raise RequestTimedOut(f"no complete reply within {limit_s:g}s") from None
        raise
    finally:
        timer.cancel()
        conn.close()
