"""What Claude Code itself sends its model about this server's tools, measured without a model.

Claude Code runs ``claude -p`` against a loopback stand-in of the Anthropic Messages API that
records each request body and answers "ok" (on the first turn it asks Claude Code to wait for
the MCP servers still connecting, with Claude Code's own WaitForMcpServers tool, so the
second request carries the server's tools). The report is the number of ``mcp__brain__*``
tools in that request and their JSON characters: the context Claude Code spends on the brain
on every turn.

Needs the npm clients of ../shared/tools/real-clients.sh in /tmp/clients (it installs them):

    python -m bench.claude_code_view [--profile core|full] [--server path/to/mcp_server.py]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLAUDE = Path("/tmp/clients/node_modules/.bin/claude")


class _FakeModel(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if "count_tokens" in self.path:
            return self._send({"input_tokens": 1})
        self.requests.append(body)
        names = [t.get("name", "") for t in body.get("tools", [])]
        wait = len(self.requests) == 1 and "WaitForMcpServers" in names
        block = ({"type": "tool_use", "id": "toolu_1", "name": "WaitForMcpServers", "input": {}}
                 if wait else {"type": "text", "text": "ok"})
        stop = "tool_use" if wait else "end_turn"
        if not body.get("stream"):
            return self._send({"id": "msg_1", "type": "message", "role": "assistant",
                               "model": body.get("model", ""), "content": [block],
                               "stop_reason": stop, "stop_sequence": None,
                               "usage": {"input_tokens": 1, "output_tokens": 1}})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        start = {**block, "input": {}} if wait else {"type": "text", "text": ""}
        delta = ({"type": "input_json_delta", "partial_json": "{}"} if wait
                 else {"type": "text_delta", "text": "ok"})
        for kind, data in (
            ("message_start", {"message": {"id": "msg_1", "type": "message", "role": "assistant",
                                           "model": body.get("model", ""), "content": [],
                                           "stop_reason": None, "stop_sequence": None,
                                           "usage": {"input_tokens": 1, "output_tokens": 0}}}),
            ("content_block_start", {"index": 0, "content_block": start}),
            ("content_block_delta", {"index": 0, "delta": delta}),
            ("content_block_stop", {"index": 0}),
            ("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 1}}),
            ("message_stop", {}),
        ):
            self.wfile.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"
                             .encode())

    def _send(self, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def measure(server: Path, profile: str) -> dict[str, Any]:
    if not CLAUDE.exists():
        raise SystemExit(f"{CLAUDE} is missing: run ../shared/tools/real-clients.sh once")
    api = ThreadingHTTPServer(("127.0.0.1", 0), _FakeModel)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    _FakeModel.requests = []
    with tempfile.TemporaryDirectory() as user, tempfile.TemporaryDirectory() as brain_home:
        env = {**os.environ, "HOME": user, "ANTHROPIC_API_KEY": "sk-loopback-not-a-key",
               "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{api.server_port}"}
        subprocess.run([str(CLAUDE), "mcp", "add", "brain", "-e", f"BRAIN__HOME={brain_home}",
                        "-e", "HF_HUB_OFFLINE=1", "-e", f"BRAIN__MCP__TOOLS={profile}",
                        "-e", f"PYTHONPATH={server.parent}", "--", sys.executable, str(server)],
                       env=env, cwd=user, check=True, capture_output=True, timeout=120)
        subprocess.run([str(CLAUDE), "-p", "hello", "--output-format", "json",
                        "--allowedTools", "WaitForMcpServers"],
                       env=env, cwd=user, check=True, capture_output=True, timeout=180)
    api.shutdown()
    last = _FakeModel.requests[-1]
    brain = [t for t in last.get("tools", []) if t.get("name", "").startswith("mcp__brain__")]
    return {"profile": profile, "requests": len(_FakeModel.requests),
            "tools_in_request": len(last.get("tools", [])), "brain_tools": len(brain),
            "brain_chars": len(json.dumps(brain))}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.claude_code_view")
    p.add_argument("--profile", choices=("core", "full"), default="core")
    p.add_argument("--server", default=str(ROOT / "mcp_server.py"))
    args = p.parse_args()
    print(json.dumps(measure(Path(args.server).resolve(), args.profile)))


if __name__ == "__main__":
    main()
