"""A real embeddings server on loopback, for tests: the OpenAI ``/v1/embeddings`` protocol, and
the Text Embeddings Inference ``/embed`` route that ``huggingface_hub``'s feature_extraction
posts to when its model is a URL.

Vectors are deterministic: the offline hash embedder's (lexically similar texts get similar
vectors), at ``dimension`` columns, so a brain on this server finds what it stored. ``key``
set: a request without ``Authorization: Bearer <key>`` gets 401, whose body echoes the key it
was sent (as real servers echo part of it) so tests can check it never reaches a message.

Scripted actions, consumed one per request before the default answer:

- ``("status", 503)``: an error reply with that status (``("status", 429, "2")``: Retry-After);
- ``("hang", seconds)``: accept the request, answer nothing for that long;
- ``("trickle", seconds)``: send the headers, then one body byte every 0.2 s for that long;
- ``("dimension", n)``: answer with n-dimensional vectors once.

``max_batch`` > 0: a request with more texts gets 413, as Text Embeddings Inference answers.

Two native APIs beside them, each as its reference documents it:

- Gemini, ``POST /gemini/v1beta/models/{model}:batchEmbedContents`` (so an endpoint's url is
  ``gemini_url``): the key in ``x-goog-api-key`` (a wrong one gets Gemini's 400
  API_KEY_INVALID), one request per text, ``outputDimensionality`` honoured, the vectors in
  ``{"embeddings": [{"values"}]}``, no token count;
- Voyage, ``POST /voyage/v1/embeddings`` (``voyage_url``): Bearer key, ``input`` and
  ``input_type``, ``output_dimension`` honoured, ``{"data", "usage": {"total_tokens"}}``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from brain.embedding.base import ModelRecord
from brain.embedding.registry import HashEmbedder


@dataclass
class Seen:
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names


def vectors(texts: list[str], dimension: int) -> list[list[float]]:
    record = ModelRecord("fake", "hash", dimension, (dimension,), 512)
    return HashEmbedder(record).embed_documents(texts).tolist()  # type: ignore[no-any-return]


def tokens(texts: list[str]) -> int:
    return sum(max(1, len(t.split())) for t in texts)


class FakeEmbeddings:
    def __init__(self, dimension: int = 384, key: str = "") -> None:
        self.dimension = dimension
        self.key = key
        self.max_batch = 0  # > 0: a larger batch gets 413
        self.seen: list[Seen] = []
        self._script: deque[tuple[Any, ...]] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.root = f"http://{host}:{port}"
        self.base_url = f"{self.root}/v1"  # the OpenAI base URL
        self.tei_url = f"{self.root}/embed"  # the URL an HF client is pointed at
        self.gemini_url = f"{self.root}/gemini/v1beta"
        self.voyage_url = f"{self.root}/voyage/v1"

    def script(self, *actions: tuple[Any, ...]) -> Self:
        with self._lock:
            self._script.extend(actions)
        return self

    def requests(self, path: str = "") -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if not path or s.path == path]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next(self) -> tuple[Any, ...] | None:
        with self._lock:
            return self._script.popleft() if self._script else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake._lock:
                    fake.seen.append(Seen(self.path, body, headers))
                gemini = self.path.startswith("/gemini/v1beta/models/") and \
                    self.path.endswith(":batchEmbedContents")
                voyage = self.path == "/voyage/v1/embeddings"
                if self.path not in ("/v1/embeddings", "/embed") and not (gemini or voyage):
                    self._send(404, {"error": "not found"})
                    return
                if gemini:
                    sent = headers.get("x-goog-api-key", "")
                    if fake.key and sent != fake.key:
                        self._send(400, {"error": {
                            "code": 400, "message": "API key not valid. Please pass a valid "
                            "API key.", "status": "INVALID_ARGUMENT",
                            "details": [{"reason": "API_KEY_INVALID"}]}})
                        return
                else:
                    sent = headers.get("authorization", "").removeprefix("Bearer ").strip()
                    if fake.key and sent != fake.key:
                        self._send(401, {"error": {
                            "message": f"Incorrect API key provided: {sent}"}})
                        return
                if gemini:
                    reqs = body.get("requests") or []
                    texts = [r["content"]["parts"][0]["text"] for r in reqs]
                else:
                    texts = body.get("input", body.get("inputs"))
                    texts = [texts] if isinstance(texts, str) else list(texts or [])
                if fake.max_batch and len(texts) > fake.max_batch:  # as TEI answers
                    self._send(413, {"error": f"batch size {len(texts)} > maximum allowed "
                                              f"batch size {fake.max_batch}"})
                    return
                action = fake._next()
                dimension = fake.dimension
                if action is not None:
                    if action[0] == "status":
                        extra = {"Retry-After": action[2]} if len(action) > 2 else {}
                        self._send(int(action[1]), {"error": "scripted failure"}, extra)
                        return
                    if action[0] == "hang":
                        time.sleep(float(action[1]))
                        self.close_connection = True
                        return
                    if action[0] == "trickle":
                        self._trickle(float(action[1]))
                        return
                    if action[0] == "dimension":
                        dimension = int(action[1])
                asked = (body.get("output_dimension") if voyage else
                         (reqs[0].get("outputDimensionality") if gemini and reqs else None))
                cut = int(asked) if asked and action is None else None
                if self.path == "/embed":
                    self._send(200, vectors(texts, dimension))
                    return
                if gemini:
                    self._send(200, {"embeddings": [{"values": v[:cut] if cut else v}
                                                    for v in vectors(texts, dimension)]})
                    return
                if voyage:
                    data = [{"object": "embedding", "index": i, "embedding": v[:cut] if cut else v}
                            for i, v in enumerate(vectors(texts, dimension))]
                    self._send(200, {"object": "list", "data": data[::-1],
                                     "model": body.get("model"),
                                     "usage": {"total_tokens": tokens(texts)}})
                    return
                data = [{"object": "embedding", "index": i, "embedding": v}
                        for i, v in enumerate(vectors(texts, dimension))]
                # Answered out of order: a client must sort by index.
                self._send(200, {"object": "list", "data": data[::-1],
                                 "model": body.get("model"),
                                 "usage": {"prompt_tokens": tokens(texts),
                                           "total_tokens": tokens(texts)}})

            def _trickle(self, seconds: float) -> None:
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    end = time.monotonic() + seconds
                    while time.monotonic() < end:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    pass  # the client gave up, as it should
                self.close_connection = True

            def _send(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (extra or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (deadline tests)

        return Handler
