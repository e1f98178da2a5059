"""Note-builder prompts and tolerant parsing, through a real router and the loopback fake LLM."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from brain.llm.prompts import (
    RELATIONS,
    Evolution,
    MergedNote,
    NoteFields,
    construct_note,
    decide_links,
    evolve_context,
    parse_json_object,
    synthesize_merge,
)
from brain.llm.router import ModelRouter
from tests.fake_llm import FakeLLM

GOOD_NOTE = {
    "title": "Qdrant Edge allows one open shard per directory",
    "context": "Matters when two processes share a data dir.",
    "keywords": ["qdrant", "edge", "shard", "wal lock", "WouldBlock"],
    "tags": ["Vector Store", "concurrency"],
}
NEW = {"zk_id": "ZK-00000001", "title": "new", "content": "new content", "context": ""}
CANDIDATES = [
    {"zk_id": "ZK-aaaaaaaa", "title": "a", "content": "alpha", "context": "ctx a"},
    {"zk_id": "ZK-bbbbbbbb", "title": "b", "content": "beta", "context": ""},
]


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def router(fake_llm: FakeLLM) -> ModelRouter:
    return ModelRouter(base_url=fake_llm.base_url, max_retries=0, timeout_s=5.0)


def test_construct_note_plain_json_uses_fast_tier(fake_llm: FakeLLM, router: ModelRouter) -> None:
    fake_llm.script(json.dumps(GOOD_NOTE))
    fields = construct_note(router, "Qdrant Edge locks its WAL; a second load fails.")
    assert fields == NoteFields(
        title=GOOD_NOTE["title"],
        context=GOOD_NOTE["context"],
        keywords=GOOD_NOTE["keywords"],
        tags=["vector-store", "concurrency"],
    )
    body = fake_llm.requests[0].body
    assert body["model"] == router.fast_model
    assert "a second load fails" in body["messages"][-1]["content"]
    assert "JSON only" in body["messages"][-1]["content"]


def test_construct_note_fenced_json_after_think_and_prose(
    fake_llm: FakeLLM, router: ModelRouter
) -> None:
    reply = (
        "<think>The user wants {braces} and a note.</think>\n"
        "Sure! Here is the note:\n```json\n"
        '{"title": "  Retry on 5xx  ", "keywords": ["retry", "backoff",], "tags": "http, retry",}\n'
        "```\nHope that helps."
    )
    fake_llm.script(reply)
    fields = construct_note(router, "retry on 5xx")
    assert fields is not None
    assert fields.title == "Retry on 5xx"
    assert fields.keywords == ["retry", "backoff"]
    assert fields.tags == ["http", "retry"]
    assert fields.context == ""  # missing field filled with empty


def test_construct_note_trims_long_title(fake_llm: FakeLLM, router: ModelRouter) -> None:
    fake_llm.script(json.dumps({**GOOD_NOTE, "title": "word " * 40}))
    fields = construct_note(router, "x")
    assert fields is not None and len(fields.title) <= 80


@pytest.mark.parametrize(
    "reply",
    [
        "I cannot help with that.",
        "",
        "```json\n{not json at all\n```",
        "[1, 2, 3]",
        json.dumps({"context": "no title or keywords"}),
        json.dumps({"title": "has title", "keywords": []}),
        json.dumps({"title": None, "keywords": ["a"]}),
        '<think>unterminated thinking {"title": "x", "keywords": ["y"]}',
    ],
)
def test_construct_note_junk_returns_none(
    fake_llm: FakeLLM, router: ModelRouter, reply: str
) -> None:
    fake_llm.script(reply)
    assert construct_note(router, "content") is None


def test_construct_note_llm_failure_returns_none(fake_llm: FakeLLM, router: ModelRouter) -> None:
    fake_llm.script(("status", 500))
    assert construct_note(router, "content") is None


def test_construct_note_offline_router_returns_none() -> None:
    assert construct_note(ModelRouter(), "content") is None


def test_decide_links_normalises_relations_and_drops_unknown_ids(
    fake_llm: FakeLLM, router: ModelRouter
) -> None:
    reply = {
        "links": [
            {"id": "ZK-aaaaaaaa", "relation": "Caused-By"},
            {"id": "ZK-bbbbbbbb", "relation": "is vaguely similar to"},
            {"id": "ZK-99999999", "relation": "supports"},
            {"id": "ZK-aaaaaaaa", "relation": "supports"},
            42,
        ]
    }
    fake_llm.script("```\n" + json.dumps(reply) + "\n```")
    links = decide_links(router, NEW, CANDIDATES)
    assert links == [("ZK-aaaaaaaa", "caused_by"), ("ZK-bbbbbbbb", "related")]
    prompt = fake_llm.requests[0].body["messages"][-1]["content"]
    assert "ZK-aaaaaaaa" in prompt and "ZK-bbbbbbbb" in prompt
    assert all(relation in prompt for relation in RELATIONS)


def test_decide_links_empty_and_junk(fake_llm: FakeLLM, router: ModelRouter) -> None:
    fake_llm.script('{"links": []}', "no idea")
    assert decide_links(router, NEW, CANDIDATES) == []
    assert decide_links(router, NEW, CANDIDATES) is None
    assert decide_links(router, NEW, []) == []
    assert len(fake_llm.requests) == 2  # no candidates -> no call


def test_evolve_context_uses_hard_tier(fake_llm: FakeLLM, router: ModelRouter) -> None:
    fake_llm.script('<think>hmm</think>{"context": "Now also covers retries.", "keywords": null}')
    old = {**CANDIDATES[0], "content": "old body"}
    evolution = evolve_context(router, NEW, old)
    assert evolution == Evolution(context="Now also covers retries.", keywords=None, tags=None)
    body = fake_llm.requests[0].body
    assert body["model"] == router.hard_model
    assert "old body" in body["messages"][-1]["content"]


def test_evolve_context_changes_tags_when_told(fake_llm: FakeLLM, router: ModelRouter) -> None:
    fake_llm.script('{"context": "c", "keywords": ["k1", "k2"], "tags": ["New Tag"]}')
    evolution = evolve_context(router, NEW, CANDIDATES[0])
    assert evolution is not None
    assert evolution.keywords == ["k1", "k2"] and evolution.tags == ["new-tag"]


def test_evolve_context_without_context_is_none(fake_llm: FakeLLM, router: ModelRouter) -> None:
    fake_llm.script('{"keywords": ["a"]}')
    assert evolve_context(router, NEW, CANDIDATES[0]) is None


def test_synthesize_merge(fake_llm: FakeLLM, router: ModelRouter) -> None:
    merged = {**GOOD_NOTE, "content": "Both facts, merged."}
    fake_llm.script(json.dumps(merged), '{"title": "no content"}')
    result = synthesize_merge(router, CANDIDATES)
    assert isinstance(result, MergedNote)
    assert result.content == "Both facts, merged." and result.title == GOOD_NOTE["title"]
    assert fake_llm.requests[0].body["model"] == router.hard_model
    assert synthesize_merge(router, CANDIDATES) is None


def responder(request: dict[str, Any]) -> str:
    return json.dumps({**GOOD_NOTE, "title": request["messages"][-1]["content"][-20:]})


def test_callable_answers_see_the_request() -> None:
    with FakeLLM(default=responder) as fake:
        router = ModelRouter(base_url=fake.base_url, max_retries=0)
        fields = construct_note(router, "the end of the memory")
        assert fields is not None and fields.title.endswith("end of the memory")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('prose {"a": "}"} more', {"a": "}"}),
        ('{"a": [1, 2,],}', {"a": [1, 2]}),
        ('```JSON\n{"a": 1}\n```', {"a": 1}),
        ('{bad} then {"a": 2}', {"a": 2}),
        (None, None),
        ("nothing", None),
    ],
)
def test_parse_json_object(text: Any, expected: Any) -> None:
    assert parse_json_object(text) == expected
