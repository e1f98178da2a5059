"""Hostile bytes on a real stdio server: every request gets an answer, and the server goes on.

The SDK's stdio transport drops a line it cannot decode without a reply (a lone surrogate
``"\\ud800"``, which pydantic's JSON parser refuses; a line that is not JSON; JSON that is not
JSON-RPC), so the client waited forever for that request. mcp_surface/stdio_guard.py answers
them. Each test speaks raw JSON-RPC lines to ``python mcp_server.py``; a missing reply fails
after a bound instead of hanging.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPLY_S = 20.0  # a loaded 2-core machine answers in well under a second; silence is a hang
START_S = 120.0  # first reply includes the server's start

NO_ID = object()


class RawStdio:
    """A stdio server process fed raw bytes; replies are read on a thread so none blocks."""

    def __init__(self, home: Path, user_home: Path) -> None:
        env = {**os.environ, "BRAIN__HOME": str(home), "HF_HUB_OFFLINE": "1",
               "BRAIN__EMBEDDING__MODEL": "offline/hash-384", "PYTHONPATH": str(ROOT),
               "BRAIN__MCP__TOOLS": "full",  # its tests call admin tools too
               "HOME": str(user_home)}
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "mcp_server.py")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr.extend(self.proc.stderr)

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.send(json.dumps(body).encode())
        return self.reply(rid)

    def reply(self, rid: Any, timeout: float = REPLY_S) -> dict[str, Any]:
        """The response to ``rid`` (None: a response with ``"id": null``); notifications and
        log messages on the way are skipped."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                tail = b"".join(self.stderr)[-2000:].decode(errors="replace")
                pytest.fail(f"no reply to id {rid!r} within {timeout} s (server hung); "
                            f"alive={self.proc.poll() is None}; stderr tail:\n{tail}")
            msg = json.loads(line)  # every stdout line must be JSON
            if msg.get("id", NO_ID) == rid and ("result" in msg or "error" in msg):
                return msg

    def stats(self, rid: int) -> dict[str, Any]:
        res = self.request(rid, "tools/call", {"name": "brain_stats", "arguments": {}})
        assert "result" in res and not res["result"].get("isError"), res
        return res["result"]["structuredContent"]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def server(home: Path, tmp_path: Path) -> Iterator[RawStdio]:
    srv = RawStdio(home, tmp_path)
    init = srv.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "hostile", "version": "0"}})
    assert "result" in init, init
    srv.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    try:
        yield srv
    finally:
        srv.close()


def _call(rid: int, tool: str, args_json: str) -> bytes:
    """A tools/call line whose arguments are spliced in raw, so escapes reach the server as
    written (json.dumps would refuse or re-encode them)."""
    return (f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call",'
            f'"params":{{"name":"{tool}","arguments":{args_json}}}}}').encode()


def _failed(msg: dict[str, Any]) -> bool:
    return "error" in msg or bool(msg.get("result", {}).get("isError"))


def test_lone_surrogate_gets_an_error_and_changes_nothing(server: RawStdio) -> None:
    before = server.stats(1)["notes"]
    for rid, line in enumerate([
        _call(10, "add_memory", r'{"content":"token \ud800 here"}'),
        _call(11, "add_memory", r'{"content":"low \udc00 alone","tags":["\udfff"]}'),
        _call(12, "search_memory", r'{"query":"\ud83d"}'),  # half of an emoji pair
        _call(13, r"add_memory\ud800", r'{"content":"x"}'),
    ], start=10):
        server.send(line)
        msg = server.reply(rid, timeout=START_S if rid == 10 else REPLY_S)
        assert _failed(msg), msg
        if "error" in msg:
            assert msg["error"]["code"] == -32700 and "surrogate" in msg["error"]["message"]
    # a surrogate in the id itself: the id cannot be echoed, so the answer carries id null
    server.send(b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/call",'
                b'"params":{"name":"brain_stats","arguments":{}}}')
    assert server.reply(None)["error"]["code"] == -32700
    assert server.stats(20)["notes"] == before  # nothing was written, and it still answers
    # a proper surrogate pair is valid text and is kept
    server.send(_call(21, "add_memory", r'{"content":"deploy done \ud83d\ude80"}'))
    ok = server.reply(21)
    assert not _failed(ok), ok
    assert "\U0001f680" in ok["result"]["structuredContent"]["note"]["content"]


