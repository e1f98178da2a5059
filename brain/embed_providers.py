"""Builds the embedder of a remote model record: checks its credential, then picks the
transport of its provider (openai: ``/v1/embeddings`` on the standard library; hf:
``huggingface_hub.InferenceClient``). Its own module so the HF transport, which builds on
embed_remote, is imported only when used and no module imports its own importer."""

from __future__ import annotations

from brain.embed_remote import (
    OpenAITransport,
    RemoteEmbedder,
    RemoteEndpoint,
    Transport,
    is_loopback,
    shown_endpoint,
)
from brain.encoding import ModelRecord
from brain.errors import ConfigError, EmbeddingCredentialMissing


def build_remote(record: ModelRecord, endpoint: RemoteEndpoint | None) -> RemoteEmbedder:
    ep = endpoint or RemoteEndpoint()
    if record.provider == "openai" and not ep.base_url:
        raise ConfigError(f"model {record.id} needs BRAIN__EMBEDDING__BASE_URL (the endpoint's "
                          "/v1 URL, e.g. http://localhost:11434/v1)")
    # A server on this machine (Ollama, llama.cpp, TEI) needs no key; anything else does.
    if not ep.api_key.get_secret_value() and not (ep.base_url and is_loopback(ep.base_url)):
        where = shown_endpoint(ep.base_url) or f"HF Inference ({ep.hf_provider})"
        raise EmbeddingCredentialMissing(
            f"embedding model {record.id} at {where} needs a key and none is set: set "
            "BRAIN__EMBEDDING__API_KEY (credential embedding.api_key). No other model is used "
            "in its place.",
            model=record.id, credential="embedding.api_key",
        )
    transport: Transport
    if record.provider == "openai":
        transport = OpenAITransport(record, ep)
    else:
        from brain.embed_hf import HFTransport

        transport = HFTransport(record, ep)
    return RemoteEmbedder(record, transport, ep)
