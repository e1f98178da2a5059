"""An agent's view: `python mcp_server.py` over stdio, stdout carrying only MCP messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

ROOT = Path(__file__).resolve().parents[2]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "BRAIN__HOME": str(home), "HF_HUB_OFFLINE": "1",
            "BRAIN__EMBEDDING__MODEL": "offline/hash-384"}


async def test_stdio_server_lists_and_calls_tools(home: Path) -> None:
    transport = StdioTransport(command=sys.executable, args=[str(ROOT / "mcp_server.py")],
                               env=_env(home), cwd=str(ROOT))
    async with Client(transport) as client:
        names = {t.name for t in await client.list_tools()}
        assert {"add_memory", "search_memory", "brain_stats"} <= names
        await client.call_tool("add_memory", {"content": "Redis runs on port 6379 in dev",
                                              "project": "stdio"})
        res = await client.call_tool("search_memory", {"query": "redis port", "project": "stdio"})
        assert res.structured_content["count"] == 1
    assert (home / "brain.log").exists()


def test_stdout_holds_only_jsonrpc(home: Path) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "mcp_server.py")],
        input=json.dumps(init) + "\n", capture_output=True, text=True, timeout=120,
        env=_env(home), cwd=str(ROOT),
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines, proc.stderr[-2000:]
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0"


def test_bad_config_fails_at_startup_naming_the_field(home: Path) -> None:
    env = {**_env(home), "BRAIN__DECAY__STALE_DAYS": "soon"}
    proc = subprocess.run([sys.executable, str(ROOT / "mcp_server.py")], input="",
                          capture_output=True, text=True, timeout=60, env=env, cwd=str(ROOT))
    assert proc.returncode == 2
    assert "decay.stale_days" in proc.stderr and "BRAIN__DECAY__STALE_DAYS" in proc.stderr
    assert proc.stdout == ""


def test_brain_processes_load_models_without_progress_bars(tmp_path: Path) -> None:
    """setup_logging (the server's and the CLI's first step) turns off the model libraries'
    tqdm bars, whether they were imported before it or after: a bar that failed writing to
    the stderr of a client that had quit left tqdm's lock taken, and the server hung on its
    next model load and on exit (a Claude Code run left two servers behind)."""
    code = (
        "import os, sys; os.environ.pop('HF_HUB_DISABLE_PROGRESS_BARS', None)\n"
        "early = sys.argv[1] == 'early'\n"
        "if early: import transformers.utils.logging as tl\n"
        "from pathlib import Path; from brain.process.logs import setup_logging\n"
        "setup_logging(Path(sys.argv[2]))\n"
        "import transformers.utils.logging as tl\n"
        "bar = tl.tqdm(range(3))\n"
        "print(type(bar).__name__, tl.is_progress_bar_enabled(),"
        " os.environ['HF_HUB_DISABLE_PROGRESS_BARS'])\n"
    )
    for when in ("early", "late"):
        env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
        out = subprocess.run([sys.executable, "-c", code, when, str(tmp_path / when)],
                             capture_output=True, text=True, cwd=str(ROOT), timeout=120,
                             env={**env, "PYTHONPATH": str(ROOT)}, check=True)
        assert out.stdout.split() == ["EmptyTqdm", "False", "1"], (when, out.stdout, out.stderr)


def _requests(*msgs: dict[str, object] | str) -> str:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    return "".join((m if isinstance(m, str) else json.dumps(m)) + "\n"
                   for m in (init, done, *msgs))


def test_files_as_stdin_and_stdout_are_served_by_the_sdk_transport(home: Path,
                                                                   tmp_path: Path) -> None:
    """Regular files cannot be read on the event loop (pipe_stdio_server); the SDK's
    threaded transport serves them, with the same answers."""
    requests, replies = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    requests.write_text(_requests({"jsonrpc": "2.0", "id": 2, "method": "ping"}, "not json"))
    with open(requests, "rb") as fin, open(replies, "wb") as fout:
        proc = subprocess.run([sys.executable, str(ROOT / "mcp_server.py")], stdin=fin,
                              stdout=fout, stderr=subprocess.PIPE, timeout=120, env=_env(home),
                              cwd=str(ROOT))
    got = {m["id"]: m for m in map(json.loads, replies.read_text().splitlines())}
    assert set(got) == {1, 2, None}, proc.stderr[-2000:]  # None: the line that is not JSON
    assert got[2]["result"] == {} and got[None]["error"]["code"] == -32700


async def test_a_line_past_the_limit_is_answered_and_the_next_one_read() -> None:
    """The event-loop reader skips a line longer than its limit, hands the screen an error
    for it (answered -32700), and reads the next line whole."""
    import asyncio

    import anyio

    from mcp_surface.stdio_guard import Inbound, _read_lines

    reader = asyncio.StreamReader(limit=64)
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 7, "method": "' + b"x" * 500 + b'"}\n')
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 8, "method": "ping"}\n')
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 9, "method": "ping"}')  # no final newline
    reader.feed_eof()
    send, receive = anyio.create_memory_object_stream[Inbound](10)
    await _read_lines(reader, send)
    got = [item async for item in receive]
    assert isinstance(got[0], ValueError) and "longer than" in str(got[0])
    assert [getattr(getattr(m, "message", None), "id", None) for m in got[1:]] == [8, 9]
