"""A missing or rejected embedding credential (seed 000): the server keeps serving, searches
answer from BM25 with a warning naming the credential, brain_stats and brain_capabilities say
so, and the next key that works turns meaning search back on without a restart.

Real parts: a brain on Qdrant Edge embedding through the loopback embeddings server
(tests/fake_embeddings.py), whose key the test changes to make it reject and then accept; a
key written to .env after start, read by the settings' own sources."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from pydantic import SecretStr

from brain.app import Brain
from brain.embedding.credential import CredentialGate
from brain.embedding.registry import build_remote, resolve_record
from brain.embedding.remote import RemoteEndpoint
from brain.errors import EmbeddingCredentialRejected
from config import load_settings
from tests.fake_embeddings import FakeEmbeddings

KEY = "sk-test-Rk3Vb8Lq2Wn6Zy1Tc5Xp9Hd4"
NOTES = ("uvicorn workers share nothing: keep rate limiter counters in redis",
         "the frontend build uses vite with a custom svg loader",
         "payment webhooks retry three times with exponential backoff")


async def _call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return dict((await client.call_tool(tool, args)).structured_content or {})


@pytest.fixture
def server() -> Any:
    with FakeEmbeddings(dimension=384, key=KEY) as fake:
        yield fake


@pytest.fixture
async def client_of(server: FakeEmbeddings, home: Path) -> AsyncIterator[Any]:
    from mcp_server import create_server

    opened: list[Brain] = []

    async def make(api_key: str) -> tuple[Brain, Client]:
        settings = load_settings(home=home, embedding={
            "provider": "openai", "model": "fake-embed", "dimension": 384,
            "base_url": server.base_url, "api_key": api_key, "credential_retry_s": 0,
            "max_retries": 0})
        brain = Brain(settings).open()
        opened.append(brain)
        return brain, Client(create_server(profile="full", brain=brain))

    yield make
    for b in opened:
        b.close()


async def test_a_rejected_key_falls_back_to_bm25_then_recovers_without_restart(
    client_of: Any, server: FakeEmbeddings, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "limits.md").write_text("# Limits\n\nThe redis rate limiter keeps its counters.\n")
    brain, client = await client_of(KEY)
    async with client:
        for text in NOTES:
            await _call(client, "add_memory", content=text, project="api")
        added = await _call(client, "add_source", path=str(src), name="src", trigger="manual")
        assert brain.sources.wait(added["job"]["job_id"], timeout=60)["status"] == "done"
        server.key = "sk-rotated-on-the-server"  # the endpoint now rejects our key
        sent = len(server.requests("/v1/embeddings"))
        page = await _call(client, "search_memory", query="rate limiter redis", project="api",
                           top_k=3, detail="full")
        assert page["results"] and "redis" in page["results"][0]["content"]
        assert all("similarity" not in h for h in page["results"])  # no dense leg ran
        [warning] = page["warnings"]
        assert warning["code"] == "EMBEDDING_CREDENTIAL_REJECTED"
        assert warning["credential"] == "embedding.api_key"
        assert "BRAIN__EMBEDDING__API_KEY" in warning["message"]
        assert len(server.requests("/v1/embeddings")) > sent  # it was tried, and refused
        for tool, args in (("search_files", {"query": "redis"}),
                           ("fs_search", {"query": "redis"}),
                           ("deep_search", {"query": "redis", "project": "api"}),
                           ("preflight_check", {"task": "redis"})):
            out = await _call(client, tool, **args)
            assert out["warnings"][0]["credential"] == "embedding.api_key", tool
        stats = await _call(client, "brain_stats")
        assert stats["embedding"]["dense"] is False
        assert stats["embedding"]["credential_state"] == "rejected"
        caps = await _call(client, "brain_capabilities")
        assert caps["embedding"]["dense"] is False
        assert any(d["part"] == "embedding" and "embedding.api_key" in d["why"]
                   for d in caps["degraded"])
        # A write needs a vector: refused, typed, nothing stored.
        count = brain.store.count(None)
        with pytest.raises(ToolError, match="EMBEDDING_CREDENTIAL_REJECTED"):
            await _call(client, "add_memory", content="another note", project="api")
        assert brain.store.count(None) == count
        # The endpoint takes the key again: the next search is dense again, no restart.
        server.key = KEY
        page = await _call(client, "search_memory", query="rate limiter redis", project="api",
                           top_k=3, detail="full")
        assert "warnings" not in page and "similarity" in page["results"][0]
        stats = await _call(client, "brain_stats")
        assert stats["embedding"]["dense"] is True
        assert stats["embedding"]["credential_state"] == "ok"
        caps = await _call(client, "brain_capabilities")
        assert not [d for d in caps["degraded"] if d["part"] == "embedding"]
        assert KEY not in json.dumps([stats, caps, page])


async def test_a_key_set_after_start_is_read_and_used(client_of: Any, server: FakeEmbeddings,
                                                      tmp_path: Path) -> None:
    # No key configured; the loopback server wants one, so it rejects the first call.
    brain, client = await client_of("")
    async with client:
        with pytest.raises(ToolError, match="EMBEDDING_CREDENTIAL_REJECTED"):
            await _call(client, "add_memory", content=NOTES[0], project="api")
        page = await _call(client, "search_memory", query="redis", project="api")
        assert page["warnings"][0]["credential"] == "embedding.api_key"
        # The operator writes the key to .env (the settings' own source); no restart.
        (tmp_path / ".env").write_text(f"BRAIN__EMBEDDING__API_KEY={KEY}\n")
        added = await _call(client, "add_memory", content=NOTES[0], project="api")
        assert added["note"]["zk_id"]
        page = await _call(client, "search_memory", query="rate limiter redis", project="api")
        assert "warnings" not in page and page["results"][0]["zk_id"] == added["note"]["zk_id"]
        assert brain.stats()["embedding"]["dense"] is True
        last = server.requests("/v1/embeddings")[-1]
        assert last.headers["authorization"] == f"Bearer {KEY}"


def test_the_gate_probes_once_per_interval(server: FakeEmbeddings) -> None:
    """While rejected, calls are refused without a request except one probe per interval."""
    now = [0.0]
    emb = build_remote(resolve_record("fake-embed", 384, provider="openai"),
                       RemoteEndpoint(base_url=server.base_url, api_key=SecretStr("sk-wrong"),
                                      max_retries=0, credential_retry_s=30))
    emb.gate = CredentialGate("embedding.api_key", True, retry_s=30, now=lambda: now[0])
    with pytest.raises(EmbeddingCredentialRejected):
        emb.embed_query("x")
    for _ in range(3):
        with pytest.raises(EmbeddingCredentialRejected, match="tried again every 30 s"):
            emb.embed_query("x")
    assert len(server.requests("/v1/embeddings")) == 1
    now[0] = 31.0
    server.key = "sk-wrong"
    assert emb.embed_query("x").shape == (384,)  # the probe goes out, and passes
    assert len(server.requests("/v1/embeddings")) == 2 and emb.status()["dense"] is True
