"""The embedding endpoint registry ([embedding.endpoints.<id>], brain/embedding/endpoints.py)
against the loopback embeddings server (tests/fake_embeddings.py), which speaks the OpenAI
/v1/embeddings protocol (openai, ollama, qwen) and the native Gemini and Voyage APIs. Errors,
rate limits, wrong dimensions and a wrong key are the server's doing. The address class is
checked against real loopback addresses; only a DNS change, which cannot be staged here, goes
through an injected resolver."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import SecretStr

from brain.app import Brain
from brain.embedding.endpoints import AddressPin, address_class, build, parse
from brain.embedding.registry import build_embedder, resolve_record
from brain.embedding.remote import RemoteEndpoint
from brain.errors import (
    EmbeddingCredentialRejected,
    EmbeddingProviderFailed,
    EmbeddingSpendCapReached,
    EndpointAddressRefused,
    EndpointInUse,
    ModelUnavailable,
    UnsupportedEmbeddingDimension,
)
from config import EmbeddingEndpoint, load_settings
from tests.fake_embeddings import FakeEmbeddings, vectors

KEY = "sk-endpoint-Jx4Kp8Wm2Qv6Rt9Zc3"


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dimension=384, key=KEY) as fake:
        yield fake


def entry(url: str, provider: str = "openai", model: str = "fake-embed", dimension: int = 384,
          **kw: Any) -> EmbeddingEndpoint:
    spec = {"dimension": dimension, **kw.pop("spec", {})}
    return EmbeddingEndpoint(url=url, provider=provider, address=kw.pop("address", "private"),
                             models={model: spec}, api_key=SecretStr(kw.pop("key", KEY)), **kw)


def embedder(endpoints: dict[str, EmbeddingEndpoint], model_id: str, **base: Any) -> Any:
    ep = RemoteEndpoint(**{"timeout_s": 5.0, "deadline_s": 10.0, "backoff_s": 0.05, **base})
    return build_embedder(resolve_record(model_id, 0, endpoints=endpoints), remote=ep,
                          endpoints=endpoints)


def expected(texts: list[str], dimension: int = 384) -> np.ndarray:
    return np.asarray(vectors(texts, dimension), dtype=np.float32)


# ------------------------------------------------------------------------ the registry


def test_model_ids_name_an_endpoint_and_one_of_its_models(server: FakeEmbeddings) -> None:
    eps = {"local": entry(server.base_url, model="nomic-embed-text:latest", dimension=768)}
    assert parse("endpoint:local:nomic-embed-text:latest") == ("local", "nomic-embed-text:latest")
    assert parse("openai:x") is None
    rec = resolve_record("endpoint:local:nomic-embed-text:latest", 0, endpoints=eps)
    assert (rec.provider, rec.dimension) == ("endpoint", 768)
    with pytest.raises(ModelUnavailable, match=r"no embedding endpoint 'gone'"):
        resolve_record("endpoint:gone:x", 0, endpoints=eps)
    with pytest.raises(ModelUnavailable, match="lists no model 'other'"):
        resolve_record("endpoint:local:other", 0, endpoints=eps)
    with pytest.raises(UnsupportedEmbeddingDimension, match="returns 768-dimensional"):
        resolve_record("endpoint:local:nomic-embed-text:latest", 384, endpoints=eps)
    with pytest.raises(ModelUnavailable, match="endpoint:<id>:<model>"):
        resolve_record("endpoint:local", 0, endpoints=eps)


def test_the_settings_read_a_registry_from_toml_and_its_key_from_the_environment(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "brain.toml").write_text(
        '[embedding.endpoints.voy]\nurl = "https://api.voyageai.com/v1"\nprovider = "voyage"\n'
        '[embedding.endpoints.voy.models."voyage-3.5"]\ndimension = 1024\n'
        'price_per_mtok = 0.06\n')
    monkeypatch.setenv("BRAIN__EMBEDDING__ENDPOINTS__VOY__API_KEY", KEY)
    s = load_settings(home=home)
    voy = s.embedding.endpoints["voy"]
    assert voy.provider == "voyage" and voy.models["voyage-3.5"].price_per_mtok == 0.06
    assert voy.api_key.get_secret_value() == KEY and voy.address == "public"
    assert KEY not in json.dumps(s.model_dump(mode="json"))


# ------------------------------------------------------------------- OpenAI-compatible


def test_ollama_through_the_openai_path_without_a_key(server: FakeEmbeddings) -> None:
    server.key = ""
    eps = {"ollama": entry(server.base_url, "ollama", "nomic-embed-text", auth="none")}
    emb = embedder(eps, "endpoint:ollama:nomic-embed-text")
    got = emb.embed_documents(["alpha", "beta"])
    np.testing.assert_allclose(got, expected(["alpha", "beta"]), atol=1e-6)
    [sent] = server.requests("/v1/embeddings")
    assert sent.body["model"] == "nomic-embed-text" and "authorization" not in sent.headers
    assert emb.status()["credential_id"] == "embedding.endpoint.ollama"


def test_qwen_through_the_openai_path_with_its_key_and_a_chosen_dimension(
    server: FakeEmbeddings,
) -> None:
    server.dimension = 512  # what a server that honours "dimensions" returns
    eps = {"qwen": entry(server.base_url, "qwen", "text-embedding-v3", 512,
                         spec={"ask_dimension": True})}
    emb = embedder(eps, "endpoint:qwen:text-embedding-v3")
    assert emb.embed_query("hello").shape == (512,)
    [sent] = server.requests("/v1/embeddings")
    assert sent.body["dimensions"] == 512 and sent.headers["authorization"] == f"Bearer {KEY}"


# ---------------------------------------------------------------------------- Gemini


def test_gemini_native_requests(server: FakeEmbeddings) -> None:
    server.dimension = 3072
    eps = {"gem": entry(server.gemini_url, "gemini", "gemini-embedding-001", 768,
                        spec={"ask_dimension": True})}
    emb = embedder(eps, "endpoint:gem:gemini-embedding-001")
    texts = ["first passage", "second passage", "third"]
    got = emb.embed_documents(texts)
    full = expected(texts, 3072)[:, :768]
    np.testing.assert_allclose(got, full / np.linalg.norm(full, axis=1, keepdims=True), atol=1e-5)
    q = emb.embed_query("which passage")
    doc, query = server.requests()
    assert doc.path == "/gemini/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert doc.headers["x-goog-api-key"] == KEY and "authorization" not in doc.headers
    assert [r["taskType"] for r in doc.body["requests"]] == ["RETRIEVAL_DOCUMENT"] * 3
    assert doc.body["requests"][0]["model"] == "models/gemini-embedding-001"
    assert doc.body["requests"][0]["outputDimensionality"] == 768
    assert query.body["requests"][0]["taskType"] == "RETRIEVAL_QUERY" and q.shape == (768,)


def test_gemini_errors_rate_limits_and_wrong_dimensions(server: FakeEmbeddings) -> None:
    eps = {"gem": entry(server.gemini_url, "gemini", "text-embedding-004", 384)}
    emb = embedder(eps, "endpoint:gem:text-embedding-004", max_retries=3)
    server.script(("status", 429, "0.2"), ("status", 503))
    t0 = time.monotonic()
    assert emb.embed_documents(["x"]).shape == (1, 384)
    assert time.monotonic() - t0 >= 0.25  # Retry-After 0.2 s, then a 0.1 s backoff
    assert emb.status()["retries"] == 2
    server.script(("dimension", 256))
    with pytest.raises(UnsupportedEmbeddingDimension, match="returned 256-dimensional"):
        emb.embed_documents(["y"])
    server.script(("status", 400))
    with pytest.raises(EmbeddingProviderFailed, match="HTTP 400"):
        emb.embed_documents(["z"])
    wrong = embedder({"gem": entry(server.gemini_url, "gemini", "text-embedding-004", 384,
                                   key="AIza-wrong-key-000")}, "endpoint:gem:text-embedding-004")
    with pytest.raises(EmbeddingCredentialRejected, match="embedding.endpoint.gem") as err:
        wrong.embed_query("x")
    assert "AIza-wrong-key-000" not in str(err.value)
    assert wrong.status()["credential_state"] == "rejected"


# ---------------------------------------------------------------------------- Voyage


def test_voyage_native_requests_errors_and_dimensions(server: FakeEmbeddings) -> None:
    eps = {"voy": entry(server.voyage_url, "voyage", "voyage-3.5", 256,
                        spec={"ask_dimension": True, "price_per_mtok": 0.06})}
    emb = embedder(eps, "endpoint:voy:voyage-3.5", max_retries=2)
    texts = ["one text", "two texts here"]
    got = emb.embed_documents(texts)
    full = expected(texts)[:, :256]
    np.testing.assert_allclose(got, full / np.linalg.norm(full, axis=1, keepdims=True), atol=1e-5)
    emb.embed_query("a query")
    doc, query = server.requests("/voyage/v1/embeddings")
    assert doc.body["input_type"] == "document" and query.body["input_type"] == "query"
    assert doc.body["model"] == "voyage-3.5" and doc.body["output_dimension"] == 256
    assert doc.headers["authorization"] == f"Bearer {KEY}"
    status = emb.status()
    assert status["tokens_today"] == 2 + 3 + 2  # the server's usage.total_tokens
    assert status["usd_today"] == pytest.approx(7 * 0.06 / 1e6)
    server.script(("status", 500), ("status", 429))
    assert emb.embed_documents(["again"]).shape == (1, 256)
    server.script(*[("status", 500)] * 3)
    with pytest.raises(EmbeddingProviderFailed, match="after 3 attempts"):
        emb.embed_documents(["down"])
    server.script(("dimension", 128))
    with pytest.raises(UnsupportedEmbeddingDimension):
        emb.embed_documents(["short"])
    server.key = "sk-another"
    with pytest.raises(EmbeddingCredentialRejected, match="embedding.endpoint.voy"):
        emb.embed_documents(["rejected"])


# ---------------------------------------------------------------------- the dollar cap


def test_the_daily_dollar_cap_stops_documents_and_queries(server: FakeEmbeddings,
                                                          tmp_path: Path) -> None:
    eps = {"voy": entry(server.voyage_url, "voyage", "voyage-3.5", 384,
                        spec={"price_per_mtok": 1000.0})}  # $0.001 a token
    emb = embedder(eps, "endpoint:voy:voyage-3.5", daily_usd_cap=0.004,
                   usage_path=tmp_path / "usage.json")
    emb.embed_documents(["one two three"])  # 3 tokens: $0.003
    emb.embed_documents(["four five"])  # $0.005: over the cap now
    sent = len(server.requests())
    with pytest.raises(EmbeddingSpendCapReached, match=r"\$0.004"):
        emb.embed_documents(["more"])
    with pytest.raises(EmbeddingSpendCapReached):
        emb.embed_query("a query")
    assert len(server.requests()) == sent  # refused before any request
    st = emb.status()
    assert st["paused_by_usd_cap"] and st["usd_today"] == pytest.approx(0.005)
    assert st["resumes_at"].endswith("T00:00:00Z")
    assert json.loads((tmp_path / "usage.json").read_text())["usd"] == pytest.approx(0.005)


# ------------------------------------------------------------------- the address class


def test_address_classes_and_the_pin(server: FakeEmbeddings) -> None:
    assert address_class("127.0.0.1") == "private" and address_class("10.1.2.3") == "private"
    assert address_class("8.8.8.8") == "public" and address_class("::1") == "private"
    # A public endpoint that resolves to loopback is refused before anything is sent.
    emb = embedder({"pub": entry(server.base_url, address="public")}, "endpoint:pub:fake-embed")
    with pytest.raises(EndpointAddressRefused, match="outside its address class 'public'"):
        emb.embed_query("x")
    assert server.requests() == []
    # A private one is pinned; the host name is resolved by the (injected) resolver only.
    answers = {"embed.internal": ["127.0.0.1"]}
    url = server.base_url.replace("127.0.0.1", "embed.internal")
    eps = {"lan": entry(url, address="private")}
    emb = build(resolve_record("endpoint:lan:fake-embed", 0, endpoints=eps), eps,
                RemoteEndpoint(timeout_s=5.0, max_retries=0),
                resolver=lambda host: answers[host])
    assert emb.embed_query("pinned").shape == (384,)
    [sent] = server.requests()
    assert sent.headers["host"].startswith("embed.internal:")  # connected to the pin
    assert emb.ep.pin is not None and emb.ep.pin.pinned == "127.0.0.1"  # type: ignore[attr-defined]
    answers["embed.internal"] = ["93.184.216.34"]  # DNS now points outside the network
    with pytest.raises(EndpointAddressRefused, match="now resolves to 93.184.216.34"):
        emb.embed_query("moved")
    assert len(server.requests()) == 1
    pin = AddressPin("x", "http://a.example", "private", resolver=lambda h: ["10.0.0.5",
                                                                               "8.8.4.4"])
    with pytest.raises(EndpointAddressRefused, match="8.8.4.4"):  # any outside address
        pin()


# ----------------------------------------------------------------- a brain on an endpoint


def endpoint_settings(home: Path, fake: FakeEmbeddings, **entry_kw: Any) -> Any:
    eid = {"url": fake.base_url, "provider": "ollama", "address": "private",
           "models": {"fake-embed": {"dimension": 384}}, **entry_kw}
    return load_settings(home=home, embedding={
        "model": "endpoint:local:fake-embed", "endpoints": {"local": eid},
        "credential_retry_s": 0, "max_retries": 0})


def _tree(home: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


async def test_a_brain_on_an_endpoint_and_its_removal_while_in_use(
    server: FakeEmbeddings, home: Path
) -> None:
    from fastmcp import Client

    from mcp_server import create_server

    brain = Brain(endpoint_settings(home, server, api_key=KEY)).open()
    try:
        async with Client(create_server(brain=brain)) as client:
            note = (await client.call_tool("add_memory", {
                "content": "the deploy key rotates every ninety days"})).structured_content
            res = (await client.call_tool("search_memory", {
                "query": "deploy key rotation", "top_k": 3})).structured_content
            stats = (await client.call_tool("brain_stats", {})).structured_content
        assert res["results"][0]["zk_id"] == note["note"]["zk_id"] and "warnings" not in res
        assert stats["model"]["active"] == "endpoint:local:fake-embed"
        assert stats["embedding"]["credential_id"] == "embedding.endpoint.local"
        assert KEY not in json.dumps(stats)
    finally:
        brain.close()
    before = _tree(home)
    for gone in ({"endpoints": {}}, {"endpoints": {"renamed": endpoint_settings(
            home, server).embedding.endpoints["local"].model_dump()}}):
        s = load_settings(home=home, embedding={"model": "offline/hash-384", **gone})
        with pytest.raises(EndpointInUse, match="'local' is gone") as err:
            Brain(s).open()
        assert err.value.code == "ENDPOINT_IN_USE" and err.value.details["role"] == "active model"
    disabled = endpoint_settings(home, server, api_key=KEY, enabled=False)
    with pytest.raises(EndpointInUse, match="is disabled"):
        Brain(disabled).open()
    assert _tree(home) == before  # nothing written
    Brain(endpoint_settings(home, server, api_key=KEY)).open().close()  # restored: it opens


async def test_a_keyed_endpoint_without_its_key_serves_from_bm25_until_one_is_set(
    server: FakeEmbeddings, home: Path, tmp_path: Path
) -> None:
    brain = Brain(endpoint_settings(home, server)).open()  # auth key, no key set
    try:
        page = brain.files.search("anything")  # a search: BM25 only, no request
        assert page == [] and server.requests() == []
        st = brain.stats()["embedding"]
        assert st["credential_state"] == "missing" and st["dense"] is False
        (tmp_path / ".env").write_text(f"BRAIN__EMBEDDING__ENDPOINTS__LOCAL__API_KEY={KEY}\n")
        brain.memory.add("a note written once the key is set")
        assert brain.stats()["embedding"]["dense"] is True
        assert server.requests()[-1].headers["authorization"] == f"Bearer {KEY}"
    finally:
        brain.close()


def test_a_switch_to_an_endpoint_model_and_its_target_is_in_use(home: Path) -> None:
    """brain model switch names endpoint:<id>:<model>; while the rebuild to it waits (paused
    by a restart), its endpoint is in use as the rebuild target."""
    from brain.generations.wiring import run_command

    with FakeEmbeddings(dimension=64) as server:
        registry = {"local": {"url": server.base_url, "provider": "ollama", "auth": "none",
                              "address": "private", "models": {"fake-embed": {"dimension": 64}}}}
        s = load_settings(home=home, embedding={"model": "offline/hash-384",
                                                "rebuild_pause_s": 0, "endpoints": registry})
        with Brain(s) as b:
            zk = b.memory.add("kafka consumer lag alarms page the on-call", None).note["zk_id"]
            est = run_command(b.model_switch, "estimate", "endpoint:local:fake-embed")
            assert est["dimension"] == 64
            run_command(b.model_switch, "switch", "endpoint:local:fake-embed")
            out = run_command(b.model_switch, "wait", timeout_s=60)
            assert out["rebuild"]["status"] == "complete"
            assert b.meta.model == "endpoint:local:fake-embed" and b.meta.dimension == 64
            assert b.memory.search("kafka consumer lag", 3, stamp=False)[0]["zk_id"] == zk
        gone = load_settings(home=home, embedding={"model": "offline/hash-384",
                                                   "endpoints": {}})
        with pytest.raises(EndpointInUse, match="the active model"):
            Brain(gone).open()


def test_a_paused_rebuilds_target_endpoint_is_in_use(home: Path) -> None:
    from brain import generations
    from brain.generations import state as st

    home.mkdir(parents=True, exist_ok=True)
    target = st.Target("endpoint:voy:voyage-3.5", 1024, "local")
    st.save(home, st.GenerationState(active_model="offline/hash-384",
                                     rebuild=st.Rebuild(2, target, status="paused")))
    registry = {"voy": entry("https://api.voyageai.com/v1", "voyage", "voyage-3.5", 1024,
                             address="public")}
    generations.check_endpoints(home, registry)  # present: fine
    with pytest.raises(EndpointInUse, match="the rebuild target") as err:
        generations.check_endpoints(home, {})
    assert err.value.details == {"endpoint": "voy", "model": "endpoint:voy:voyage-3.5",
                                 "role": "rebuild target"}
    registry["voy"].models.clear()
    with pytest.raises(EndpointInUse, match="no longer lists the model"):
        generations.check_endpoints(home, registry)
    st.save(home, st.GenerationState(active_model="offline/hash-384",
                                     rebuild=st.Rebuild(2, target, status="cancelled")))
    generations.check_endpoints(home, {})  # a cancelled rebuild uses nothing


def test_ollama_and_qwen_errors_rate_limits_and_dimensions(server: FakeEmbeddings) -> None:
    """The OpenAI-compatible path of a registry entry keeps the remote client's handling."""
    for provider, auth in (("ollama", "none"), ("qwen", "key")):
        server.key = KEY if auth == "key" else ""
        eps = {provider: entry(server.base_url, provider, "m", auth=auth)}
        emb = embedder(eps, f"endpoint:{provider}:m", max_retries=2)
        server.script(("status", 429, "0.1"), ("status", 502))
        assert emb.embed_documents(["x"]).shape == (1, 384), provider
        assert emb.status()["retries"] == 2, provider
        server.script(("dimension", 100))
        with pytest.raises(UnsupportedEmbeddingDimension, match="returned 100-dimensional"):
            emb.embed_documents(["y"])
        server.script(("status", 404))
        with pytest.raises(EmbeddingProviderFailed, match="HTTP 404"):
            emb.embed_documents(["z"])
    server.key = "sk-rotated"
    with pytest.raises(EmbeddingCredentialRejected, match="BRAIN__EMBEDDING__ENDPOINTS__QWEN__API_KEY"):
        emb.embed_documents(["rejected"])
