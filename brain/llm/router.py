"""Routes chat work to a fast or a hard model through ``huggingface_hub.InferenceClient``.

Two ways to reach a model:

- ``base_url`` set: any OpenAI-compatible server (Ollama, llama.cpp server, vLLM);
  ``/chat/completions`` is appended by the client.
- ``base_url`` empty and ``api_key`` set: HF Inference Providers, routed by ``provider``.

The hard model may live elsewhere (``hard_provider``): an HF Inference Provider name (with
``api_key``, no ``base_url``) or the URL of its own OpenAI-compatible server (a big model on
a bigger box). Empty, it shares the fast model's client.

With neither, the router is *offline*: ``complete`` raises ``LLMError`` and callers fall
back to heuristic enrichment. Tokens are counted per UTC day and, when ``usage_path`` is
given, persisted so a restart keeps the count; a daily cap pauses calls until the next day.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx2  # the HTTP client huggingface_hub 2.x is built on
from huggingface_hub import InferenceClient
from huggingface_hub.errors import HfHubHTTPError, InferenceTimeoutError

from brain.clock import Clock
from brain.errors import ConfigError, LLMError

log = logging.getLogger(__name__)

Tier = Literal["fast", "hard"]
Mode = Literal["hf-providers", "openai-compatible", "offline"]

# 4xx answers other than these will not change on retry (bad key, bad model name).
_RETRYABLE_4XX = {408, 409, 425, 429}


class TokenCapReached(LLMError):
    code = "LLM_TOKEN_CAP_REACHED"


class ModelRouter:
    def __init__(
        self,
        *,
        base_url: str = "",
        api_key: str = "",
        provider: str = "auto",
        hard_provider: str = "",
        fast_model: str = "Qwen/Qwen3-4B-Instruct-2507",
        hard_model: str = "Qwen/Qwen3-30B-A3B-Instruct-2507",
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        daily_token_cap: int = 0,
        usage_path: Path | None = None,
        clock: Clock | None = None,
        temperature: float = 0.2,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._provider = provider
        self._hard_provider = hard_provider.strip()
        self.fast_model = fast_model
        self.hard_model = hard_model
        self._timeout_s = timeout_s
        self._max_retries = max(0, max_retries)
        self._backoff_s = backoff_s
        self._cap = max(0, daily_token_cap)
        self._usage_path = usage_path
        self._clock = clock or Clock()
        self._temperature = temperature
        self._lock = threading.Lock()
        self._calls = 0
        self._failures = 0
        self._last_error = ""
        self._day, self._tokens_today = self._load_usage()
        self._client = self._make_client()
        self._hard_client = self._make_hard_client()

    # -- public -------------------------------------------------------------------------

    @property
    def configured(self) -> bool:
        return bool(self._base_url or self._api_key)

    @property
    def mode(self) -> Mode:
        if self._base_url:
            return "openai-compatible"
        if self._api_key:
            return "hf-providers"
        return "offline"

    def complete(self, messages: list[dict[str, Any]], tier: Tier, max_tokens: int = 512) -> str:
        """Return the model's reply text; raise ``LLMError`` (or ``TokenCapReached``)."""
        if self._client is None:
            raise LLMError(
                "No chat model configured: set an OpenAI-compatible base URL or an API key "
                "for HF Inference Providers.",
                mode="offline",
            )
        model = self.hard_model if tier == "hard" else self.fast_model
        client = (self._hard_client if tier == "hard" else None) or self._client
        self._check_cap()
        attempt = 0
        while True:
            with self._lock:
                self._calls += 1
            try:
                return self._call_once(client, messages, model, max_tokens)
            except _Retryable as error:
                self._record_failure(error.message)
                if attempt >= self._max_retries:
                    raise LLMError(
                        f"Chat model {model!r} failed after {attempt + 1} attempts: "
                        f"{error.message}",
                        model=model,
                        attempts=attempt + 1,
                    ) from None
                time.sleep(self._backoff_s * (2**attempt))
                attempt += 1
            except LLMError as error:
                self._record_failure(error.message)
                raise

    def status(self) -> dict[str, Any]:
        with self._lock:
            self._roll_day_locked()
            return {
                "configured": self.configured,
                "mode": self.mode,
                "fast_model": self.fast_model,
                "hard_model": self.hard_model,
                "hard_provider": self._hard_route(),
                "tokens_today": self._tokens_today,
                "daily_token_cap": self._cap,
                "paused_by_cap": self._cap_reached_locked(),
                "calls": self._calls,
                "failures": self._failures,
                "last_error": self._last_error,
            }

    # -- one call -----------------------------------------------------------------------

    def _call_once(
        self, client: InferenceClient, messages: list[dict[str, Any]], model: str,
        max_tokens: int,
    ) -> str:
        try:
            response = client.chat_completion(
                messages,
                model=model,
                max_tokens=max_tokens,
                temperature=self._temperature,
            )
        except InferenceTimeoutError:
            raise _Retryable(f"timed out after {self._timeout_s}s") from None
        except HfHubHTTPError as error:
            status = error.response.status_code if error.response is not None else 0
            message = self._redact(f"HTTP {status}: {error}".splitlines()[0])
            if status >= 500 or status in _RETRYABLE_4XX or status == 0:
                raise _Retryable(message) from None
            raise LLMError(message, model=model, status=status) from None
        except (
            httpx2.TransportError,
            OSError,
        ) as error:  # connection refused, DNS, reset: the server may come back
            raise _Retryable(self._redact(f"{type(error).__name__}: {error}")) from None
        except (
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
        ) as error:  # malformed reply
            raise LLMError(
                self._redact(f"Bad reply from {model!r}: {error}"), model=model
            ) from None
        text = _reply_text(response)
        self._add_tokens(_used_tokens(response, messages, text))
        return text

    def _make_client(self) -> InferenceClient | None:
        if self._base_url:
            _allow_offline_endpoint(self._base_url)
            return InferenceClient(
                base_url=self._base_url,
                api_key=self._api_key or None,
                timeout=self._timeout_s,
            )
        if self._api_key:
            return InferenceClient(
                provider=self._provider,  # type: ignore[arg-type]
                api_key=self._api_key,
                timeout=self._timeout_s,
            )
        return None

    def _make_hard_client(self) -> InferenceClient | None:
        """The hard model's own client when ``hard_provider`` names one, else the fast one's."""
        hard = self._hard_provider
        if not hard or self._client is None:
            return self._client
        if hard.startswith(("http://", "https://")):
            _allow_offline_endpoint(hard)
            return InferenceClient(
                base_url=hard.rstrip("/"), api_key=self._api_key or None, timeout=self._timeout_s
            )
        if self._base_url:
            raise ConfigError(
                f"llm.hard_provider={hard!r} names an HF Inference Provider, but llm.base_url "
                "sends every call to your own server; set hard_provider to the URL of the hard "
                "model's server, or leave it empty.",
                field="llm.hard_provider",
            )
        return InferenceClient(
            provider=hard,  # type: ignore[arg-type]
            api_key=self._api_key,
            timeout=self._timeout_s,
        )

    def _hard_route(self) -> str:
        """Where the hard model runs, for status (a URL loses any credentials in it)."""
        hard = self._hard_provider
        if not hard:
            return "same as fast"
        if "://" not in hard:
            return hard
        parts = urlsplit(hard)
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _record_failure(self, message: str) -> None:
        with self._lock:
            self._failures += 1
            self._last_error = self._redact(message)
        log.warning("LLM call failed: %s", self._redact(message))

    # -- daily token budget -------------------------------------------------------------

    def _check_cap(self) -> None:
        with self._lock:
            self._roll_day_locked()
            if self._cap_reached_locked():
                raise TokenCapReached(
                    f"Daily LLM token cap of {self._cap} reached ({self._tokens_today} used); "
                    "calls resume at 00:00 UTC or raise the cap.",
                    tokens_today=self._tokens_today,
                    daily_token_cap=self._cap,
                )

    def _cap_reached_locked(self) -> bool:
        return self._cap > 0 and self._tokens_today >= self._cap

    def _today(self) -> str:
        return self._clock.now().date().isoformat()

    def _roll_day_locked(self) -> None:
        today = self._today()
        if today != self._day:
            self._day, self._tokens_today = today, 0

    def _add_tokens(self, tokens: int) -> None:
        with self._lock:
            self._roll_day_locked()
            self._tokens_today += tokens
            self._save_usage_locked()

    def _load_usage(self) -> tuple[str, int]:
        today = self._today()
        if self._usage_path is None or not self._usage_path.exists():
            return today, 0
        try:
            data = json.loads(self._usage_path.read_text(encoding="utf-8"))
            if data.get("day") == today:
                return today, max(0, int(data.get("tokens", 0)))
        except (OSError, ValueError, TypeError, AttributeError):
            log.warning("Ignoring unreadable LLM usage file %s", self._usage_path)
        return today, 0

    def _save_usage_locked(self) -> None:
        if self._usage_path is None:
            return
        payload = json.dumps({"day": self._day, "tokens": self._tokens_today})
        try:
            self._usage_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._usage_path.parent, prefix=".llm-usage-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(payload)
            os.replace(tmp, self._usage_path)
        except OSError as error:
            log.warning("Could not persist LLM usage to %s: %s", self._usage_path, error)


