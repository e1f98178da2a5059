"""Token-lean results: compact hits by default, whole notes on request, get_note."""

from __future__ import annotations

import json

from brain.app import Brain
from brain.search.presentation import compact_note, present, snippet

LONG = ("The payment queue backs up when the replay worker is paused; drain it with the "
        "replay worker, then page the on-call. ") * 20


def test_snippet_is_bounded_and_cut_at_a_word() -> None:
    s = snippet(LONG, 120)
    assert len(s) <= 120 and s.endswith("…")
    assert LONG.startswith(s[:-1].rstrip())
    assert snippet("  short   text ", 120) == "short text"


def test_compact_note_keeps_what_picks_a_note_and_counts_links() -> None:
    note = {"zk_id": "ZK-00000001", "title": "Payment queue runbook", "content": LONG,
            "context": "ctx " * 100, "keywords": ["queue"], "tags": ["ops"],
            "links": [{"zk_id": "ZK-00000002", "relation": "related"}], "score": 0.9,
            "memory_type": "fleeting", "pinned": False, "salience": 0.4, "hop": 1}
    c = compact_note(note, 200)
    assert set(c) == {"zk_id", "title", "tags", "score", "memory_type", "hop", "snippet",
                      "links"}
    assert c["links"] == 1 and len(c["snippet"]) <= 200
    # a derived title (the content's opening words) is not repeated by the snippet
    derived = compact_note({"title": "The payment queue backs up…", "content": LONG}, 80)
    assert derived["snippet"].startswith("…when the replay worker")


def test_full_detail_is_the_page_unchanged() -> None:
    page = {"results": [{"zk_id": "ZK-1", "content": LONG}], "count": 1}
    assert present(page, "full", 100) is page
    assert present(page, "compact", 100)["results"][0]["snippet"] != LONG


async def test_search_compact_by_default_full_on_request(brain: Brain, client) -> None:  # noqa: ANN001
    z = brain.memory.add(LONG, "ops").note["zk_id"]
    compact = await client.call_tool("search_memory", {"query": "payment queue", "project": "ops"})
    full = await client.call_tool("search_memory", {"query": "payment queue", "project": "ops",
                                                    "detail": "full"})
    hit = compact.structured_content["results"][0]
    assert hit["zk_id"] == z and "content" not in hit
    limit = brain.settings.memory.snippet_chars
    assert len(hit["snippet"]) <= limit + 1  # "…" in front when it carries on after the title
    assert full.structured_content["results"][0]["content"].strip() == LONG.strip()
    assert len(compact.content[0].text) * 3 < len(full.content[0].text)
    note = (await client.call_tool("get_note", {"zk_id": z})).structured_content["note"]
    assert note["content"] == full.structured_content["results"][0]["content"]


async def test_deep_search_and_preflight_are_compact(brain: Brain, client) -> None:  # noqa: ANN001
    fail = (await client.call_tool("record_failure", {
        "project": "shop", "failure_signature": "alembic:env",
        "content": "alembic upgrade head failed: DATABASE_URL env var missing. " + LONG,
    })).structured_content["note"]["zk_id"]
    await client.call_tool("record_resolution", {
        "failure_zk_id": fail, "fix_content": "export DATABASE_URL before alembic. " + LONG})
    pre = (await client.call_tool("preflight_check", {
        "task": "run alembic upgrade head", "project": "shop"})).structured_content
    mistake = pre["mistakes"][0]
    assert mistake["zk_id"] == fail and "content" not in mistake
    assert mistake["fixes"] and all("content" not in f and "snippet" in f
                                    for f in mistake["fixes"])
    whole = (await client.call_tool("preflight_check", {
        "task": "run alembic upgrade head", "project": "shop", "detail": "full"})).structured_content
    assert "content" in whole["mistakes"][0]["fixes"][0]
    deep = (await client.call_tool("deep_search", {"query": "alembic DATABASE_URL",
                                                   "project": "shop"})).structured_content
    assert deep["results"] and all("content" not in r for r in deep["results"])
    assert "hop" in deep["results"][0] and "hops" in deep
    assert LONG[:300] not in json.dumps(deep)


def test_the_relevance_band() -> None:
    from brain.search.presentation import answer_band

    assert answer_band([0.9], 0.5) == "single"  # the only hit
    assert answer_band([], 0.5) == "none"  # nothing answers (issue 52)
    assert answer_band([0.9, 0.4, 0.3], 0.5) == "single"  # the second at most half the top
    assert answer_band([0.9, 0.5, 0.1], 0.5) == "many"
    assert answer_band([0.9, 0.5, 0.1], 0.4) == "single"
    assert answer_band([0.9, 0.1], 0.4) == "many"  # two hits: dbsf scores any two 2/3, 1/3


def test_a_title_that_is_the_whole_content_gets_no_snippet() -> None:
    from brain.search.presentation import compact_note

    hit = compact_note({"title": "The orders service uses PostgreSQL 14",
                        "content": "The orders service uses PostgreSQL 14."}, 240)
    assert hit["snippet"] == ""
    hit = compact_note({"title": "The orders service uses PostgreSQL 14",
                        "content": "The orders service uses PostgreSQL 14. Since May."}, 240)
    assert hit["snippet"] == "…Since May."


async def test_search_pages_say_single_or_many(brain: Brain, client) -> None:  # noqa: ANN001
    brain.memory.add("the zebra kettle protocol keeps the cache warm", None)
    brain.memory.add("lunch is at noon on fridays", None)
    one = (await client.call_tool("search_memory", {"query": "zebra kettle protocol"}))
    assert one.structured_content["answer"] in ("single", "many")
    scores = [h["score"] for h in one.structured_content["results"]]
    band = brain.settings.memory.relevance_band
    expected = "single" if len(scores) == 1 or (
        len(scores) > 2 and scores[1] <= (1 - band) * scores[0]) else "many"
    assert one.structured_content["answer"] == expected
    deep = (await client.call_tool("deep_search", {"query": "zebra kettle"})).structured_content
    assert deep["answer"] in ("single", "many")


def test_a_passage_snippet_sits_around_the_query() -> None:
    from brain.search.presentation import compact_passage

    text = "filler words here. " * 40 + "The zebra kettle protocol keeps caches warm. " + \
        "more filler. " * 40
    hit = compact_passage({"file": "a.md", "excerpt": text, "score": 0.5}, 120, "zebra kettle")
    assert "zebra kettle" in hit["excerpt"] and len(hit["excerpt"]) <= 122
    assert hit["excerpt"].startswith("…") and hit["excerpt"].endswith("…")
    assert compact_passage({"excerpt": "short"}, 120, "x")["excerpt"] == "short"
