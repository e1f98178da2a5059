"""[memory] session_context (issue 17, write-time context the brain supplies itself; on by
default since it won on LoCoMo dev and held on test): a note added in an open session
carries that session's previous note as its context."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brain.app import Brain
from brain.clock import ManualClock
from config import Settings
from tests.conftest import _seed_store, hash_embedder


@pytest.fixture
def chained(settings: Settings, clock: ManualClock, _empty_shard: Path) -> Iterator[Brain]:
    settings.embedding.model = "offline/hash-384"
    _seed_store(settings, _empty_shard)
    with Brain(settings, embedder=hash_embedder(), clock=clock) as b:
        yield b


def _payload(b: Brain, zk_id: str) -> dict:  # type: ignore[type-arg]
    return b.memory.get_payload(zk_id)


def test_a_note_in_an_open_session_carries_the_previous_one(chained: Brain) -> None:
    before = chained.memory.add("Written before any session.", project="p").note["zk_id"]
    chained.sessions.open_session("p")
    first = chained.memory.add("Melanie said she paints sunsets.", project="p").note["zk_id"]
    second = chained.memory.add("Caroline asked which colours she uses.", project="p").note
    other = chained.memory.add("Unrelated project note.", project="q").note["zk_id"]
    own = chained.memory.add("A note with its own context.", project="p",
                             context="given by the caller").note["zk_id"]
    assert _payload(chained, before)["context_by"] == "heuristic"  # no session open
    assert _payload(chained, first)["context_by"] == "heuristic"  # first of its session
    assert _payload(chained, second["zk_id"])["context"] == "Melanie said she paints sunsets."
    assert _payload(chained, second["zk_id"])["thread_prev"] == first  # its neighbour
    assert "thread_prev" not in _payload(chained, first)
    assert _payload(chained, other)["context_by"] == "heuristic"  # q has no open session
    assert _payload(chained, own)["context"] == "given by the caller"  # the caller wins
    chained.sessions.open_session("p")  # a new session starts a new thread
    fresh = chained.memory.add("Next day, a new topic.", project="p").note["zk_id"]
    assert _payload(chained, fresh)["context_by"] == "heuristic"


def test_can_be_turned_off(settings: Settings, clock: ManualClock, _empty_shard: Path) -> None:
    assert settings.memory.session_context  # on by default: kept by the bench
    settings.embedding.model = "offline/hash-384"
    settings.memory.session_context = False
    _seed_store(settings, _empty_shard)
    with Brain(settings, embedder=hash_embedder(), clock=clock) as b:
        b.sessions.open_session("p")
        b.memory.add("One.", project="p")
        two = b.memory.add("Two.", project="p").note["zk_id"]
        assert b.memory.get_payload(two)["context_by"] == "heuristic"
