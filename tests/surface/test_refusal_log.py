"""A refused call is logged once, with its code and the message the caller got, at INFO
when the call was refused as asked and WARNING when the server is in trouble; never as
fastmcp's bare "Error calling tool 'x'" ERROR line on the client's MCP log."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from mcp_surface.tool_errors import log_level

ROOT = Path(__file__).resolve().parents[2]


async def test_a_refused_call_logs_its_code_and_message_not_a_bare_error(
        home: Path, tmp_path: Path) -> None:
    stderr = tmp_path / "server.stderr"
    env = {**os.environ, "BRAIN__HOME": str(home), "HF_HUB_OFFLINE": "1",
           "BRAIN__EMBEDDING__MODEL": "offline/hash-384"}
    server = StdioTransport(command=sys.executable, args=[str(ROOT / "mcp_server.py")],
                            env=env, cwd=str(tmp_path), log_file=stderr)
    async with Client(server) as client:
        res = await client.call_tool("get_note", {"zk_id": "ZK-00000000"},
                                     raise_on_error=False)
        assert res.is_error and res.structured_content["error"]["code"] == "NOTE_NOT_FOUND"
    said = stderr.read_text(encoding="utf-8")
    logged = (home / "brain.log").read_text(encoding="utf-8")
    assert "Error calling tool" not in said
    for text in (said, logged):
        lines = [ln for ln in text.splitlines() if "tool get_note refused" in ln]
        assert len(lines) == 1 and " INFO " in lines[0], text
        assert "[NOTE_NOT_FOUND] no note ZK-00000000" in lines[0]


def test_server_trouble_is_a_warning_and_a_refusal_as_asked_is_info() -> None:
    assert log_level("STORE_DAMAGED") == log_level("DISK_FULL") == logging.WARNING
    assert log_level("NOTE_NOT_FOUND") == log_level("INVALID_ARGUMENT") == logging.INFO
