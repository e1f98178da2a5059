"""Salience decays on read: a decay pass writes no note, min_salience stays exact in the
store (pinned notes and access boosts count), old stores and a changed half-life re-key."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brain.app import Brain
from brain.clock import ManualClock
from brain.memory import RecallFilter, salience
from brain.notes import point_id
from brain.store.meta import META_ID
from brain.vector_store import Point
from config import Settings
from tests.conftest import _seed_store, hash_embedder

Q = "lazy salience note"


def add(brain: Brain, text: str, **kw: Any) -> str:
    return str(brain.memory.add(f"{Q} {text}", "shop", **kw).note["zk_id"])


def passing(brain: Brain, floor: float) -> set[str]:
    """Ids a search with min_salience=floor returns (no access stamps: they boost)."""
    hits = brain.memory.search(Q, top_k=50, rf=RecallFilter(project="shop", min_salience=floor),
                               stamp=False)
    return {h["zk_id"] for h in hits}


class WriteSpy:
    """Counts the note points written through the store (the meta record aside)."""

    def __init__(self, brain: Brain, monkeypatch: pytest.MonkeyPatch) -> None:
        self.written: list[str] = []
        store = brain.store
        set_payload, upsert = store.set_payload, store.upsert

        def spy_set(ids: Any, payload: dict[str, Any]) -> None:
            self.written += [i for i in ids if i != META_ID]
            set_payload(ids, payload)

        def spy_upsert(points: Any) -> None:
            self.written += [p.id for p in points if p.id != META_ID]
            upsert(points)

        monkeypatch.setattr(store, "set_payload", spy_set)
        monkeypatch.setattr(store, "upsert", spy_upsert)


def test_key_matches_the_decayed_salience_exactly() -> None:
    rng = random.Random(7)
    h = 30 * salience.DAY
    for _ in range(500):
        created = 1.7e9 + rng.uniform(0, 1e7)
        p = {"salience": rng.uniform(0.01, 1.0), "created_ts": created}
        now = created + rng.uniform(0, 200 * salience.DAY)
        m = rng.uniform(0.01, 1.0)
        now_s = salience.salience_now(p, now, h)
        if abs(now_s - m) > 1e-9:  # away from the boundary: both sides agree
            assert (now_s >= m) == (salience.salience_key(p, h) >= salience.key_floor(m, now, h))
    pinned = {"salience": 1.0, "created_ts": 1.7e9, "pinned": True}
    assert salience.salience_now(pinned, 1.7e9 + 1e9, h) == 1.0
    assert salience.salience_key(pinned, h) > salience.key_floor(1.0, 1.7e9 + 1e9, h)
    assert math.isfinite(salience.salience_key({"salience": 0.0, "created_ts": 1.0}, h))


async def test_decay_pass_writes_no_note_and_tools_show_the_decayed_value(
    brain: Brain, client, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    brain.workers.stop()
    ids = [add(brain, f"n{i}") for i in range(5)]
    pinned = add(brain, "pinned", pinned=True)
    first = brain.decay.decay_salience()  # a new store: its keys are right, it only records H
    assert first["rekeyed"] == 0 and first["scanned"] == 6
    assert brain.meta.salience_half_life_days == 30.0
    spy = WriteSpy(brain, monkeypatch)
    for _ in range(3):
        brain.clock.advance(days=10)
        out = brain.workers.run_now("decay")
        assert out["decayed"] == 0 and out["rekeyed"] == 0
    assert spy.written == []  # 30 days of passes: not one point rewritten
    # One half-life later the tools show 0.5 -> 0.25; the stored field is unchanged.
    note = (await client.call_tool("get_note", {"zk_id": ids[0]})).structured_content["note"]
    assert note["salience"] == pytest.approx(0.25)
    assert brain.memory.get_payload(ids[1])["salience"] == 0.5
    hits = (await client.call_tool("search_memory", {"query": Q, "project": "shop",
                                                     "top_k": 10, "detail": "full"})).data
    shown = {h["zk_id"]: h["salience"] for h in hits["results"]}
    assert shown[ids[1]] == pytest.approx(0.25) and shown[pinned] == 1.0


@pytest.fixture(params=["edge", "qdrant-local"])
def any_brain(request: pytest.FixtureRequest, settings: Settings, clock: ManualClock,
              _empty_shard: Path, tmp_path: Path) -> Iterator[Brain]:
    settings.embedding.model = "offline/hash-384"
    if request.param == "edge":
        _seed_store(settings, _empty_shard)
    else:
        settings.qdrant.local_path = str(tmp_path / "local")
    b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    b.workers.stop()
    try:
        yield b
    finally:
        b.close()


def test_min_salience_follows_decay_pins_and_accesses(any_brain: Brain) -> None:
    b = any_brain
    plain, pinned, used = add(b, "plain"), add(b, "pinned", pinned=True), add(b, "used")
    b.decay.decay_salience()
    assert passing(b, 0.3) == {plain, pinned, used}  # day 0: 0.5
    b.clock.advance(days=15)
    for _ in range(3):
        b.memory.stamp_access([used])  # 0.354 + 3 * 0.05 = 0.504, decaying from now
    b.memory.flush_stamps()
    assert b.memory.salience_of(b.memory.get_payload(used)) == pytest.approx(
        0.5 * 2**-0.5 + 0.15)
    b.clock.advance(days=15)  # one half-life since creation: plain is 0.25
    assert passing(b, 0.3) == {pinned, used}  # used: 0.504 * 2**-0.5 = 0.356
    assert passing(b, 0.36) == {pinned}
    assert passing(b, 0.2) == {plain, pinned, used}
    assert passing(b, 1.0) == {pinned}
    assert passing(b, 0.0) == {plain, pinned, used}
    b.memory.set_state(plain, salience=0.9)  # a salience set is the salience now
    assert passing(b, 0.85) == {plain, pinned}


def _as_old_version(brain: Brain, zk: str) -> None:
    """Write the note back the way a version before salience keys did: no key."""
    pt = brain.store.retrieve([point_id(zk)], with_vectors=True)[0]
    payload = {k: v for k, v in pt.payload.items() if k != "salience_key"}
    brain.store.upsert([Point(pt.id, payload, pt.dense, pt.sparse)])


def test_old_store_is_rekeyed_once_and_a_new_half_life_once(any_brain: Brain) -> None:
    b = any_brain
    old, other = add(b, "old"), add(b, "other")
    _as_old_version(b, old)
    assert "salience_key" not in b.memory.get_payload(old)
    # Not keyed yet: the note without a key is filtered on its stored salience.
    assert b.meta.salience_half_life_days is None
    assert passing(b, 0.3) == {old, other}
    assert passing(b, 0.6) == set()
    out = b.decay.decay_salience()
    assert out["rekeyed"] == 1 and out["scanned"] == 2
    assert "salience_key" in b.memory.get_payload(old)
    assert b.decay.decay_salience()["rekeyed"] == 0
    b.clock.advance(days=30)
    assert passing(b, 0.3) == set() and passing(b, 0.2) == {old, other}
    # A new half-life: every note is re-keyed once, then nothing.
    b.settings.decay.half_life_days = 60.0
    assert passing(b, 0.3) == set()  # the keys' half-life (30) holds until the pass
    out = b.decay.decay_salience()
    assert out["rekeyed"] == 2 and out["half_life_days"] == 60.0
    assert b.meta.salience_half_life_days == 60.0
    again = b.decay.decay_salience()
    assert again["rekeyed"] == 0 and again["scanned"] == 0
    assert passing(b, 0.3) == {old, other}  # 0.5 * 2**-0.5 = 0.354
    assert b.memory.salience_of(b.memory.get_payload(old)) == pytest.approx(0.5 * 2**-0.5)


def test_access_stamps_are_written_once_searches_pause_or_pile_up() -> None:
    """The background writer waits for a pause (searches back to back do not share the CPU
    with its writes), but not past MAX_AGE_S in a long burst, nor past MAX_PENDING notes."""
    from brain.memory import access

    now = [100.0]
    stamps = access.AccessStamps(clock=lambda: now[0])
    assert not stamps.due()  # nothing pending
    stamps.stamp(["ZK-1"], "iso", 1.0, 0.05)
    assert not stamps.due()
    now[0] += access.IDLE_S + 0.01
    assert stamps.due()  # the searches paused
    stamps._pending.clear()  # as a flush does

    start = now[0]
    while now[0] - start < access.MAX_AGE_S - 0.2:  # a burst: a stamp every 0.1 s
        stamps.stamp(["ZK-2"], "iso", 1.0, 0.05)
        assert not stamps.due()
        now[0] += 0.1
    now[0] = start + access.MAX_AGE_S
    assert stamps.due()  # the burst went on too long
    stamps._pending.clear()

    stamps.stamp([f"ZK-{i}" for i in range(access.MAX_PENDING)], "iso", 1.0, 0.05)
    assert stamps.due()  # too many waiting
