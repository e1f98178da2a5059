"""What a ``brain`` command says when the server it posts to cannot run it: one line with a
stable code and what to do, never an HTTP traceback (brain/cli/common.py ``call_owner``)."""

from __future__ import annotations

import http.server
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain.cli.common import OwnerLost, call_owner
from brain.process.owner import OwnerInfo


class _UnixHTTP(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _Old(http.server.BaseHTTPRequestHandler):
    """A server of an earlier release: its owner endpoint has no /command route."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(404)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"Not Found")

    def log_message(self, *args: object) -> None:
        pass

    def address_string(self) -> str:
        return "unix"


@pytest.fixture
def old_server(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "owner.sock")
    server = _UnixHTTP(path, _Old)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_of_an_earlier_release_is_named(old_server: str) -> None:
    owner = (OwnerInfo(4242, old_server, "now"), "token")
    with pytest.raises(OwnerLost) as err:
        call_owner(owner, "/command", {"command": "stats", "args": {}})
    assert err.value.code == "OWNER_UNAVAILABLE"
    assert "pid 4242" in str(err.value) and "earlier release" in str(err.value)
    assert "restart it" in str(err.value)


def test_a_server_gone_midway_is_one_line(tmp_path: Path) -> None:
    owner = (OwnerInfo(4242, str(tmp_path / "gone.sock"), "now"), "token")
    with pytest.raises(OwnerLost) as err:
        call_owner(owner, "/command", {"command": "stats", "args": {}})
    assert "pid 4242" in str(err.value) and "stopped answering" in str(err.value)
    assert "\n" not in str(err.value)
