"""A note's context is its own (issue 52): what its caller gave, or what enrichment derived
from the note itself, never the previous note's text. [memory] session_context (off by
default) records the note before it in the caller's session as a neighbour link
(``thread_prev``, scored by retrieval.neighbour_weight), for transcripts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brain.app import Brain
from brain.clock import ManualClock
from config import Settings
from tests.conftest import _seed_store, hash_embedder

UNRELATED = (
    "The CLI refuses with STORE_LOCKED while the agent's server holds the data dir.",
    "Allowed roots outside the home folder are set with BRAIN__PATHS__ALLOWED_ROOTS.",
    "Maybe the web explorer should show which agent wrote each note.",
    "pytest hung because the websocket fixture shared one event loop.",
)


@pytest.fixture
def chained(settings: Settings, clock: ManualClock, _empty_shard: Path) -> Iterator[Brain]:
    settings.embedding.model = "offline/hash-384"
    settings.memory.session_context = True
    _seed_store(settings, _empty_shard)
    with Brain(settings, embedder=hash_embedder(), clock=clock) as b:
        yield b


def _payload(b: Brain, zk_id: str) -> dict[str, Any]:
    return b.memory.get_payload(zk_id)


async def test_unrelated_notes_in_one_session_keep_their_own_context(brain: Brain,
                                                                     client: Any) -> None:
    """The default: every write path in one session (add_memory, record_failure), and no
    stored, shown or embedded context holds another note's text."""
    await client.call_tool("open_session", {"project": "p"})
    ids = []
    for text in UNRELATED[:3]:
        ids.append((await client.call_tool(
            "add_memory", {"content": text, "project": "p"})).data["note"]["zk_id"])
    failed = (await client.call_tool("record_failure", {
        "content": UNRELATED[3], "project": "p", "failure_signature": "pytest: hang"})).data
    ids.append(failed["note"]["zk_id"])
    for zk_id, own in zip(ids, UNRELATED, strict=True):
        stored = _payload(brain, zk_id)
        shown = (await client.call_tool("get_note", {"zk_id": zk_id})).data["note"]
        for other in UNRELATED:
            if other != own:
                assert other not in stored["context"] and other not in shown["context"]
        assert "thread_prev" not in stored
    # The note's dense vector is its own text's (the embedded text names no other note).
    from brain.memory.core import embed_text
    for zk_id in ids:
        text = embed_text(_payload(brain, zk_id))
        assert sum(other in text for other in UNRELATED) == 1


def test_session_context_links_the_previous_note_without_borrowing_its_text(
    chained: Brain,
) -> None:
    before = chained.memory.add("Written before any session.", project="p").note["zk_id"]
    chained.sessions.open_session("p")
    first = chained.memory.add("Melanie said she paints sunsets.", project="p").note["zk_id"]
    second = chained.memory.add("Caroline asked which colours she uses.", project="p").note
    other = chained.memory.add("Unrelated project note.", project="q").note["zk_id"]
    assert "thread_prev" not in _payload(chained, before)  # no session open
    assert "thread_prev" not in _payload(chained, first)  # first of its session
    assert _payload(chained, second["zk_id"])["thread_prev"] == first  # its neighbour
    assert "Melanie" not in _payload(chained, second["zk_id"])["context"]
    assert _payload(chained, second["zk_id"])["context_by"] == "heuristic"
    assert "thread_prev" not in _payload(chained, other)  # q has no open session
    own = chained.memory.add("A note with its own context.", project="p",
                             context="given by the caller").note["zk_id"]
    assert _payload(chained, own)["context"] == "given by the caller"
    chained.sessions.open_session("p")  # a new session starts a new thread
    fresh = chained.memory.add("Next day, a new topic.", project="p").note["zk_id"]
    assert "thread_prev" not in _payload(chained, fresh)


def test_off_by_default(settings: Settings) -> None:
    assert settings.memory.session_context is False
