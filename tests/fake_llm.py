"""A real OpenAI-compatible chat server on loopback with scripted answers, for tests.

Each scripted answer is one of:

- ``"text"``: a 200 reply whose message content is the text;
- ``("status", 500)``: an error reply with that HTTP status;
- ``("sleep", seconds, "text")``: wait, then reply with the text;
- ``callable(request_json) -> str``: compute the content from the request.

When the script is empty the ``default`` responder answers.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

Answer = Any  # str | tuple | Callable[[dict], str]


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names


def _default_responder(_request: dict[str, Any]) -> str:
    return "ok"


class FakeLLM:
    """Context manager running the fake server in a background thread."""

    def __init__(self, default: Callable[[dict[str, Any]], str] = _default_responder) -> None:
        self.default = default
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
        )
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}/v1"

    def script(self, *answers: Answer) -> FakeLLM:
        with self._lock:
            self._queue.extend(answers)
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next_answer(self) -> Answer:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                fake._record(
                    RecordedRequest(
                        self.path, body, {k.lower(): v for k, v in self.headers.items()}
                    )
                )
                if self.path.rstrip("/") not in (
                    "/v1/chat/completions",
                    "/chat/completions",
                ):
                    self._send(404, {"error": "not found"})
                    return
                answer = fake._next_answer()
                if isinstance(answer, tuple) and answer[0] == "status":
                    self._send(int(answer[1]), {"error": {"message": "scripted failure"}})
                    return
                if isinstance(answer, tuple) and answer[0] == "sleep":
                    time.sleep(float(answer[1]))
                    answer = answer[2]
                content = answer(body) if callable(answer) else str(answer)
                self._send(200, _completion(body, content))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        return Handler


def _completion(request: dict[str, Any], content: str) -> dict[str, Any]:
    prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, len(content) // 4)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "system_fingerprint": "fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def llm_settings(home: Any, base_url: str, *, job_backoff_s: float = 0.01, **llm: Any) -> Any:
    """Settings of a test brain on the offline hash model whose chat model is the loopback
    server at ``base_url``: no client retries, a short timeout and job backoff, and any
    other ``[llm]`` field from ``llm``."""
    from config import load_settings

    s = load_settings(home=home)
    s.embedding.model = "offline/hash-384"
    s.llm.base_url = base_url
    s.llm.max_retries = 0
    s.llm.timeout_s = 5.0
    s.llm.job_backoff_s = job_backoff_s
    for key, value in llm.items():
        setattr(s.llm, key, value)
    return s
