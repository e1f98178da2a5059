"""The explorer is served by the process that owns the data dir, never from a second store.

- ``brain ui`` with no server running becomes the owner (the same election as a server):
  it prints a one-time login URL; an agent's stdio server started after it forwards its
  tool calls to it, and a note that agent adds shows in the explorer at once; a second
  ``brain ui`` asks the owner for a new link instead of opening the store.
- ``brain serve --http`` with ``[ui] enabled`` serves the explorer from its own process, and
  its HTTP token logs in (the same tokens and identities as its tools).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from brain.process import owner as own
from tests.process.test_http import ROOT, _env, _free_port, _start, _stop

pytestmark = pytest.mark.slow
URL = re.compile(r"(http://127\.0\.0\.1:(\d+))/login\?token=\S+")


def _ui_env(home: Path, port: int) -> dict[str, str]:
    return {**_env(home), "BRAIN__UI__PORT": str(port)}


def _brain_ui(home: Path, port: int) -> str:
    out = subprocess.run([sys.executable, "-m", "brain.cli", "ui"], env=_ui_env(home, port),
                         cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _session(link: str) -> httpx.Client:
    c = httpx.Client(base_url=URL.match(link).group(1), timeout=30)  # type: ignore[union-attr]
    assert c.get(link).status_code == 303
    return c


async def test_brain_ui_owns_the_data_dir_and_shows_live_data(tmp_path: Path) -> None:
    home, port = tmp_path / "home", _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "brain.cli", "ui"], env=_ui_env(home, port),
                            cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        found = URL.search(line)
        assert found, f"{line!r} {proc.stderr.read() if proc.poll() is not None else ''}"
        assert int(found.group(2)) == port and "owns the data dir" in line
        assert own.read_info(home).pid == proc.pid  # type: ignore[union-attr]
        ui = _session(found.group(0))
        agent = StdioTransport(sys.executable, ["mcp_server.py"], env=_env(home), cwd=str(ROOT),
                               keep_alive=False)
        async with Client(agent, timeout=60) as c:  # a proxy: it forwards to `brain ui`
            res = await c.call_tool("add_memory", {"content": "zorbquux live from an agent",
                                                   "project": "shop"})
        zk = res.structured_content["note"]["zk_id"]
        page = ui.get("/search?q=zorbquux+live").text
        assert zk in page
        again = _brain_ui(home, port)  # asks the owner: no second store is opened
        assert f"served by the owner, pid {proc.pid}" in again
        assert _session(URL.search(again).group(0)).get(f"/note/{zk}").status_code == 200  # type: ignore[union-attr]
        assert ui.get(URL.search(line).group(0)).status_code == 401  # type: ignore[union-attr]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0
    info = own.read_info(home)  # it let go of the data dir (or a live agent took it over)
    assert info is None or not info.alive or info.pid != proc.pid


def test_an_http_owner_with_ui_enabled_serves_it_with_its_tokens(tmp_path: Path) -> None:
    home, port = tmp_path / "home", _free_port()
    home.mkdir()
    # [ui] in the data dir's brain.toml: _start's environment carries no BRAIN__ setting
    (home / "brain.toml").write_text(f"[ui]\nenabled = true\nport = {port}\n")
    srv = _start(home, tmp_path / "server.err")
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                form = httpx.get(base + "/login", timeout=5)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, srv.output()
                time.sleep(0.1)
        nonce = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
        token = (home / own.HTTP_TOKEN_FILE).read_text().strip()
        with httpx.Client(base_url=base, timeout=30, cookies=form.cookies) as c:
            assert c.post("/login", data={"csrf": nonce, "token": token}).status_code == 303
            health = c.get("/api/health").json()
        assert health["health"]["model"]["active"] == "offline/hash-384"
        out = _brain_ui(home, port)
        assert f"served by the owner, pid {srv.proc.pid}" in out and base in out
    finally:
        _stop(srv)