def test_lines_that_are_not_json_rpc_get_an_error(server: RawStdio) -> None:
    server.send(b"this is not json")
    assert server.reply(None)["error"]["code"] == -32700
    server.send(b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":')
    assert server.reply(5)["error"]["code"] == -32700  # truncated, but its id is readable
    server.send(b'{"jsonrpc":"2.0","method":"tools/call","params":{"id":55,"name":')
    assert server.reply(None)["error"]["code"] == -32700  # an inner "id" is not the request's
    server.send(b'{"id":6,"hello":"world"}')
    assert server.reply(6)["error"]["code"] == -32600
    server.send(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2]}')
    assert server.reply(7)["error"]["code"] == -32600
    server.send(b"[]")
    assert server.reply(None)["error"]["code"] == -32600
    server.send(b"[" * 100_000 + b"]" * 100_000)  # past every JSON parser's nesting limit
    assert server.reply(None)["error"]["code"] == -32700
    server.send(b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"x":'
                + b"[" * 5_000 + b"]" * 5_000 + b"}}")
    assert server.reply(9)["error"]["code"] in (-32700, -32600)
    server.stats(8)


def test_invalid_utf8_is_answered(server: RawStdio) -> None:
    """Bytes that are not UTF-8 reach the tool as U+FFFD (the SDK decodes with errors=replace),
    so the call is answered like any other; stdout stays valid UTF-8 JSON."""
    server.send(_call(3, "add_memory", '{"content":"caf\\u00e9 RAW_BYTES"}')
                .replace(b"RAW_BYTES", b"\xff\xfe\xc3\x28 \xed\xa0\x80"))
    msg = server.reply(3, timeout=START_S)
    assert not _failed(msg), msg
    assert "\ufffd" in msg["result"]["structuredContent"]["note"]["content"]
    server.send(b"\xff\xfe\xfd")
    assert server.reply(None)["error"]["code"] == -32700
    server.stats(4)


def test_file_name_that_is_not_utf8_does_not_break_replies(server: RawStdio,
                                                           tmp_path: Path) -> None:
    """A source file whose name is not UTF-8 reaches Python as a lone surrogate
    (surrogateescape). Replies must still be written (success or a typed error, never the
    serializer's internal error), and the server go on."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "notes.txt").write_text("the deploy script lives in ops/deploy.sh\n")
    os.makedirs(os.fsencode(folder) + b"/sub", exist_ok=True)
    with open(os.fsencode(folder) + b"/sub/caf\xe9.txt", "wb") as f:
        f.write(b"deploy checklist for the cafe\n")
    added = server.request(2, "tools/call", {"name": "add_source", "arguments": {
        "path": str(folder), "name": "proj", "trigger": "manual"}})
    assert not _failed(added), added
    for rid, (tool, args) in enumerate([
        ("fs_search", {"query": "deploy", "search_mode": "grep"}),
        ("fs_search", {"query": "deploy", "search_mode": "filter"}),
        ("fs_search", {"query": "deploy checklist"}),
        ("list_sources", {}),
    ], start=3):
        msg = server.request(rid, "tools/call", {"name": tool, "arguments": args})
        assert not _failed(msg) or _typed(msg), (tool, msg)
    server.stats(9)


def _typed(msg: dict[str, Any]) -> bool:
    """A tool error carrying one of brain/errors.py's codes, not an internal error's text."""
    text = msg.get("result", {}).get("content", [{}])[0].get("text", "")
    return bool(re.match(r"\[[A-Z_]+\] ", text))


async def test_a_reply_holding_a_lone_surrogate_is_still_written() -> None:
    """A reply can quote text from the disk (a file name that is not UTF-8 is a lone surrogate
    to Python). The SDK's writer would raise on it and take the server down; the guard's
    writer sends it with U+FFFD instead, keeping the id and the error code."""
    import anyio
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData, JSONRPCError

    from mcp_surface.stdio_guard import _TextWriter

    send, receive = anyio.create_memory_object_stream[SessionMessage](1)
    bad = JSONRPCError(jsonrpc="2.0", id=9, error=ErrorData(
        code=-32602, message="[INVALID_ARGUMENT] no such file: /src/caf\udce9.txt"))
    with pytest.raises(ValueError, match="surrogates not allowed"):
        bad.model_dump_json()  # what the SDK's stdout writer does with it
    await _TextWriter(send).send(SessionMessage(bad))
    out = json.loads((await receive.receive()).message.model_dump_json(exclude_unset=True))
    assert out["id"] == 9 and out["error"]["code"] == -32602
    assert out["error"]["message"] == "[INVALID_ARGUMENT] no such file: /src/caf\ufffd.txt"
