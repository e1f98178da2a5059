"""llm.hard_provider: the hard model runs on its own provider, the fast one on the default.

Two loopback OpenAI-compatible servers (tests/fake_llm.py) stand for the two providers; each
records what it was asked. brain_capabilities reports where the hard model runs, the
reranker, the storage backend and what runs degraded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from brain.app import Brain
from brain.errors import ConfigError
from brain.llm.router import ModelRouter
from config import Settings
from tests.conftest import _seed_store, hash_embedder
from tests.fake_llm import FakeLLM

HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture
def two() -> Iterator[tuple[FakeLLM, FakeLLM]]:
    with FakeLLM(lambda _r: "fast answer") as fast, FakeLLM(lambda _r: "hard answer") as hard:
        yield fast, hard


def test_each_tier_goes_to_its_own_server(two: tuple[FakeLLM, FakeLLM]) -> None:
    fast, hard = two
    router = ModelRouter(base_url=fast.base_url, hard_provider=hard.base_url,
                         fast_model="small-m", hard_model="big-m", max_retries=0)
    assert router.complete(HELLO, "fast") == "fast answer"
    assert router.complete(HELLO, "hard") == "hard answer"
    assert router.complete(HELLO, "hard") == "hard answer"
    assert [r.body["model"] for r in fast.requests] == ["small-m"]
    assert [r.body["model"] for r in hard.requests] == ["big-m", "big-m"]
    assert router.status()["hard_provider"] == hard.base_url


def test_without_hard_provider_both_tiers_share_the_fast_server(
    two: tuple[FakeLLM, FakeLLM]
) -> None:
    fast, hard = two
    router = ModelRouter(base_url=fast.base_url, max_retries=0)
    router.complete(HELLO, "hard")
    router.complete(HELLO, "fast")
    assert len(fast.requests) == 2 and not hard.requests
    assert router.status()["hard_provider"] == "same as fast"


def test_a_provider_name_with_an_own_server_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError) as err:
        ModelRouter(base_url="http://127.0.0.1:1/v1", hard_provider="together")
    assert "hard_provider" in err.value.message and "URL" in err.value.message


def test_credentials_in_a_hard_url_never_show_in_status(two: tuple[FakeLLM, FakeLLM]) -> None:
    fast, hard = two
    url = hard.base_url.replace("http://", "http://user:s3cretpw@")
    status = ModelRouter(base_url=fast.base_url, hard_provider=url).status()
    assert "s3cretpw" not in json.dumps(status) and status["hard_provider"] == hard.base_url


@pytest.fixture
def llm_brain(settings: Settings, clock: Any, _empty_shard: Any,
              two: tuple[FakeLLM, FakeLLM]) -> Iterator[Brain]:
    fast, hard = two
    settings.embedding.model = "offline/hash-384"
    settings.llm.base_url, settings.llm.hard_provider = fast.base_url, hard.base_url
    settings.llm.enrichment = False
    _seed_store(settings, _empty_shard)
    b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        yield b
    finally:
        b.close()


async def test_brain_capabilities_reports_routes_reranker_and_storage(
    llm_brain: Brain, two: tuple[FakeLLM, FakeLLM]
) -> None:
    from fastmcp import Client

    from mcp_server import create_server

    _, hard = two
    async with Client(create_server(profile="full", brain=llm_brain)) as c:
        caps = (await c.call_tool("brain_capabilities", {})).structured_content or {}
    assert caps["llm"]["hard_provider"] == hard.base_url
    assert caps["reranker"] == {"enabled": False, "order": "fusion"}
    assert caps["storage"]["backend"] == llm_brain.store.info().backend
    assert caps["degraded"] == []


async def test_capabilities_say_what_runs_degraded(client: Any) -> None:
    caps = (await client.call_tool("brain_capabilities", {})).structured_content or {}
    assert [d["part"] for d in caps["degraded"]] == ["llm"]
    assert caps["storage"]["backend"] and "reranker" in caps
