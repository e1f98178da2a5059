"""Remote embedding providers (issue 16) against a real embeddings server on loopback
(tests/fake_embeddings.py): the OpenAI /v1/embeddings protocol on the standard library, and
Hugging Face Inference through huggingface_hub pointed at the server's URL. Failures, hangs,
a wrong key, a wrong dimension and the daily token cap are the server's doing, not patches.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import SecretStr

from brain.app import Brain
from brain.clock import ManualClock
from brain.embedding.budget import TokenBudget
from brain.embedding.registry import HashEmbedder, build_remote, resolve_record
from brain.embedding.remote import OpenAITransport, RemoteEmbedder, RemoteEndpoint
from brain.errors import (
    ConfigError,
    EmbeddingCredentialMissing,
    EmbeddingCredentialRejected,
    EmbeddingProviderFailed,
    EmbeddingTokenCapReached,
    UnsupportedEmbeddingDimension,
)
from config import ConfigInvalid, load_settings
from tests.fake_embeddings import FakeEmbeddings, vectors
from tests.timing import HANG_S

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-Zq8Lw3Rt6Yp1Xv4Nm7Kd2Hs5"


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dimension=384, key=KEY) as fake:
        yield fake


def endpoint(fake: FakeEmbeddings, **kw: Any) -> RemoteEndpoint:
    opts: dict[str, Any] = {"base_url": fake.base_url, "api_key": SecretStr(KEY),
                            "timeout_s": 5.0, "deadline_s": 10.0, "backoff_s": 0.05}
    opts.update(kw)
    return RemoteEndpoint(**opts)


def openai(fake: FakeEmbeddings, model: str = "fake-embed", dimension: int = 384,
           **kw: Any) -> RemoteEmbedder:
    return build_remote(resolve_record(model, dimension, provider="openai"), endpoint(fake, **kw))


def expected(texts: list[str], dimension: int = 384) -> np.ndarray:
    return np.asarray(vectors(texts, dimension), dtype=np.float32)


# ------------------------------------------------------------------ OpenAI-compatible endpoint


def test_batches_in_order_with_the_key_and_the_record_prompts(server: FakeEmbeddings) -> None:
    # nomic-embed-text's record carries its query/document prompts and a 768-d default.
    server.dimension = 768
    emb = openai(server, "nomic-embed-text", 0, batch_size=4)
    texts = [f"note number {i} about redis rate limits" for i in range(10)]
    got = emb.embed_documents(texts)
    sent = server.requests("/v1/embeddings")
    assert [len(s.body["input"]) for s in sent] == [4, 4, 2]
    assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in sent)
    assert all(s.body["model"] == "nomic-embed-text" and "dimensions" not in s.body for s in sent)
    assert sent[0].body["input"][0] == "search_document: " + texts[0]
    # The server answers out of order; vectors come back in the texts' order.
    np.testing.assert_allclose(got, expected(["search_document: " + t for t in texts], 768),
                               atol=1e-6)
    q = emb.embed_query("redis")
    assert server.requests("/v1/embeddings")[-1].body["input"] == ["search_query: redis"]
    assert q.shape == (768,) and abs(float(np.linalg.norm(q)) - 1) < 1e-5
    st = emb.status()
    assert st["calls"] == 4 and st["texts"] == 11 and st["failures"] == 0
    assert st["tokens_today"] == sum(len(t.split()) + 1 for t in texts) + 2  # the server's count


def test_5xx_then_success_is_retried_with_backoff(server: FakeEmbeddings) -> None:
    server.script(("status", 503), ("status", 502), ("status", 429, "0.2"))
    emb = openai(server, max_retries=3)
    t0 = time.monotonic()
    got = emb.embed_documents(["alpha beta"])
    took = time.monotonic() - t0
    np.testing.assert_allclose(got, expected(["alpha beta"]), atol=1e-6)
    assert len(server.requests("/v1/embeddings")) == 4
    assert emb.status()["retries"] == 3 and emb.status()["failures"] == 3
    # 0.05 + 0.1 of backoff, then the server's Retry-After of 0.2 s
    assert took >= 0.35


def test_a_server_that_keeps_failing_gives_a_typed_error(server: FakeEmbeddings) -> None:
    server.script(*[("status", 500)] * 5)
    emb = openai(server, max_retries=2)
    with pytest.raises(EmbeddingProviderFailed, match="after 3 attempts") as err:
        emb.embed_documents(["x"])
    assert err.value.code == "EMBEDDING_PROVIDER_FAILED"
    assert len(server.requests("/v1/embeddings")) == 3
    assert "HTTP 500" in emb.status()["last_error"]


def test_a_rejected_key_is_typed_not_retried_and_never_shown(
    server: FakeEmbeddings, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-wrong-Pq9Vb2Nc5Xz8Lk1Jh4Gf7"
    emb = openai(server, api_key=SecretStr(wrong))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(EmbeddingCredentialRejected) as err:
        emb.embed_documents(["hello"])
    assert err.value.code == "EMBEDDING_CREDENTIAL_REJECTED"
    assert "HTTP 401" in err.value.message and "BRAIN__EMBEDDING__API_KEY" in err.value.message
    assert len(server.requests("/v1/embeddings")) == 1  # a bad key does not get better
    # The server echoed the key it was sent: it is in no message, log, status or repr.
    shown = [str(err.value), json.dumps(err.value.to_dict()), caplog.text,
             json.dumps(emb.status()), repr(emb.ep)]
    assert all(wrong not in text for text in shown)
    assert "Incorrect API key provided: ***" in caplog.text  # positive control: it was echoed


def test_a_hanging_server_is_cut_at_the_deadline(server: FakeEmbeddings) -> None:
    server.script(*[("hang", 2 * HANG_S)] * 10)
    emb = openai(server, timeout_s=0.4, deadline_s=1.2, max_retries=10)
    t0 = time.monotonic()
    with pytest.raises(EmbeddingProviderFailed, match="within 1.2s"):
        emb.embed_documents(["x"])
    assert time.monotonic() - t0 < HANG_S  # never the server's minute
    assert len(server.requests("/v1/embeddings")) < 11  # the deadline, not the retries, ended it


def test_a_trickling_reply_is_cut_too(server: FakeEmbeddings) -> None:
    # A byte every 0.2 s never trips a socket timeout of 0.5 s; the request's own limit does.
    server.script(("trickle", 2 * HANG_S))
    emb = openai(server, timeout_s=0.5, deadline_s=0.8, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(EmbeddingProviderFailed, match="no complete reply within 0.5s"):
        emb.embed_documents(["x"])
    assert time.monotonic() - t0 < HANG_S  # never the trickle's minute


def test_a_connection_refused_is_retried_then_typed() -> None:
    with FakeEmbeddings() as gone:
        url = gone.base_url
    emb = build_remote(resolve_record("fake-embed", 384, provider="openai"),
                       RemoteEndpoint(base_url=url, max_retries=1, backoff_s=0.01))
    with pytest.raises(EmbeddingProviderFailed, match="after 2 attempts"):
        emb.embed_query("x")


def test_a_batch_too_large_for_the_server_is_halved_and_remembered(
    server: FakeEmbeddings,
) -> None:
    server.max_batch = 3
    emb = openai(server, batch_size=8)
    texts = [f"text {i}" for i in range(8)]
    np.testing.assert_allclose(emb.embed_documents(texts), expected(texts), atol=1e-6)
    sizes = [len(s.body["input"]) for s in server.requests("/v1/embeddings")]
    assert sizes == [8, 4, 2, 2, 4, 2, 2]  # 8 and 4 refused, then halves
    assert emb.status()["batch_size"] == 2
    emb.embed_documents(texts)
    assert [len(s.body["input"]) for s in server.requests("/v1/embeddings")][7:] == [2, 2, 2, 2]


def test_vectors_of_another_length_are_refused(server: FakeEmbeddings) -> None:
    server.script(("dimension", 512))
    emb = openai(server)
    with pytest.raises(UnsupportedEmbeddingDimension, match="returned 512-dimensional"):
        emb.embed_documents(["x"])


def test_a_matryoshka_dimension_is_asked_for_and_cut_if_ignored(server: FakeEmbeddings) -> None:
    server.dimension = 768  # the server ignores "dimensions", as some do
    emb = openai(server, "nomic-embed-text", 256)
    got = emb.embed_documents(["alpha"])
    assert server.requests("/v1/embeddings")[0].body["dimensions"] == 256
    full = expected(["search_document: alpha"], 768)[:, :256]
    np.testing.assert_allclose(got, full / np.linalg.norm(full), atol=1e-6)


def test_model_records_refuse_what_they_cannot_do() -> None:
    with pytest.raises(UnsupportedEmbeddingDimension, match="supported: \\[256, 512, 1024, 1536\\]"):
        resolve_record("text-embedding-3-small", 300, provider="openai")
    with pytest.raises(UnsupportedEmbeddingDimension, match="BRAIN__EMBEDDING__DIMENSION"):
        resolve_record("my-own-model", 0, provider="openai")
    rec = resolve_record("my-own-model:latest", 1024, provider="openai", max_tokens=8192)
    assert (rec.id, rec.provider, rec.dimension, rec.max_seq_length) == (
        "openai:my-own-model:latest", "openai", 1024, 8192)
    assert resolve_record("openai:my-own-model:latest", 1024).id == rec.id  # the stamp resolves
    with pytest.raises(ConfigError, match="make them agree"):
        resolve_record("openai:my-own-model", 1024, provider="hf")


def test_a_remote_model_without_its_key_builds_and_refuses_every_call() -> None:
    """The server starts without the key (seed 000); each call fails at once, no request
    sent, with the typed error naming the credential (tests/embedding/test_embed_credential.py has the
    searches that answer from BM25 meanwhile)."""
    rec = resolve_record("text-embedding-3-small", 0, provider="openai")
    emb = build_remote(rec, RemoteEndpoint(base_url="https://api.openai.com/v1"))
    with pytest.raises(EmbeddingCredentialMissing, match="BRAIN__EMBEDDING__API_KEY") as err:
        emb.embed_query("x")
    assert err.value.details["credential"] == "embedding.api_key"
    assert emb.status()["calls"] == 0 and emb.status()["dense"] is False
    hf = build_remote(resolve_record("BAAI/bge-small-en-v1.5", 0, provider="hf"), None)
    with pytest.raises(EmbeddingCredentialMissing, match="embedding.api_key"):
        hf.embed_documents(["x"])
    with pytest.raises(ConfigError, match="BASE_URL"):
        build_remote(rec, RemoteEndpoint(api_key=SecretStr(KEY)))


# ----------------------------------------------------------------------- the daily token cap


def test_the_daily_cap_pauses_documents_visibly_and_resumes_next_day(
    server: FakeEmbeddings, tmp_path: Path
) -> None:
    clock = ManualClock(datetime(2026, 3, 1, 22, 0, tzinfo=UTC))
    rec = resolve_record("fake-embed", 384, provider="openai")
    ep = endpoint(server, daily_token_cap=10, usage_path=tmp_path / "usage.json", batch_size=2)
    emb = RemoteEmbedder(rec, OpenAITransport(rec, ep), ep)
    emb.budget = TokenBudget(10, ep.usage_path, clock)
    texts = ["one two three", "four five six", "seven eight", "nine ten", "eleven"]
    with pytest.raises(EmbeddingTokenCapReached, match="00:00 UTC") as err:
        emb.embed_documents(texts)
    assert err.value.code == "EMBEDDING_TOKEN_CAP_REACHED"
    # Two batches (6 + 4 tokens) went out; the third waits for tomorrow.
    assert len(server.requests("/v1/embeddings")) == 2
    st = emb.status()
    assert st["paused_by_cap"] is True and st["tokens_today"] == 10
    assert st["resumes_at"] == "2026-03-02T00:00:00Z" and st["refused_today"] == 1
    # A query still answers (a few tokens; refusing it would take search down) and counts.
    emb.embed_query("redis")
    assert emb.status()["tokens_today"] == 11
    # The count survives a restart.
    again = TokenBudget(10, ep.usage_path, clock)
    assert again.reached() and again.status()["tokens_today"] == 11
    clock.advance(hours=3)  # a new UTC day
    assert emb.embed_documents(texts[:2]).shape == (2, 384)
    assert emb.status()["paused_by_cap"] is False and emb.status()["tokens_today"] == 6


# ------------------------------------------------------------------------ Hugging Face Inference


def test_hf_inference_through_huggingface_hub(server: FakeEmbeddings) -> None:
    # huggingface_hub posts {"inputs": [...]} to an endpoint URL as given (TEI's /embed).
    rec = resolve_record("BAAI/bge-small-en-v1.5", 0, provider="hf")
    emb = build_remote(rec, RemoteEndpoint(base_url=server.tei_url, api_key=SecretStr(KEY),
                                           backoff_s=0.05, batch_size=3))
    server.script(("status", 503))
    texts = ["alpha beta", "gamma delta", "epsilon", "zeta eta"]
    got = emb.embed_documents(texts)
    np.testing.assert_allclose(got, expected(texts), atol=1e-6)
    sent = server.requests("/embed")
    assert [len(s.body["inputs"]) for s in sent] == [3, 3, 1]  # the 503 was retried
    assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in sent)
    q = emb.embed_query("alpha")
    prompt = rec.query_prompt
    assert server.requests("/embed")[-1].body["inputs"] == [prompt + "alpha"]
    np.testing.assert_allclose(q, expected([prompt + "alpha"])[0], atol=1e-6)
    assert emb.status()["retries"] == 1


def test_hf_inference_rejected_key_and_hang(server: FakeEmbeddings,
                                            caplog: pytest.LogCaptureFixture) -> None:
    wrong = "hf_WrongTokenQz7Xc4Vb1Nm8Lk5Jh2"
    rec = resolve_record("BAAI/bge-small-en-v1.5", 0, provider="hf")
    bad = build_remote(rec, RemoteEndpoint(base_url=server.tei_url, api_key=SecretStr(wrong)))
    with pytest.raises(EmbeddingCredentialRejected) as err:
        bad.embed_query("x")
    assert wrong not in str(err.value) and wrong not in caplog.text
    server.script(*[("hang", 2 * HANG_S)] * 5)
    slow = build_remote(rec, RemoteEndpoint(base_url=server.tei_url, api_key=SecretStr(KEY),
                                            timeout_s=0.4, deadline_s=1.0, backoff_s=0.05))
    t0 = time.monotonic()
    with pytest.raises(EmbeddingProviderFailed):
        slow.embed_query("x")
    assert time.monotonic() - t0 < HANG_S  # cut at its deadline, never the server's minute


# ------------------------------------------------------------------- a brain on the provider


def remote_settings(fake: FakeEmbeddings, home: Path, **extra: Any) -> Any:
    return load_settings(home=home, embedding={
        "provider": "openai", "model": "fake-embed", "dimension": 384,
        "base_url": fake.base_url, "api_key": KEY, **extra,
    })


async def test_a_brain_on_the_endpoint_adds_and_searches_end_to_end(
    server: FakeEmbeddings, home: Path
) -> None:
    from fastmcp import Client

    from mcp_server import create_server

    settings = remote_settings(server, home)
    brain = Brain(settings).open()
    try:
        async with Client(create_server(profile="full", brain=brain)) as client:
            a = (await client.call_tool("add_memory", {
                "content": "uvicorn workers share nothing: keep rate limiter counters in redis",
                "project": "api"})).structured_content["note"]
            await client.call_tool("add_memory", {
                "content": "the frontend build uses vite with a custom svg loader",
                "project": "api"})
            res = await client.call_tool("search_memory",
                                         {"query": "rate limiter redis", "project": "api"})
            hits = res.structured_content["results"]
            assert hits[0]["zk_id"] == a["zk_id"]
            stats = (await client.call_tool("brain_stats", {})).structured_content
        assert stats["model"]["active"] == "openai:fake-embed"
        emb = stats["embedding"]
        assert emb["provider"] == "openai" and emb["endpoint"] == server.root
        assert emb["credential"] == "embedding.api_key" and emb["calls"] >= 3
        assert KEY not in json.dumps(stats)
        # Every request carried the key; the brain's own files hold no trace of it.
        assert server.requests("/v1/embeddings")
        brain.store.flush()
        for path in home.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path
    finally:
        brain.close()


async def test_a_sync_pauses_on_the_cap_and_says_so(server: FakeEmbeddings, home: Path,
                                                    tmp_path: Path) -> None:
    src = tmp_path / "proj"
    src.mkdir()
    for i in range(6):
        (src / f"m{i}.py").write_text(f"def handler_{i}():\n    return 'payment webhook {i}'\n")
    brain = Brain(remote_settings(server, home, daily_token_cap=5, batch_size=2)).open()
    try:
        added = brain.sources.add(str(src), "proj", "p", "manual")
        job = brain.sources.wait(added["job"]["job_id"], timeout=60)
        assert job["status"] == "failed", job
        assert "EMBEDDING_TOKEN_CAP_REACHED" in job["error"]
        emb = brain.stats()["embedding"]
        assert emb["paused_by_cap"] is True and emb["tokens_today"] >= 5
        assert emb["resumes_at"].endswith("T00:00:00Z")
    finally:
        brain.close()


# ------------------------------------------------- start without a key, and the typed start error


def serve(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "BRAIN__HOME": str(home), "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "brain.cli", "serve"], input="", capture_output=True,
                          text=True, timeout=120, env=full, cwd=str(ROOT))


def test_startup_serves_without_the_key_and_says_which(home: Path) -> None:
    proc = serve(home, BRAIN__EMBEDDING__PROVIDER="openai",
                 BRAIN__EMBEDDING__MODEL="text-embedding-3-small",
                 BRAIN__EMBEDDING__BASE_URL="https://api.openai.com/v1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "needs the credential embedding.api_key and none is set" in proc.stderr
    assert "semantic search is off" in proc.stderr and proc.stdout == ""


def test_startup_stops_on_an_unsupported_dimension(home: Path) -> None:
    proc = serve(home, BRAIN__EMBEDDING__PROVIDER="openai",
                 BRAIN__EMBEDDING__MODEL="text-embedding-3-small",
                 BRAIN__EMBEDDING__DIMENSION="300", BRAIN__EMBEDDING__API_KEY=KEY,
                 BRAIN__EMBEDDING__BASE_URL="https://api.openai.com/v1")
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("opencode-brain: [UNSUPPORTED_EMBEDDING_DIMENSION]")
    assert KEY not in proc.stderr and KEY not in (home / "brain.log").read_text()


def test_config_wants_a_base_url_for_openai() -> None:
    with pytest.raises(ConfigInvalid, match="BRAIN__EMBEDDING__BASE_URL"):
        load_settings(embedding={"provider": "openai", "model": "x", "dimension": 8})


def test_the_key_is_a_secret_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__API_KEY", KEY)
    s = load_settings()
    assert s.embedding.api_key.get_secret_value() == KEY
    assert KEY not in repr(s) and KEY not in json.dumps(s.redacted())


def test_local_models_report_their_embedding_status(brain: Brain) -> None:
    emb = brain.stats()["embedding"]
    assert emb == {"provider": "hash", "model": "offline/hash-384", "dimension": 384,
                   "paused_by_cap": False, "dense": True}
    assert isinstance(brain.embedder.inner, HashEmbedder)  # under the model switch's proxy


def test_an_hf_token_set_for_chat_serves_hf_embedding_and_says_so(home: Path) -> None:
    from brain.embedding.remote import endpoint_from_settings

    s = load_settings(home=home, embedding={"provider": "hf", "model": "BAAI/bge-small-en-v1.5"},
                      llm={"api_key": "hf_ChatTokenQw1Er2Ty3Ui4Op5"})
    ep = endpoint_from_settings(s.embedding, home, s.llm.api_key)
    assert ep.credential == "llm.api_key"
    assert ep.api_key.get_secret_value() == "hf_ChatTokenQw1Er2Ty3Ui4Op5"
    # Its own key wins; an endpoint URL never borrows the chat token.
    s.embedding.api_key = SecretStr("hf_OwnTokenAs6Df7Gh8Jk9")
    assert endpoint_from_settings(s.embedding, home, s.llm.api_key).credential == "embedding.api_key"
    s.embedding.api_key = SecretStr("")
    s.embedding.base_url = "https://my-endpoint.example.com"
    assert not endpoint_from_settings(s.embedding, home, s.llm.api_key).api_key.get_secret_value()


def test_a_store_built_remotely_keeps_its_model_when_config_changes(
    server: FakeEmbeddings, home: Path
) -> None:
    with Brain(remote_settings(server, home)) as brain:
        zk = brain.memory.add("kafka consumer lag alarms page the on-call").note["zk_id"]
    before = len(server.requests("/v1/embeddings"))
    # Configured: the local hash model. The store says openai:fake-embed, so it keeps that.
    changed = remote_settings(server, home, provider="local", model="offline/hash-384")
    with Brain(changed) as brain:
        assert brain.pending_model == "offline/hash-384"
        assert brain.embedder.record.id == "openai:fake-embed"
        hits = brain.memory.search("kafka consumer lag")
        assert hits and hits[0]["zk_id"] == zk
        assert brain.stats()["embedding"]["model"] == "openai:fake-embed"
    assert len(server.requests("/v1/embeddings")) > before  # the query went to the endpoint
