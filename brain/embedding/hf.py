"""Hugging Face Inference as an embedding transport: ``InferenceClient.feature_extraction``.

- ``base_url`` empty: HF Inference Providers (``hf_provider``, default ``hf-inference``), the
  model by its Hub id, the token as the key.
- ``base_url`` set: an Inference Endpoint or a Text Embeddings Inference server. huggingface_hub
  posts ``{"inputs": [...]}`` to that URL as given (no path appended) and reads a list of vectors.

The client's own timeout bounds each socket operation; the call also runs in a worker thread
joined with the time limit, so a trickling server cannot hold the caller past it.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx2  # the HTTP client huggingface_hub 2.x is built on
import numpy as np
from huggingface_hub import InferenceClient
from huggingface_hub.errors import HfHubHTTPError, InferenceTimeoutError

from brain.embedding.base import ModelRecord
from brain.embedding.remote import RemoteEndpoint, Retryable, http_failure, redactor, shown_endpoint
from brain.errors import EmbeddingProviderFailed


class HFTransport:
    def __init__(self, record: ModelRecord, ep: RemoteEndpoint) -> None:
        self.record = record
        self.ep = ep
        self.model = ep.base_url or record.id.split(":", 1)[1]
        token = ep.api_key.get_secret_value() or None
        if ep.base_url:
            # HF_HUB_OFFLINE blocks every hub request; the user's own endpoint is not the hub.
            from brain.llm.router import _allow_offline_endpoint

            _allow_offline_endpoint(ep.base_url)
            self.client = InferenceClient(model=ep.base_url, token=token, timeout=ep.timeout_s)
        else:
            self.client = InferenceClient(provider=ep.hf_provider,  # type: ignore[arg-type]
                                          token=token, timeout=ep.timeout_s)

    def embed(self, texts: list[str], limit_s: float,
              kind: str = "document") -> tuple[np.ndarray, int | None]:
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["value"] = self.client.feature_extraction(texts, model=self.model)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = exc

        worker = threading.Thread(target=call, name="hf-embed", daemon=True)
        worker.start()
        worker.join(limit_s)
        if worker.is_alive():
            raise Retryable(f"no reply within {limit_s:g}s")
        if "error" in box:
            raise self._failure(box["error"]) from None
        return np.asarray(box["value"], dtype=np.float32), None  # HF reports no token usage

    def _failure(self, exc: BaseException) -> Exception:
        redact = redactor(self.ep.api_key)
        if isinstance(exc, InferenceTimeoutError):
            return Retryable(f"timed out after {self.ep.timeout_s:g}s")
        if isinstance(exc, HfHubHTTPError) and exc.response is not None:
            resp = exc.response
            return http_failure(resp.status_code, _body(resp), self.record, self.ep,
                                resp.headers.get("retry-after"))
        if isinstance(exc, httpx2.TransportError | OSError):
            return Retryable(redact(f"{type(exc).__name__}: {exc}"))
        where = shown_endpoint(self.ep.base_url) or f"HF Inference ({self.ep.hf_provider})"
        return EmbeddingProviderFailed(
            redact(f"{where} could not embed with {self.record.id}: {type(exc).__name__}: {exc}"),
            model=self.record.id,
        )


def _body(resp: Any) -> str:
    try:
        return str(resp.text)[:2000]
    except Exception:  # noqa: BLE001 - a streamed body not read: the status says enough
        return ""
