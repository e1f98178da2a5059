"""The native embedding APIs of Gemini and Voyage (endpoint registry providers gemini and
voyage, brain/embedding/endpoints.py), on the standard library like the OpenAI transport.

- Gemini (``POST {url}/models/{model}:batchEmbedContents``, key in ``x-goog-api-key``): one
  request per text, ``taskType`` RETRIEVAL_QUERY or RETRIEVAL_DOCUMENT, ``outputDimensionality``
  when the model entry asks for it; the answer is ``{"embeddings": [{"values": [...]}]}`` in the
  texts' order, with no token count. Gemini answers a bad key with 400 API_KEY_INVALID (or
  403): a rejected credential either way.
- Voyage (``POST {url}/embeddings``, ``Authorization: Bearer``): ``input``, ``model``,
  ``input_type`` query or document, ``output_dimension`` when asked; the answer is
  ``{"data": [{"embedding", "index"}], "usage": {"total_tokens"}}``.

Retries, backoff (429 and 5xx, Retry-After honoured), deadlines, the dimension check and the
caps are the RemoteEmbedder's, as for every remote model.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import numpy as np

from brain.embedding.base import ModelRecord
from brain.embedding.remote import (
    RemoteEndpoint,
    bearer,
    embeddings_data,
    http_failure,
    send,
    shown_endpoint,
)
from brain.errors import EmbeddingProviderFailed


def _malformed(ep: RemoteEndpoint, record: ModelRecord, api: str, exc: Exception) -> Exception:
    return EmbeddingProviderFailed(
        f"{shown_endpoint(ep.base_url)} sent a reply that is not a {api} embeddings response "
        f"({type(exc).__name__}); is the endpoint's url the API root?", model=record.id)


class GeminiTransport:
    def __init__(self, record: ModelRecord, ep: RemoteEndpoint, model: str,
                 ask_dimension: bool = False) -> None:
        self.record, self.ep, self.model = record, ep, model
        self.url = f"{ep.base_url}/models/{quote(model, safe='-._')}:batchEmbedContents"
        self.dimension = record.dimension if ask_dimension else None

    def embed(self, texts: list[str], limit_s: float,
              kind: str = "document") -> tuple[np.ndarray, int | None]:
        task = "RETRIEVAL_QUERY" if kind == "query" else "RETRIEVAL_DOCUMENT"
        one: dict[str, Any] = {"model": f"models/{self.model}", "taskType": task}
        if self.dimension:
            one["outputDimensionality"] = self.dimension
        payload = {"requests": [{**one, "content": {"parts": [{"text": t}]}} for t in texts]}
        key = self.ep.api_key.get_secret_value() if self.ep.send_key else ""
        headers = {"x-goog-api-key": key} if key else {}
        try:
            reply = send(self.url, payload, headers, limit_s, self.record, self.ep)
        except EmbeddingProviderFailed as exc:
            bad_key = "API_KEY_INVALID" in exc.message or "API key not valid" in exc.message
            if exc.details.get("status") == 400 and bad_key:
                raise http_failure(401, exc.message, self.record, self.ep, None) from None
            raise
        try:
            rows = [item["values"] for item in reply.json()["embeddings"]]
            return np.asarray(rows, dtype=np.float32), None
        except (ValueError, TypeError, KeyError) as exc:
            raise _malformed(self.ep, self.record, "Gemini", exc) from None


class VoyageTransport:
    def __init__(self, record: ModelRecord, ep: RemoteEndpoint, model: str,
                 ask_dimension: bool = False) -> None:
        self.record, self.ep, self.model = record, ep, model
        self.url = f"{ep.base_url}/embeddings"
        self.dimension = record.dimension if ask_dimension else None

    def embed(self, texts: list[str], limit_s: float,
              kind: str = "document") -> tuple[np.ndarray, int | None]:
        payload: dict[str, Any] = {"input": texts, "model": self.model,
                                   "input_type": "query" if kind == "query" else "document",
                                   "truncation": True}
        if self.dimension:
            payload["output_dimension"] = self.dimension
        reply = send(self.url, payload, bearer(self.ep), limit_s, self.record, self.ep)
        try:
            return embeddings_data(reply.json())
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise _malformed(self.ep, self.record, "Voyage", exc) from None
