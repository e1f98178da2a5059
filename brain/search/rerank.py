"""Optional cross-encoder reranking of fused candidates (``[rerank]``).

Policy: with ``enabled = true`` a search reorders its top ``rerank.candidates`` fused
candidates by a cross-encoder's score of (query, note text). ``enabled = false`` (the shipped
default: no cross-encoder ships in a PyPI package, and the machine may be offline) keeps the
fusion order and loads nothing. Two providers:

- ``local``: a sentence-transformers CrossEncoder folder, loaded when the brain opens, or the
  brain refuses to open with an error that names the setting;
- ``http``: a rerank server (llama.cpp, vLLM, Text Embeddings Inference, Jina-compatible)
  speaking the protocol they share: ``POST`` the query and the documents, scores back by
  index. It never stops a search: a timeout (``timeout_s``), a refused or failed request or
  an answer that is not a score for every document keeps the fused order, logs why (once
  per distinct reason) and shows in ``brain_stats`` (``rerank``). The key goes in the
  Authorization header only; it is never logged or shown.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from brain.embedding.remote import shown_endpoint
from brain.errors import ModelUnavailable
from brain.http_json import RequestTimedOut, post_json

if TYPE_CHECKING:
    from config import RerankSettings

log = logging.getLogger(__name__)


class Reranker:
    """A sentence-transformers CrossEncoder loaded from a local folder."""

    def __init__(self, model_path: str, max_chars: int = 2000) -> None:
        self.model_path = model_path
        self.max_chars = max_chars
        self._lock = threading.Lock()
        self._model = self._load(model_path)

    @staticmethod
    def _load(model_path: str) -> Any:
        if not model_path:
            raise ModelUnavailable(
                "rerank.enabled is true but rerank.model is empty: set BRAIN__RERANK__MODEL to "
                "the folder of a local cross-encoder, or BRAIN__RERANK__ENABLED=false"
            )
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise ModelUnavailable(
                f"rerank.model {model_path!r} is not a folder: point BRAIN__RERANK__MODEL at a "
                "local cross-encoder (a sentence-transformers CrossEncoder saved with "
                "save_pretrained), or set BRAIN__RERANK__ENABLED=false"
            )
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            from brain.embedding.registry import TORCH_EXTRA

            raise ModelUnavailable(TORCH_EXTRA.format(what="the local reranker")) from exc
        try:
            return CrossEncoder(str(path), device="cpu", local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any load failure is a refusal to start
            raise ModelUnavailable(
                f"rerank.model {model_path!r} could not be loaded as a cross-encoder "
                f"({type(exc).__name__}: {exc}); fix the folder or set "
                "BRAIN__RERANK__ENABLED=false"
            ) from exc

    def scores(self, query: str, texts: Sequence[str]) -> list[float] | None:
        if not texts:
            return []
        pairs = [(query, t[: self.max_chars]) for t in texts]
        with self._lock:
            out = self._model.predict(pairs, show_progress_bar=False, convert_to_numpy=True)
        return [float(x) for x in out]

    def status(self) -> dict[str, Any]:
        return {"enabled": True, "model": self.model_path}


class HttpReranker:
    """A cross-encoder behind a rerank server; :meth:`scores` is None when it fails (the
    caller keeps the fused order)."""

    def __init__(self, url: str, model: str = "", api_key: str = "", timeout_s: float = 2.0,
                 max_chars: int = 2000) -> None:
        if not url:
            raise ModelUnavailable(
                "rerank.provider is http but rerank.url is empty: set BRAIN__RERANK__URL to the "
                "rerank endpoint (e.g. http://127.0.0.1:8080/v1/rerank), or "
                "BRAIN__RERANK__ENABLED=false")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ModelUnavailable(f"rerank.url {shown_endpoint(url)!r} is not an http(s) URL")
        self.url, self.model, self.timeout_s, self.max_chars = url, model, timeout_s, max_chars
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._lock = threading.Lock()
        self.calls = self.failures = 0
        self.last_error = ""
        self.last_ms: float | None = None

    def scores(self, query: str, texts: Sequence[str]) -> list[float] | None:
        if not texts:
            return []
        docs = [t[: self.max_chars] for t in texts]
        # "documents" for Jina, Cohere, vLLM and llama.cpp; "texts" for TEI.
        body: dict[str, Any] = {"query": query, "documents": docs, "texts": docs,
                                "top_n": len(docs), "return_documents": False}
        if self.model:
            body["model"] = self.model
        started = time.perf_counter()
        try:
            reply = post_json(self.url, body, self._headers, self.timeout_s,
                              max_bytes=MAX_REPLY_BYTES)
            if reply.status != 200:
                raise _Refused(f"the server answered HTTP {reply.status}")
            out = parse_scores(reply.json(), len(docs))
        except (_Refused, RequestTimedOut, ValueError, OSError, http.client.HTTPException) as exc:
            self._failed(_reason(exc))
            return None
        with self._lock:
            self.calls += 1
            self.last_ms = round((time.perf_counter() - started) * 1000, 1)
        return out

    def _failed(self, reason: str) -> None:
        with self._lock:
            self.calls += 1
            self.failures += 1
            repeated, self.last_error = reason == self.last_error, reason
        if not repeated:
            log.warning("rerank server %s: %s; the fused order is kept", shown_endpoint(self.url), reason)

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {"enabled": True, "provider": "http", "url": shown_endpoint(self.url),
                    "model": self.model, "calls": self.calls, "failures": self.failures,
                    "last_error": self.last_error, "last_ms": self.last_ms,
                    "on_failure": "fused order"}


class _Refused(Exception):
    pass


MAX_REPLY_BYTES = 4 * 1024 * 1024  # 200 scores fit in a few KB; more is not a rerank answer


def parse_scores(data: Any, n: int) -> list[float]:
    """The score of each of ``n`` documents from a rerank answer: ``{"results": [{"index",
    "relevance_score"}]}`` (Jina, Cohere, vLLM, llama.cpp) or ``[{"index", "score"}]`` (TEI).
    Anything else, a missing or repeated index or a score that is not a finite number, is a
    ValueError."""
    rows = data.get("results") if isinstance(data, dict) else data
    if not isinstance(rows, list) or len(rows) != n:
        raise ValueError(f"the answer does not score the {n} documents sent")
    out: list[float | None] = [None] * n
    for row in rows:
        if not isinstance(row, dict):
            raise ValueError("a result is not an object")
        index, score = row.get("index"), row.get("relevance_score", row.get("score"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n \
                or out[index] is not None:
            raise ValueError("a result's index is missing, repeated or out of range")
        if not isinstance(score, (int, float)) or isinstance(score, bool) \
                or not math.isfinite(score):
            raise ValueError("a result's score is not a finite number")
        out[index] = float(score)
    return [float(x) for x in out if x is not None]


def _reason(exc: Exception) -> str:
    """Why a rerank request failed, in words for the log and brain_stats (never the key: it
    is only in the request's header)."""
    if isinstance(exc, json.JSONDecodeError):
        return "the answer is not JSON"
    if isinstance(exc, (_Refused, RequestTimedOut, ValueError)):
        return str(exc)[:300]
    return f"{type(exc).__name__}: {exc}"[:300]


AnyReranker = Reranker | HttpReranker
_loaded: dict[str, Reranker] = {}
_loaded_lock = threading.Lock()


def load(cfg: RerankSettings) -> AnyReranker | None:
    """The configured reranker, or None when disabled. A local one raises ModelUnavailable
    when its model cannot be loaded (the server then refuses to start); one instance per
    model folder and process, shared by the server's pre-flight check and the brain. An http
    one is built without contacting its server: a failure there only keeps the fused order."""
    if not cfg.enabled:
        return None
    if cfg.provider == "http":
        return HttpReranker(cfg.url, cfg.model, cfg.api_key.get_secret_value(), cfg.timeout_s)
    with _loaded_lock:
        reranker = _loaded.get(cfg.model)
        if reranker is None:
            reranker = _loaded[cfg.model] = Reranker(cfg.model)
            log.info("cross-encoder reranker loaded from %s", cfg.model)
    return reranker
