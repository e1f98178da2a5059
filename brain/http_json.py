"""One JSON request (POST, GET) with a hard time limit, on the standard library.

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
              connect_to: str | None = None, max_bytes: int = MAX_REPLY_BYTES) -> Reply:
    """POST ``payload`` as JSON to ``url``; raise RequestTimedOut after ``limit_s`` seconds,
    OSError / http.client.HTTPException when the connection fails or the reply passes
    ``max_bytes``. ``connect_to``: the IP address to connect to (a pinned address), the
    URL's host still named in Host and TLS."""
    return request_json("POST", url, payload, headers, limit_s, connect_to, max_bytes)


def get_json(url: str, headers: dict[str, str], limit_s: float) -> Reply:
    """GET ``url`` (a JSON API), bounded like :func:`post_json`."""
    return request_json("GET", url, None, headers, limit_s)


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects to ``ip`` whatever the host name resolves to now (Host stays the name)."""

    def __init__(self, host: str, port: int | None, ip: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ip = ip

    def connect(self) -> None:
        self.sock = socket.create_connection((self._ip, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """As :class:`_PinnedHTTP`, with TLS checked against the host name (SNI and certificate)."""

    def __init__(self, host: str, port: int | None, ip: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ip = ip

    def connect(self) -> None:
        sock = socket.create_connection((self._ip, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def request_json(method: str, url: str, payload: Any, headers: dict[str, str],
                 limit_s: float, connect_to: str | None = None,
                 max_bytes: int = MAX_REPLY_BYTES) -> Reply:
    """One request with a JSON body (``payload`` None: no body) under a hard time limit."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    conn: http.client.HTTPConnection
    if connect_to:
        pinned = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
        conn = pinned(parts.hostname, parts.port, connect_to, limit_s)
    else:
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
    data = json.dumps(payload).encode() if payload is not None else None
    sent = {"Accept": "application/json", **headers}
    if data is not None:
        sent["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=sent)
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
