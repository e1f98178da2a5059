"""Remote embedding providers: an OpenAI-compatible ``/v1/embeddings`` server, and Hugging Face
Inference through ``huggingface_hub.InferenceClient.feature_extraction``.

A remote model is an explicit record, ``<provider>:<model>`` (``openai:nomic-embed-text``,
``hf:BAAI/bge-small-en-v1.5``): the id stamped on every point, so a store says which server
protocol and model built it. Records for common models are listed below; any other model
needs its dimension set (``BRAIN__EMBEDDING__DIMENSION``), there is no guessing.

Rules (issue 16):
- the key is a secret: held as ``SecretStr``, sent only in the Authorization header, replaced
  by ``***`` in every message, and never part of ``status()``;
- a provider that needs a key and has none still builds, with its credential ``missing``
  (brain/embedding/credential.py): the server starts, every call fails with
  ``EMBEDDING_CREDENTIAL_MISSING`` naming the credential, searches answer from BM25, and a
  key set later is picked up by the next probe; nothing falls back to another model;
- texts go in batches; a failed batch is retried with exponential backoff (``Retry-After``
  honoured) within a total deadline; a 401/403 is not retried (``EMBEDDING_CREDENTIAL_REJECTED``)
  and marks the credential ``rejected`` until a probe succeeds;
- vectors of another length than the record's are refused (``UNSUPPORTED_EMBEDDING_DIMENSION``),
  except a Matryoshka model's longer vector, cut to the chosen dimension;
- a daily token cap (``embed_budget.TokenBudget``) pauses document embedding.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import numpy as np
from pydantic import SecretStr

from brain.embedding.base import ModelRecord, PromptedEncoder, normalise
from brain.embedding.budget import TokenBudget
from brain.embedding.credential import OK, CredentialGate, setting_of
from brain.errors import (
    ConfigError,
    EmbeddingCredentialRejected,
    EmbeddingProviderFailed,
    UnsupportedEmbeddingDimension,
)

if TYPE_CHECKING:
    from config import EmbeddingSettings

log = logging.getLogger(__name__)

REMOTE_PROVIDERS = ("openai", "hf")
DEFAULT_MAX_TOKENS = 512
USAGE_FILE = "embedding_usage.json"
# 4xx answers other than these will not change on retry (bad request, unknown model).
_RETRYABLE_4XX = {408, 409, 425, 429}
# A batch too large for the server: sent again in halves.
_TOO_LARGE = {413, 422}
# Estimated tokens per request, under OpenAI's 300k limit with the estimate's margin.
MAX_REQUEST_TOKENS = 100_000


def _record(model_id: str, dimension: int, dims: tuple[int, ...], max_tokens: int,
            query: str = "", document: str = "") -> ModelRecord:
    return ModelRecord(id=model_id, provider=model_id.split(":", 1)[0], dimension=dimension,
                       supported_dimensions=dims, max_seq_length=max_tokens,
                       query_prompt=query, document_prompt=document)


REMOTE_RECORDS: dict[str, ModelRecord] = {r.id: r for r in (
    _record("openai:text-embedding-3-small", 1536, (256, 512, 1024, 1536), 8191),
    _record("openai:text-embedding-3-large", 3072, (256, 1024, 1536, 3072), 8191),
    # Ollama's default context is 2048 tokens whatever the model could take.
    _record("openai:nomic-embed-text", 768, (64, 128, 256, 512, 768), 2048,
            "search_query: ", "search_document: "),
    _record("openai:mxbai-embed-large", 1024, (1024,), 512,
            "Represent this sentence for searching relevant passages: "),
    _record("hf:sentence-transformers/all-MiniLM-L6-v2", 384, (384,), 256),
    _record("hf:BAAI/bge-small-en-v1.5", 384, (384,), 512,
            "Represent this sentence for searching relevant passages: "),
    _record("hf:intfloat/multilingual-e5-large", 1024, (1024,), 512, "query: ", "passage: "),
)}


def remote_provider_of(model_id: str) -> str | None:
    prefix = model_id.split(":", 1)[0] if ":" in model_id else ""
    return prefix if prefix in REMOTE_PROVIDERS else None


def qualified_id(provider: str, model: str) -> str:
    """The record id of ``model`` served by ``provider`` (an id that names one is kept)."""
    named = remote_provider_of(model)
    if named and provider not in ("local", named):
        raise ConfigError(f"BRAIN__EMBEDDING__MODEL {model!r} names provider {named}, but "
                          f"BRAIN__EMBEDDING__PROVIDER is {provider}: make them agree")
    if provider == "local" or named:
        return model
    return f"{provider}:{model}"


def unlisted_record(model_id: str, dimension: int, max_tokens: int = 0) -> ModelRecord:
    """The record of a remote model the registry does not list: its dimension must be given."""
    if dimension <= 0:
        raise UnsupportedEmbeddingDimension(
            f"model {model_id} is not in the registry, so its dimension is unknown: set "
            "BRAIN__EMBEDDING__DIMENSION to the length of the vectors it returns",
            model=model_id, dimension=dimension,
        )
    return _record(model_id, dimension, (dimension,), max_tokens or DEFAULT_MAX_TOKENS)


# ------------------------------------------------------------------------------ endpoint


@dataclass(frozen=True, slots=True)
class RemoteEndpoint:
    """Where and how a remote model is reached; built once from ``[embedding]``."""

    base_url: str = ""
    api_key: SecretStr = field(default_factory=lambda: SecretStr(""))
    credential: str = "embedding.api_key"  # the setting the key came from (shown, never the key)
    hf_provider: str = "hf-inference"
    timeout_s: float = 30.0
    deadline_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 0.5
    batch_size: int = 64
    daily_token_cap: int = 0
    usage_path: Path | None = None
    daily_usd_cap: float = 0.0
    price_per_mtok: float | None = None  # the model's price (an endpoint registry entry)
    # The address to connect to, checked against the endpoint's class and pinned at first
    # use (brain/embedding/endpoints.py); None: resolve as usual.
    pin: Callable[[], str | None] | None = field(default=None, compare=False, repr=False)
    send_key: bool = True  # an endpoint with auth = "none" sends no key even when one is set
    # True / False: the endpoint says whether it needs a key; None: any but loopback does.
    key_required: bool | None = None
    # Reads a secret setting by its dotted path, as its sources say now (app.py).
    secrets: Callable[[str], str] | None = field(default=None, compare=False, repr=False)
    # Reads the key again from the settings' sources (app.py); "" = none set there.
    key_source: Callable[[], str] | None = field(default=None, compare=False, repr=False)
    credential_retry_s: float = 30.0  # a missing or rejected key is tried again this often

    @property
    def needs_key(self) -> bool:
        """A server on this machine (Ollama, llama.cpp, TEI) needs no key; anything else does."""
        if self.key_required is not None:
            return self.key_required
        return self.send_key and not (self.base_url and is_loopback(self.base_url))

    def address(self) -> str | None:
        return self.pin() if self.pin is not None else None


def endpoint_from_settings(s: EmbeddingSettings, home: Path, hf_token: str = "") -> RemoteEndpoint:
    """``hf_token``: an HF token configured elsewhere (``llm.api_key`` without an
    ``llm.base_url``), used by provider hf when ``embedding.api_key`` is empty; status() says so."""
    key, credential = s.api_key.get_secret_value(), "embedding.api_key"
    if not key and s.provider == "hf" and hf_token and not s.base_url:
        key, credential = hf_token, "llm.api_key"
    return RemoteEndpoint(
        base_url=s.base_url.rstrip("/"), api_key=SecretStr(key), credential=credential,
        hf_provider=s.hf_provider, timeout_s=s.timeout_s, deadline_s=s.deadline_s,
        max_retries=s.max_retries, batch_size=s.batch_size, daily_token_cap=s.daily_token_cap,
        usage_path=home / USAGE_FILE, credential_retry_s=s.credential_retry_s,
        daily_usd_cap=s.daily_usd_cap,
    )


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def shown_endpoint(url: str) -> str:
    """scheme://host:port of ``url``: never a user:password part or a query string."""
    if not url:
        return ""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