class _Retryable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _reply_text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        raise LLMError("Chat reply had no choices") from None
    return content if isinstance(content, str) else ""


def _used_tokens(response: Any, messages: list[dict[str, Any]], text: str) -> int:
    usage = getattr(response, "usage", None)
    total = getattr(usage, "total_tokens", None) if usage is not None else None
    if isinstance(total, int) and total > 0:
        return total
    prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
    return max(1, (prompt_chars + len(text)) // 4)


# HF_HUB_OFFLINE=1 means "never reach the Hugging Face Hub" (it keeps the embedder offline);
# huggingface_hub enforces it on every request of its shared HTTP session, which would also
# block the user's own OpenAI-compatible endpoint (Ollama, vLLM on loopback). Requests to a
# configured base URL pass; everything else still goes through the Hub's own check.
_OWN_ENDPOINTS: set[str] = set()
_HOOK_LOCK = threading.Lock()


def _allow_offline_endpoint(base_url: str) -> None:
    from huggingface_hub.utils import _http

    with _HOOK_LOCK:
        first = not _OWN_ENDPOINTS
        _OWN_ENDPOINTS.add(base_url.rstrip("/"))
        if not first:
            return

        def hook(request: httpx2.Request) -> str | None:
            url = str(request.url)
            if any(url.startswith(prefix) for prefix in _OWN_ENDPOINTS):
                return None
            return _http.hf_request_event_hook(request)

        def factory() -> httpx2.Client:
            return httpx2.Client(event_hooks={"request": [hook]}, follow_redirects=True,
                                 timeout=None)

        _http.set_client_factory(factory)
