"""Relevant or nothing (issue 52): with ``[retrieval] relevance_floor`` on, a search whose hits
do not answer it says so (``answer: "none"``, no results) instead of returning the closest
unrelated notes; a caller can still ask for the top k regardless (``confidence_min`` 0). Real
all-MiniLM-L6-v2: the floor is calibrated on that model's cosine scale
(brain/search/relevance.py). Off by default until it is calibrated on coding notes too."""

from __future__ import annotations

from typing import Any

import pytest

from brain.app import Brain
from brain.search import relevance
from brain.search.fusion import Candidate
from brain.vector_store import SparseVector
from config import Settings

NOTES = (
    "The CLI refuses with STORE_LOCKED while the agent's server holds the data dir",
    "Allowed roots outside the home folder are set with BRAIN__PATHS__ALLOWED_ROOTS",
    "pytest hung on the websocket test because the event loop fixture was session scoped",
    "We chose Postgres over SQLite because several workers write concurrently",
    "The web explorer lists notes by project and shows their links as a graph",
)


@pytest.fixture
def floor_on(settings: Settings) -> None:
    """The floor on, before the brain is built (the fixtures after this one build it)."""
    settings.retrieval.relevance_floor = True


async def _add_all(client: Any) -> None:
    for text in NOTES:
        await client.call_tool("add_memory", {"content": text, "project": "p"})


@pytest.mark.model
async def test_an_unrelated_query_answers_none(floor_on: None, real_client: Any) -> None:
    await _add_all(real_client)
    page = (await real_client.call_tool(
        "search_memory", {"query": "kubernetes helm chart rollback", "project": "p"})).data
    assert page["results"] == [] and page["answer"] == "none"
    related = (await real_client.call_tool(
        "search_memory", {"query": "why did the CLI say the store is locked", "project": "p"}
    )).data
    assert related["answer"] != "none" and related["results"][0]["title"].startswith("The CLI")


@pytest.mark.model
async def test_confidence_min_zero_asks_for_the_top_k_regardless(floor_on: None,
                                                                 real_client: Any) -> None:
    await _add_all(real_client)
    page = (await real_client.call_tool("search_memory", {
        "query": "kubernetes helm chart rollback", "project": "p", "top_k": 3,
        "filters": {"confidence_min": 0}})).data
    assert len(page["results"]) == 3


@pytest.mark.model
async def test_preflight_and_deep_search_answer_nothing_unrelated(floor_on: None,
                                                                  real_client: Any) -> None:
    await _add_all(real_client)
    await real_client.call_tool("record_failure", {
        "content": "alembic upgrade failed: DATABASE_URL was not set", "project": "p",
        "failure_signature": "alembic: DATABASE_URL"})
    pre = (await real_client.call_tool(
        "preflight_check", {"task": "tune the kubernetes helm chart rollback", "project": "p"}
    )).data
    assert pre["mistakes"] == []
    hit = (await real_client.call_tool(
        "preflight_check", {"task": "run the alembic database migration", "project": "p"})).data
    assert len(hit["mistakes"]) == 1
    deep = (await real_client.call_tool(
        "deep_search", {"query": "kubernetes helm chart rollback", "project": "p"})).data
    assert deep["results"] == []


def _cand(similarity: float | None, text: str) -> Candidate:
    return Candidate("id", {"content": text}, score=1.0, similarity=similarity)


def test_the_floor_reads_cosine_and_keyword_coverage() -> None:
    floor = relevance.Floor(threshold=0.5, coverage_weight=0.1)
    query = relevance._ENCODER.query("rotate the session tokens")
    text = lambda p: str(p["content"])  # noqa: E731
    # cosine alone under the bar, full keyword coverage lifts it over
    assert relevance.answered([_cand(0.45, "we rotate session tokens daily")], query, text, floor)
    # a long note's diluted cosine: every query term in it answers on its own
    assert relevance.answered([_cand(0.1, "session tokens: we rotate them")], query, text, floor)
    assert not relevance.answered([_cand(0.1, "we rotate the tyres")], query, text, floor)
    assert not relevance.answered([_cand(0.45, "an unrelated note")], query, text, floor)
    assert relevance.answered([_cand(0.6, "an unrelated note")], query, text, floor)
    # no cosine (the dense leg off): never judged; no candidates: nothing to judge
    assert relevance.answered([_cand(None, "x")], query, text, floor)
    assert relevance.answered([], SparseVector((), ()), text, floor)


def test_the_floor_follows_the_model_and_the_settings() -> None:
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    assert relevance.floor_for(minilm, enabled=True, threshold=None) == relevance.CALIBRATED[minilm]
    assert relevance.floor_for(minilm, enabled=False, threshold=None) is None
    assert relevance.floor_for("offline/hash-384", enabled=True, threshold=None) is None
    assert relevance.floor_for("offline/hash-384", enabled=True, threshold=0.3) == \
        relevance.Floor(0.3, 0.0, 1.01)


def test_a_brain_on_an_uncalibrated_model_keeps_every_hit(brain: Brain) -> None:
    assert brain.search_policy.relevance is None  # the hash embedder of the test brain


async def test_off_by_default(real_client: Any, real_brain: Brain) -> None:
    assert real_brain.settings.retrieval.relevance_floor is False
    await _add_all(real_client)
    page = (await real_client.call_tool(
        "search_memory", {"query": "kubernetes helm chart rollback", "project": "p"})).data
    assert page["results"] and page["answer"] != "none"