# ----------------------------------------------------------------------------- transports


class Retryable(Exception):
    """A failure that may pass: timeout, connection error, 5xx, 429."""

    def __init__(self, message: str, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class Transport(Protocol):
    def embed(self, texts: list[str], limit_s: float,
              kind: str = "document") -> tuple[np.ndarray, int | None]:
        """Vectors of ``texts`` (``kind``: document | query, for the APIs that tell them
        apart) and the tokens the server counted (None: not reported)."""
        ...


def redactor(key: SecretStr) -> Callable[[str], str]:
    secret = key.get_secret_value()
    return (lambda text: text.replace(secret, "***")) if secret else (lambda text: text)


def http_failure(status: int, body: str, record: ModelRecord, ep: RemoteEndpoint,
                 retry_after: str | None) -> Exception:
    """The error for an HTTP error status: retryable, a rejected key, or a plain failure."""
    excerpt = " ".join(redactor(ep.api_key)(body).split())[:200]
    where = shown_endpoint(ep.base_url) or f"HF Inference ({ep.hf_provider})"
    if status in (401, 403):
        setting = setting_of(ep.credential)
        return EmbeddingCredentialRejected(
            f"{where} refused the key for {record.id} (HTTP {status}: {excerpt}); check "
            f"{setting} ({ep.credential})",
            model=record.id, status=status, credential=ep.credential,
        )
    if status >= 500 or status in _RETRYABLE_4XX:
        return Retryable(f"HTTP {status}: {excerpt}", _seconds(retry_after))
    return EmbeddingProviderFailed(
        f"{where} answered HTTP {status} for {record.id}: {excerpt}. Check "
        "BRAIN__EMBEDDING__MODEL and BRAIN__EMBEDDING__BASE_URL.",
        model=record.id, status=status,
    )


def _seconds(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0  # an HTTP date: fall back to our own backoff


class OpenAITransport:
    """``POST {base_url}/embeddings`` with the OpenAI payload, on the standard library."""

    def __init__(self, record: ModelRecord, ep: RemoteEndpoint, model: str | None = None,
                 ask_dimension: bool = False) -> None:
        self.record = record
        self.ep = ep
        self.url = f"{ep.base_url}/embeddings"
        self.model = model or record.id.split(":", 1)[1]
        # Matryoshka: ask the server for the chosen size (it is cut here too if it ignores it).
        top = max(record.supported_dimensions, default=record.dimension)
        self.dimensions = record.dimension if record.dimension < top or ask_dimension else None

    def embed(self, texts: list[str], limit_s: float,
              kind: str = "document") -> tuple[np.ndarray, int | None]:
        payload: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions:
            payload["dimensions"] = self.dimensions
        reply = send(self.url, payload, bearer(self.ep), limit_s, self.record, self.ep)
        try:
            return embeddings_data(reply.json())
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise EmbeddingProviderFailed(
                f"{shown_endpoint(self.ep.base_url)} sent a reply that is not an OpenAI "
                f"embeddings response ({type(exc).__name__}); is BRAIN__EMBEDDING__BASE_URL the "
                "server's /v1 URL?", model=self.record.id,
            ) from None


def bearer(ep: RemoteEndpoint) -> dict[str, str]:
    """The Authorization header of an endpoint that takes a bearer key (none without one)."""
    key = ep.api_key.get_secret_value() if ep.send_key else ""
    return {"Authorization": f"Bearer {key}"} if key else {}


def embeddings_data(data: Any) -> tuple[np.ndarray, int | None]:
    """The vectors (by index) and token count of an OpenAI-shaped ``{"data": [{index,
    embedding}], "usage": {...}}`` reply (OpenAI, Ollama, Qwen, Voyage); KeyError, TypeError
    or ValueError when it is not one."""
    items = sorted(data["data"], key=lambda item: int(item.get("index", 0)))
    matrix = np.asarray([item["embedding"] for item in items], dtype=np.float32)
    usage = data.get("usage") or {}
    tokens = usage.get("prompt_tokens") or usage.get("total_tokens")
    return matrix, int(tokens) if tokens else None


def send(url: str, payload: Any, headers: dict[str, str], limit_s: float, record: ModelRecord,
         ep: RemoteEndpoint) -> Any:
    """POST to the endpoint (at its pinned address when it has one): the 200 reply, or the
    typed failure of any other answer (retryable ones as :class:`Retryable`)."""
    from brain.http_json import RequestTimedOut, post_json

    address = ep.address()  # refuses an address outside the endpoint's class
    try:
        reply = post_json(url, payload, headers, limit_s, connect_to=address)
    except RequestTimedOut as exc:
        raise Retryable(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - refused, reset, DNS: the server may come back
        raise Retryable(redactor(ep.api_key)(f"{type(exc).__name__}: {exc}")) from None
    if reply.status != 200:
        raise http_failure(reply.status, reply.body[:2000].decode("utf-8", "replace"),
                           record, ep, reply.headers.get("retry-after"))
    return reply


# ------------------------------------------------------------------------------- embedder


class RemoteEmbedder(PromptedEncoder):
    """Batches, retries, deadline, dimension check and token budget around a transport."""

    def __init__(self, record: ModelRecord, transport: Transport, ep: RemoteEndpoint,
                 transport_for: Callable[[RemoteEndpoint], Transport] | None = None) -> None:
        self.record = record
        self.transport = transport
        self.ep = ep
        self._transport_for = transport_for  # a new key: a new transport
        self.budget = TokenBudget(ep.daily_token_cap, ep.usage_path, usd_cap=ep.daily_usd_cap,
                                  price_per_mtok=ep.price_per_mtok)
        self._redact = redactor(ep.api_key)
        self.gate = CredentialGate(ep.credential,
                                   bool(ep.api_key.get_secret_value()) or not ep.needs_key,
                                   retry_s=ep.credential_retry_s)
        self._lock = threading.Lock()
        self._counts = {"calls": 0, "retries": 0, "failures": 0, "texts": 0}
        self._last_error = ""
        self._batch_limit = max(1, ep.batch_size)

    @property
    def dimension(self) -> int:
        return self.record.dimension

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._run(texts, self.record.document_prompt, capped=True)

    def embed_query(self, text: str) -> np.ndarray:
        return self._run([text], self.record.query_prompt, capped=False)[0]

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        return self._run(texts, prompt, capped=True)

    def count_tokens(self, text: str) -> int:
        # No tokenizer here: ~3 characters a token over-counts English (~4) a little, so a
        # long text is cut into pieces the server will not truncate.
        return max(1, math.ceil(len(text) / 3))

    def _run(self, texts: Sequence[str], prompt: str, capped: bool) -> np.ndarray:
        out = []
        kind = "document" if capped else "query"
        for part in self._batches([prompt + t if prompt else t for t in texts]):
            if capped:
                self.budget.check(self.record.id)
            else:  # a query: only the dollar cap stops it (a few tokens)
                self.budget.check_spend(self.record.id)
            out.append(self._fitting(part, kind))
        return np.concatenate(out) if len(out) > 1 else out[0]

    def _batches(self, texts: list[str]) -> list[list[str]]:
        """Runs of at most ``batch_size`` texts (or the smaller size the server accepted) and
        about MAX_REQUEST_TOKENS tokens: OpenAI refuses a request over 300k tokens."""
        limit = max(1, min(self.ep.batch_size, self._batch_limit))
        out: list[list[str]] = []
        run: list[str] = []
        tokens = 0
        for text in texts:
            n = self.count_tokens(text)
            if run and (len(run) >= limit or tokens + n > MAX_REQUEST_TOKENS):
                out.append(run)
                run, tokens = [], 0
            run.append(text)
            tokens += n
        if run:
            out.append(run)
        return out

    def _fitting(self, texts: list[str], kind: str = "document") -> np.ndarray:
        """One batch; halved while the server says it is too large (TEI takes 32 texts a
        request by default, 413/422 beyond), the smaller size kept for later batches."""
        try:
            return self._one_batch(texts, kind)
        except EmbeddingProviderFailed as exc:
            if exc.details.get("status") not in _TOO_LARGE or len(texts) < 2:
                raise
            half = len(texts) // 2
            with self._lock:
                self._batch_limit = min(self._batch_limit, half)
            log.info("%s: a batch of %d was too large; sending %d", self.record.id,
                     len(texts), half)
            return np.concatenate([self._fitting(texts[:half], kind),
                                   self._fitting(texts[half:], kind)])

    def _admit(self) -> None:
        """Let a call out, or refuse it with the credential's typed error (no request)."""
        if not self.gate.usable():
            raise self.gate.error(self.record.id)
        if self.gate.state == OK:
            return
        self._reload_key()  # a probe: a key set since is used at once
        if self.ep.needs_key and not self.ep.api_key.get_secret_value():
            self.gate.missing()
            raise self.gate.error(self.record.id)

    def _reload_key(self) -> None:
        new = self.ep.key_source() if self.ep.key_source is not None else ""
        if not new or new == self.ep.api_key.get_secret_value():
            return
        credential = self.ep.credential
        with self._lock:
            self.ep = replace(self.ep, api_key=SecretStr(new))
            self._redact = redactor(self.ep.api_key)
            if self._transport_for is not None:
                self.transport = self._transport_for(self.ep)
        log.info("embedding credential %s: a new key was read", credential)

    def _one_batch(self, texts: list[str], kind: str = "document") -> np.ndarray:
        self._admit()
        deadline = time.monotonic() + self.ep.deadline_s
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            self._count("calls")
            try:
                matrix, tokens = self.transport.embed(texts, min(self.ep.timeout_s, remaining),
                                                      kind)
                break
            except Retryable as exc:
                self._failed(exc.message)
                delay = max(exc.retry_after, self.ep.backoff_s * (2**attempt))
                if attempt >= self.ep.max_retries or time.monotonic() + delay >= deadline:
                    raise EmbeddingProviderFailed(
                        f"embedding with {self.record.id} failed after {attempt + 1} attempts "
                        f"within {self.ep.deadline_s:g}s: {self._redact(exc.message)}. Check "
                        "that the server is up; sync retries on its next run.",
                        model=self.record.id, attempts=attempt + 1,
                    ) from None
                self._count("retries")
                time.sleep(delay)
                attempt += 1
            except EmbeddingCredentialRejected as exc:
                self._failed(exc.message)
                self.gate.rejected(f"HTTP {exc.details.get('status')}")
                raise
            except EmbeddingProviderFailed as exc:
                self._failed(exc.message)
                raise
        self.gate.succeeded()
        vectors = self._fit(matrix, len(texts))
        self.budget.add(tokens if tokens is not None else sum(map(self.count_tokens, texts)))
        with self._lock:
            self._counts["texts"] += len(texts)
        return vectors

    def _fit(self, matrix: np.ndarray, rows: int) -> np.ndarray:
        if matrix.ndim != 2 or matrix.shape[0] != rows:
            raise EmbeddingProviderFailed(
                f"{self.record.id} returned vectors of shape {matrix.shape} for {rows} texts; "
                "a sentence-embedding model returns one vector per text",
                model=self.record.id,
            )
        got, want = matrix.shape[1], self.record.dimension
        mrl = len(self.record.supported_dimensions) > 1
        if got == want:
            return normalise(matrix)
        if got > want and mrl and want in self.record.supported_dimensions:
            return normalise(matrix[:, :want])  # Matryoshka: the leading dimensions are the vector
        raise UnsupportedEmbeddingDimension(
            f"{self.record.id} returned {got}-dimensional vectors, this brain uses {want}; set "
            f"BRAIN__EMBEDDING__DIMENSION={got} for a new brain, or check the model name. "
            "Nothing was stored.",
            model=self.record.id, dimension=got,
        )

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _failed(self, message: str) -> None:
        safe = self._redact(message)
        with self._lock:
            self._counts["failures"] += 1
            self._last_error = safe
        log.warning("embedding call to %s failed: %s", self.record.id, safe)

    def status(self) -> dict[str, Any]:
        """For brain_stats: what embeds, where, how it went, and the token budget. No key."""
        with self._lock:
            counts, last = dict(self._counts), self._last_error
        return {
            "provider": self.record.provider,
            "model": self.record.id,
            "dimension": self.record.dimension,
            "endpoint": shown_endpoint(self.ep.base_url) or f"HF Inference ({self.ep.hf_provider})",
            "credential": self.ep.credential if self.ep.api_key.get_secret_value() else None,
            **counts,
            "last_error": last,
            "batch_size": min(self.ep.batch_size, self._batch_limit),
            **self.budget.status(),
            **self.gate.status(),
        }


def embedding_status(embedder: Any) -> dict[str, Any]:
    """The embedding section of brain_stats for any embedder (local ones have no budget)."""
    status = getattr(embedder, "status", None)
    if callable(status):
        return dict(status())
    record = embedder.record
    return {"provider": record.provider, "model": record.id, "dimension": embedder.dimension,
            "paused_by_cap": False, "dense": True}
