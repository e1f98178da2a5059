"""A retried write is applied once (issue 50, finding 9): over real HTTP (``brain serve
--http``), a call resent with the same idempotency key, from a new connection, at the same
time, or after the server was killed and started again, answers the first result and leaves
one note; the same key with other arguments is refused. ``brain seed`` checks every entry
before writing any."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.process import owner as own
from config import load_settings
from tests.process.test_http import ROOT, Server, _env, _start, _stop


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = _start(tmp_path / "srv" / "home", tmp_path / "server.err")
    try:
        yield srv
    finally:
        if srv.proc.poll() is None:
            _stop(srv)


def _token(server: Server) -> str:
    return (server.home / own.HTTP_TOKEN_FILE).read_text().strip()


async def _add(server: Server, content: str, key: str | None = None,
               meta_key: str | None = None, **args: Any) -> dict[str, Any]:
    """One add_memory from a new connection (a client that lost its first one resends so)."""
    headers = {"Idempotency-Key": key} if key else {}
    transport = StreamableHttpTransport(server.url, auth=_token(server), headers=headers)
    async with Client(transport, timeout=60) as c:
        res = await c.call_tool("add_memory", {"content": content, **args},
                                meta={"idempotency_key": meta_key} if meta_key else None)
    return dict(res.structured_content or {})


def _notes_with(home: Path, word: str) -> list[dict[str, Any]]:
    settings = load_settings(home=home)
    settings.embedding.model = "offline/hash-384"
    with own.exclusive(home, "cli"), Brain(settings) as b:
        return [n for n in b.memory.notes() if word in n.get("content", "")]


async def test_a_resent_write_is_applied_once(server: Server) -> None:
    first = await _add(server, "the quillferret deploy needs a warm cache", key="k-1")
    again = await _add(server, "the quillferret deploy needs a warm cache", key="k-1")
    assert again["note"]["zk_id"] == first["note"]["zk_id"]
    # Two resends at once: the second waits for the first and answers its result.
    got: list[str] = []

    async def one() -> None:
        res = await _add(server, "quillferret tokens rotate on Mondays", key="k-2")
        got.append(res["note"]["zk_id"])

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    assert len(got) == 3 and len(set(got)) == 1
    # The key in the call's _meta does the same.
    m1 = await _add(server, "quillferret backups run at night", meta_key="k-3")
    m2 = await _add(server, "quillferret backups run at night", meta_key="k-3")
    assert m1["note"]["zk_id"] == m2["note"]["zk_id"]
    # The same key for another call is refused, and writes nothing.
    with pytest.raises(ToolError, match=r"CONFLICT.*another call"):
        await _add(server, "quillferret something else entirely", key="k-1")
    # No key: two calls are two notes, as before.
    await _add(server, "quillferret unkeyed twice")
    await _add(server, "quillferret unkeyed twice")
    _stop(server)
    notes = _notes_with(server.home, "quillferret")
    contents = sorted(n["content"] for n in notes)
    assert contents == sorted([
        "the quillferret deploy needs a warm cache", "quillferret tokens rotate on Mondays",
        "quillferret backups run at night", "quillferret unkeyed twice",
        "quillferret unkeyed twice"])


async def test_a_write_resent_after_a_crash_is_not_written_twice(
    server: Server, tmp_path: Path
) -> None:
    first = await _add(server, "the marmotglide index is rebuilt weekly", key="crash-1")
    os.kill(server.proc.pid, signal.SIGKILL)  # the answer may never have reached the client
    server.proc.wait()
    again = _start(server.home, tmp_path / "server2.err")
    try:
        res = await _add(again, "the marmotglide index is rebuilt weekly", key="crash-1")
        assert res["note"]["zk_id"] == first["note"]["zk_id"]
    finally:
        _stop(again)
    assert len(_notes_with(server.home, "marmotglide")) == 1


def test_seed_writes_nothing_when_a_later_entry_is_bad(tmp_path: Path, home: Path) -> None:
    env = {**_env(home), "BRAIN__PATHS__ALLOWED_ROOTS": json.dumps([str(tmp_path)])}
    cmd = [sys.executable, "-m", "brain.cli", "seed"]
    bad_thirds: dict[str, tuple[dict[str, Any], str]] = {
        "memory_type": ({"memory_type": "eternal"}, "memory_type='eternal' is not valid"),
        "tags": ({"tags": "one,two"}, "tags"),
        "pinned": ({"pinned": "yes"}, "pinned must be true or false"),
        "project": ({"project": "   "}, "project must be a non-empty name"),
        "visibility": ({"visibility": "public"}, "visibility='public' is not valid"),
        "content": ({"content": "x" * 2_000_000}, "content"),
    }
    for field, (bad, message) in bad_thirds.items():
        entries = [{"content": f"seeded {field} fact {i}", "project": "seed"} for i in range(4)]
        entries[2] = {**entries[2], **bad}
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps(entries))
        res = subprocess.run([*cmd, str(path)], env=env, cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 2, (field, res.stderr[-2000:])
        assert "entry 3 is refused" in res.stderr and message in res.stderr, res.stderr
        assert "nothing was written" in res.stderr
        assert not (home / "owner.json").exists()  # refused before any server started
    assert not (home / "store_manifest.json").exists()  # no store was ever opened


def _rpc(client: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any]
         ) -> tuple[httpx.Response, dict[str, Any] | None]:
    res = client.post(url, json=body, headers=headers)
    if not res.content:
        return res, None
    if res.headers.get("content-type", "").startswith("text/event-stream"):
        data = [ln[5:].strip() for ln in res.text.splitlines() if ln.startswith("data:")]
        return res, json.loads(data[-1])
    return res, res.json()


def test_a_resent_request_id_in_a_session_is_applied_once(server: Server) -> None:
    """No key: within a stateful MCP session, a write resent with its JSON-RPC request id
    (which MCP forbids reusing for another request) is the same call."""
    headers = {"Authorization": f"Bearer {_token(server)}",
               "Accept": "application/json, text/event-stream"}
    with httpx.Client(timeout=60) as client:
        res, _ = _rpc(client, server.url, headers, {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "retrier", "version": "1"}}})
        session = res.headers.get("mcp-session-id")
        assert session, res.headers
        headers["mcp-session-id"] = session
        _rpc(client, server.url, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "add_memory",
                           "arguments": {"content": "the wrenholt cache is sharded by tenant"}}}
        answers = [_rpc(client, server.url, headers, call)[1] for _ in range(2)]
        ids = [a["result"]["structuredContent"]["note"]["zk_id"] for a in answers if a]
        assert len(ids) == 2 and ids[0] == ids[1], answers
        # The next request id is a new call.
        other = _rpc(client, server.url, headers, {**call, "id": 8})[1]
        assert other and other["result"]["structuredContent"]["note"]["zk_id"] != ids[0]
    _stop(server)
    assert len(_notes_with(server.home, "wrenholt")) == 2
