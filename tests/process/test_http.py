"""``brain serve --http``: bearer tokens, 401 with no side effect, every tool over HTTP.

Real processes (``python -m brain.cli serve --http``), real loopback HTTP, real Qdrant Edge,
the offline hash embedder. One server (module scope) serves every test here; a second server
on the same data dir shows an HTTP server that forwards to the owner (and binds --host).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError

from brain.process import owner as own
from mcp_surface.profiles import RENAMED

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = float(os.environ.get("BRAIN_HTTP_START_S", "90"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN__")}
    env.update(
        BRAIN__HOME=str(home),
        BRAIN__EMBEDDING__MODEL="offline/hash-384",
        BRAIN__WORKERS__ENRICHMENT__ENABLED="false",
        BRAIN__MCP__TOOLS="full",  # the every-tool test calls the admin tools too
        HF_HUB_OFFLINE="1",
        PYTHONPATH=str(ROOT),
        # HTTP callers reach no folder unless configured: allow pytest's base temp dir,
        # which holds this server's home and every test's tmp_path.
        BRAIN__PATHS__ALLOWED_ROOTS=json.dumps([str(home.parent.parent)]),
    )
    return env


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    home: Path
    port: int
    stderr: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def output(self) -> str:
        return self.stderr.read_text(errors="replace")


def _start(home: Path, log: Path, *extra: str) -> Server:
    port = _free_port()
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "brain.cli", "serve", "--http", "--port", str(port), *extra],
            env=_env(home),
            cwd=str(ROOT),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    server = Server(proc, home, port, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}:\n{server.output()}")
        if "Uvicorn running" in server.output():
            return server
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"server not up after {START_TIMEOUT_S} s:\n{server.output()}")


def _stop(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("http")
    srv = _start(base / "home", base / "server.err")
    try:
        yield srv
    finally:
        _stop(srv)


def _token(server: Server) -> str:
    return (server.home / own.HTTP_TOKEN_FILE).read_text().strip()


@pytest.fixture
async def http_client(server: Server) -> AsyncIterator[Client]:
    transport = StreamableHttpTransport(server.url, auth=_token(server))
    async with Client(transport, timeout=60) as c:
        yield c


def _brain_status(home: Path) -> dict[str, Any]:
    """``brain status`` as a user runs it: asks the running owner over its socket."""
    out = subprocess.run(
        [sys.executable, "-m", "brain.cli", "status"],
        env=_env(home),
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket in LISTEN state on ``port`` (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, p = local.split(":")
        if int(p, 16) == port and state == "0A":
            found.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    return found


# ------------------------------------------------------------------------------ no token
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
ADD = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {
        "name": "add_memory",
        "arguments": {"content": "intruder note xq17", "project": "p"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def test_without_or_with_a_wrong_token_401_and_nothing_written(server: Server) -> None:
    before = _brain_status(server.home)["store"]["points"]
    bad_auth = [
        {},
        {"authorization": "Bearer wrong-token"},
        {"authorization": f"Bearer {_token(server)}x"},
        {"authorization": f"Basic {_token(server)}"},
        {"authorization": "Bearer"},
    ]
    async with httpx.AsyncClient(timeout=30) as http:
        for auth in bad_auth:
            for body in (INIT, ADD):
                res = await http.post(server.url, json=body, headers={**HEADERS, **auth})
                assert res.status_code == 401, (auth, body["method"], res.text)
                assert "intruder" not in res.text
            res = await http.get(server.url, headers={**HEADERS, **auth})
            assert res.status_code == 401
        # The sibling endpoint's status route is not reachable over TCP at all.
        res = await http.get(f"http://127.0.0.1:{server.port}/status")
        assert res.status_code in (401, 404)
        # A wrong token over a real MCP client fails to connect and writes nothing either.
        with pytest.raises(Exception):  # noqa: B017,PT011 - the transport's own error type
            bad = Client(StreamableHttpTransport(server.url, auth="nope"), timeout=10)
            async with bad:
                await bad.call_tool("add_memory", {"content": "intruder note xq17"})
    after = _brain_status(server.home)
    assert after["store"]["points"] == before
    # And through the token: no such note exists.
    async with Client(StreamableHttpTransport(server.url, auth=_token(server))) as good:
        res = await good.call_tool(
            "search_memory", {"query": "intruder note xq17", "all_projects": True}
        )
        assert all("intruder" not in h["content"] for h in res.structured_content["results"])


def test_token_file_is_private_and_binds_loopback(server: Server) -> None:
    path = server.home / own.HTTP_TOKEN_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = _token(server)
    assert len(token) >= 32
    # Printed once, at creation, on stderr; never in the log file.
    assert server.output().count(token) == 1
    assert token not in (server.home / "brain.log").read_text()
    assert _listening_addresses(server.port) == {"127.0.0.1"}
    info = own.read_info(server.home)
    assert info is not None and info.kind == "http" and info.pid == server.proc.pid


# ------------------------------------------------------------------------------ every tool
async def _call(c: Client, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    res = await c.call_tool(name, args or {})
    assert not res.is_error, (name, res.content)
    return res.structured_content or {}


async def _wait_for(c: Client, name: str, args: dict[str, Any], done: Any) -> dict[str, Any]:
    for _ in range(300):
        out = await _call(c, name, args)
        if done(out):
            return out
        await anyio.sleep(0.1)
    raise AssertionError(f"{name} never reached the expected state: {out}")


async def test_every_tool_works_with_the_token(
    server: Server, http_client: Client, tmp_path: Path
) -> None:
    c = http_client
    called: set[str] = set()

    async def call(name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        # an earlier release's name is its family's tool now (mcp_surface/profiles.py)
        called.add(RENAMED.get(name, (name, ""))[0])
        return await _call(c, name, args)

    p = "httpproj"
    # memory core
    a = (await call("add_memory", {"content": "Use uvloop for the event loop", "project": p}))[
        "note"
    ]
    b = (
        await call(
            "add_memory",
            {"content": "uvloop event loop crashed on fork", "project": p, "tags": ["loop"]},
        )
    )["note"]
    fleeting = (
        await call(
            "add_memory", {"content": "quick idea: cache", "project": p, "memory_type": "fleeting"}
        )
    )["note"]
    assert (await call("update_memory", {"zk_id": a["zk_id"], "new_content": "Use uvloop, v2"}))[
        "note"
    ]["content"] == "Use uvloop, v2"
    hits = await call("search_memory", {"query": "uvloop", "project": p, "top_k": 5})
    assert {h["zk_id"] for h in hits["results"]} >= {a["zk_id"], b["zk_id"]}
    await call("get_related", {"zk_id": b["zk_id"]})
    assert (await call("verify_note", {"zk_id": b["zk_id"]}))["citations"] == []  # cites none
    assert (await call("get_note", {"zk_id": a["zk_id"]}))["note"]["content"] == "Use uvloop, v2"
    inbox = await call("get_inbox", {"project": p})
    assert fleeting["zk_id"] in json.dumps(inbox)
    await call("distill_to_permanent", {"zk_id": fleeting["zk_id"]})
    assert (await call("forget_memory", {"zk_id": b["zk_id"]}))["forgotten"] is True
    await call("restore_note", {"zk_id": b["zk_id"]})
    assert (await call("brain_stats"))["data_dir"] == str(server.home)
    # workflow
    await call("open_session", {"project": p})
    await call("get_session_context", {"project": p})
    await call("close_session", {"project": p, "objective": "try http", "next_steps": ["more"]})
    failure = await call(
        "record_failure",
        {"content": "ImportError: uvloop", "project": p, "failure_signature": "py:uvloop"},
    )
    failure_id = failure.get("zk_id") or failure["note"]["zk_id"]
    await call(
        "record_resolution",
        {"failure_zk_id": failure_id, "fix_content": "pip install uvloop", "project": p},
    )
    await call("preflight_check", {"task": "set up uvloop", "project": p})
    await call("archive_stale_notes", {"dry_run": True})
    await call("decay_report", {"limit": 5})
    # agentic
    deep = await call("deep_search", {"query": "why does uvloop crash", "project": p})
    assert deep
    await call("consolidate_clusters", {"project": p, "dry_run": True})
    await call("brain_capabilities")
    # sources
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    (src_dir / "app.py").write_text("def handler():\n    return 'zebra-kettle'\n")
    added = await call("add_source", {"path": str(src_dir), "name": "s1", "trigger": "manual"})
    assert added["source"]["name"] == "s1"
    assert (await call("list_sources"))["count"] == 1
    job = await call("sync_source", {"source": "s1", "wait": True})
    assert job["status"] == "done", job
    await call("sync_status", {"job_id": job["job_id"]})
    await call("sync_status", {"source": "s1"})
    grep = await call("fs_search", {"query": "zebra-kettle", "search_mode": "grep"})
    assert "app.py" in json.dumps(grep)
    await call("fs_search", {"query": "handler", "source": "s1"})
    # fs: read, list, write (journalled), review
    assert (await call("fs_read", {"source": "s1", "path": "app.py"}))["presence"] == "synced"
    assert (await call("fs_list", {"source": "s1"}))["count"] == 1
    wrote = await call("fs_write", {"source": "s1", "path": "new.md", "content": "over http\n"})
    assert wrote["indexed"], wrote
    assert (await call("list_changes"))["count"] == 1
    seen = await call("preview_change", {"change_id": wrote["change"]["id"]})
    await call("approve_change", {"change_id": wrote["change"]["id"],
                                  "fingerprint": seen["fingerprint"]})
    again = await call("fs_write", {"source": "s1", "path": "new.md", "content": "v2\n"})
    seen = await call("preview_change", {"change_id": again["change"]["id"]})
    await call("revert_change", {"change_id": again["change"]["id"],
                                 "fingerprint": seen["fingerprint"]})
    assert (src_dir / "new.md").read_text() == "over http\n"
    await call("cancel_sync", {"source": "s1"})
    await call("rescan_source", {"source": "s1"})
    await call("reset_source_state", {"source": "s1"})
    await call("reembed", {"source": "s1"})
    await call("update_source", {"source": "s1", "exclude": ["*.log"]})
    await call("remove_source", {"source": "s1", "purge": True})
    await call("repair_orphans", {"dry_run": True})
    # files
    doc = tmp_path / "guide.md"
    doc.write_text("# Guide\n\nThe quokka protocol keeps the cache warm across restarts.\n")
    rec = await call("ingest_file", {"path": str(doc), "project": p})
    file_id = rec.get("id") or rec.get("file_id")
    assert file_id, rec
    await _wait_for(c, "get_file", {"file_id": file_id}, lambda r: r["status"] != "processing")
    called.add("files")
    assert (await call("get_file", {"file_id": file_id}))["status"] == "ready"
    assert (await call("list_files"))["count"] == 1
    found = await call("search_files", {"query": "quokka protocol cache", "threshold": 0.0})
    assert found["count"] >= 1
    await call("reprocess_file", {"file_id": file_id})
    await call("delete_file", {"file_id": file_id})
    # health
    assert (await call("health_stats", {"project": p}))["by_kind"]["note"] >= 1
    assert "orphan_chunks" in (await call("health_scan"))["findings"]
    assert (await call("health_duplicates", {"project": p}))["removes_nothing"] is True
    assert "hot_files" in await call("health_hot_files")
    assert (await call("health_gc"))["dry_run"] is True
    assert (await call("health_repair", {"project": p}))["dry_run"] is True
    assert "payload_indexes" in await call("health_collection")
    assert (await call("health_rebuild_indexes"))["dry_run"] is True
    assert (await call("health_quantization", {"mode": "none"}))["dry_run"] is True
    # model switch (read-only tools)
    assert (await call("model_status"))["active"] == 1
    assert (await call("model_estimate", {"model": "offline/hash-384", "dimension": 64}))[
        "points"] >= 1

    listed = {t.name for t in await c.list_tools()}
    assert listed - called == set(), "new tools: add a call for each to this test"


async def test_bad_arguments_are_tool_errors_not_crashes(http_client: Client) -> None:
    with pytest.raises(ToolError):
        await http_client.call_tool("get_related", {"zk_id": "ZK-00000000"})
    # The session survives a failed call.
    assert (await _call(http_client, "brain_stats"))["data_dir"]


# ------------------------------------------------------------------------------ identity
def _token_add(home: Path, user: str, agent: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "brain.cli", "token", "add", "--user", user, "--agent", agent],
        env=_env(home),
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


async def _private_view(url: str, token: str, word: str) -> tuple[str, list[dict[str, Any]]]:
    async with Client(StreamableHttpTransport(url, auth=token), timeout=60) as c:
        note = (
            await _call(
                c,
                "add_memory",
                {"content": f"private {word} of mine", "project": "tp", "visibility": "private"},
            )
        )["note"]
        res = await _call(
            c, "search_memory", {"query": "private of mine", "project": "tp", "top_k": 20,
                                 "detail": "full"}
        )
        return note["zk_id"], res["results"]


async def test_per_caller_tokens_act_as_their_identity(server: Server, tmp_path: Path) -> None:
    t1 = _token_add(server.home, "ann", "ann-laptop")
    t2 = _token_add(server.home, "bob", "bob-ci")
    stored = json.loads((server.home / own.TOKENS_FILE).read_text())
    assert t1 not in json.dumps(stored) and t2 not in json.dumps(stored)
    assert stat.S_IMODE((server.home / own.TOKENS_FILE).stat().st_mode) == 0o600

    z1, seen1 = await _private_view(server.url, t1, "kiwi")
    z2, seen2 = await _private_view(server.url, t2, "mango")
    assert z1 in {h["zk_id"] for h in seen1} and z2 not in {h["zk_id"] for h in seen1}
    assert z2 in {h["zk_id"] for h in seen2} and z1 not in {h["zk_id"] for h in seen2}
    assert {h["agent_id"] for h in seen2} <= {"bob-ci"}

    # A second HTTP server on the same data dir forwards to the owner (it cannot open the
    # store) and keeps each caller's identity; --host makes it listen beyond loopback.
    second = _start(server.home, tmp_path / "second.err", "--host", "0.0.0.0")
    try:
        assert _listening_addresses(second.port) == {"0.0.0.0"}
        assert own.read_info(server.home).pid == server.proc.pid  # still the owner
        z3, seen3 = await _private_view(second.url, t1, "papaya")
        assert {z1, z3} <= {h["zk_id"] for h in seen3}
        assert z2 not in {h["zk_id"] for h in seen3}
        async with httpx.AsyncClient(timeout=30) as http:
            res = await http.post(second.url, json=INIT, headers=HEADERS)
            assert res.status_code == 401
        status = _brain_status(server.home)
        assert second.proc.pid in {c["pid"] for c in status["clients"]}
        assert {"pid", "address", "kind"} <= set(status["owner"])
        assert status["store"]["ok"] is True
    finally:
        _stop(second)
