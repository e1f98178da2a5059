"""Builds the embedder of a remote model record: checks its credential, then picks the
transport of its provider (openai: ``/v1/embeddings`` on the standard library; hf:
``huggingface_hub.InferenceClient``). Its own module so the HF transport, which builds on
embed_remote, is imported only when used and no module imports its own importer."""

from __future__ import annotations

import logging

from brain.embedding.base import ModelRecord
from brain.embedding.remote import (
    OpenAITransport,
    RemoteEmbedder,
    RemoteEndpoint,
    Transport,
    shown_endpoint,
)
from brain.errors import ConfigError

log = logging.getLogger(__name__)


def build_remote(record: ModelRecord, endpoint: RemoteEndpoint | None) -> RemoteEmbedder:
    """The embedder of ``record`` at ``endpoint``. Without the key it needs it still builds,
    its credential ``missing`` (brain/embedding/credential.py): the server starts and searches
    answer from BM25 until a key is set."""
    ep = endpoint or RemoteEndpoint()
    if record.provider == "openai" and not ep.base_url:
        raise ConfigError(f"model {record.id} needs BRAIN__EMBEDDING__BASE_URL (the endpoint's "
                          "/v1 URL, e.g. http://localhost:11434/v1)")
    if ep.needs_key and not ep.api_key.get_secret_value():
        where = shown_endpoint(ep.base_url) or f"HF Inference ({ep.hf_provider})"
        log.warning("embedding model %s at %s needs the credential %s and none is set: "
                    "semantic search is off until it is", record.id, where, ep.credential)

    def transport_for(e: RemoteEndpoint) -> Transport:
        if record.provider == "openai":
            return OpenAITransport(record, e)
        from brain.embedding.hf import HFTransport

        return HFTransport(record, e)

    return RemoteEmbedder(record, transport_for(ep), ep, transport_for)
