"""Decay: exact archival boundaries on a moved clock, paging, reports, salience, workers."""

from __future__ import annotations

import math
import time

import pytest
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.memory.decay import DAY, DecayPolicy, decay_score
from config import WorkerSettings
from tests.timing import HANG_S


async def call(client, name: str, **args):  # noqa: ANN001, ANN201
    return (await client.call_tool(name, args)).data


def add(brain: Brain, text: str, **kw) -> str:  # noqa: ANN003
    return brain.memory.add(text, "shop", **kw).note["zk_id"]


def test_decay_score_definition() -> None:
    p = DecayPolicy()
    fresh = {"created_ts": 1000.0, "access_count": 0}
    assert decay_score(fresh, 1000.0, p).score == pytest.approx(0.6)
    # Untouched for exactly stale_days: recency 0.5, so score exactly 0.3.
    at45 = decay_score(fresh, 1000.0 + 45 * DAY, p)
    assert at45.recency == 0.5 and at45.score == 0.3
    # last access, not creation, counts once there is one; importance is log-scaled.
    used = {"created_ts": 0.0, "last_accessed_ts": 1000.0, "access_count": 10}
    s = decay_score(used, 1000.0, p)
    assert s.importance == 1.0 and s.score == pytest.approx(1.0)
    one = decay_score({"created_ts": 0.0, "access_count": 1}, 0.0, p)
    assert one.importance == pytest.approx(math.log(2) / math.log(11))


async def test_archive_boundaries_45_days_2_accesses_pinned(brain: Brain, client) -> None:  # noqa: ANN001
    brain.workers.stop()  # the scheduler would race the moved clock; run by hand here
    never = add(brain, "never accessed note about gunicorn workers")
    pinned = add(brain, "pinned note about the deploy checklist", pinned=True)
    twice = add(brain, "note accessed twice about celery retries")
    once = add(brain, "note accessed once about nginx buffering")
    brain.memory.stamp_access([twice])
    brain.memory.stamp_access([twice, once])
    brain.clock.advance(days=45)
    report = await call(client, "archive_stale_notes", dry_run=False)
    assert report["archived"] == 0 and report["stale"] == 0
    rows = {r["zk_id"]: r for r in (await call(client, "decay_report", limit=10))["notes"]}
    assert rows[never]["decay_score"] == 0.3 and rows[never]["would_archive"] is False

    brain.clock.advance(seconds=1)
    dry = await call(client, "archive_stale_notes")
    assert dry["dry_run"] is True and [n["zk_id"] for n in dry["notes"]] == [never]
    assert brain.memory.get_payload(never)["memory_type"] == "permanent"
    done = await call(client, "archive_stale_notes", dry_run=False)
    assert done["archived"] == 1
    assert brain.memory.get_payload(never)["memory_type"] == "archived"

    # Much later: one access no longer protects, two accesses and pinning always do.
    brain.clock.advance(days=400)
    done = await call(client, "archive_stale_notes", dry_run=False)
    assert [n["zk_id"] for n in done["notes"]] == [once]
    for zk in (pinned, twice):
        assert brain.memory.get_payload(zk)["memory_type"] == "permanent"
    # (searching stamps accesses, so it comes after the access-count checks)
    hits = await call(client, "search_memory", query="gunicorn workers", project="shop")
    assert never not in [h["zk_id"] for h in hits["results"]]

    restored = await call(client, "restore_note", zk_id=never)
    assert restored["restored_from"] == "archived" and restored["memory_type"] == "permanent"
    hits = await call(client, "search_memory", query="gunicorn workers", project="shop")
    assert never in [h["zk_id"] for h in hits["results"]]


async def test_score_exactly_at_threshold_is_kept(brain: Brain, client) -> None:  # noqa: ANN001
    brain.workers.stop()
    zk = add(brain, "note whose score we pin to the threshold")
    brain.clock.advance(days=60)
    score = brain.decay.decay_report(5)["notes"][0]
    raw = decay_score(
        brain.memory.get_payload(zk), brain.clock.now().timestamp(), brain.decay.policy
    ).score
    assert score["zk_id"] == zk and raw < 0.3
    brain.settings.decay.score_threshold = raw
    assert (await call(client, "archive_stale_notes"))["stale"] == 0
    brain.settings.decay.score_threshold = math.nextafter(raw, 1.0)
    assert [n["zk_id"] for n in (await call(client, "archive_stale_notes"))["notes"]] == [zk]


def test_archive_pages_through_more_than_one_page(brain: Brain, monkeypatch) -> None:  # noqa: ANN001
    brain.workers.stop()
    ids = {add(brain, f"stale note number {i} about topic {i}") for i in range(25)}
    keep = add(brain, "pinned keeper", pinned=True)
    brain.clock.advance(days=46)
    pages = []
    real_scroll = brain.store.scroll

    def counting_scroll(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        pages.append(kw.get("limit"))
        return real_scroll(*a, **kw)

    monkeypatch.setattr(brain.store, "scroll", counting_scroll)
    out = brain.decay.archive_stale_notes(dry_run=False, page_size=10)
    assert out["archived"] == 25 and {n["zk_id"] for n in out["notes"]} == ids
    assert pages.count(10) >= 3
    monkeypatch.undo()
    left = [p for p in brain.memory.notes() if p["memory_type"] != "archived"]
    assert [p["zk_id"] for p in left] == [keep]
    with pytest.raises(Exception, match="page_size"):
        brain.decay.archive_stale_notes(page_size=0)


async def test_decay_report_lowest_first(brain: Brain, client) -> None:  # noqa: ANN001
    old = add(brain, "old note")
    brain.clock.advance(days=20)
    new = add(brain, "new note")
    out = await call(client, "decay_report", limit=2)
    assert [n["zk_id"] for n in out["notes"]] == [old, new]
    assert out["notes"][0]["decay_score"] < out["notes"][1]["decay_score"]
    with pytest.raises(ToolError):
        await client.call_tool("decay_report", {"limit": 0})


def test_salience_decays_by_half_life_and_access_restarts_it(brain: Brain) -> None:
    # Salience decays on read (brain/memory/salience.py): the worker no longer rewrites it, so the
    # salience checked is the one read now, not the stored field.
    brain.workers.stop()
    x, y = add(brain, "salience x"), add(brain, "salience y")
    z = add(brain, "salience pinned", pinned=True)

    def sal(zk: str) -> float:
        return brain.memory.salience_of(brain.memory.get_payload(zk))

    brain.clock.advance(days=30)  # the default half-life
    brain.workers.run_now("decay")
    assert sal(x) == pytest.approx(0.25)
    brain.memory.stamp_access([y])  # +0.05 and the decay clock restarts
    assert sal(y) == pytest.approx(0.30)
    brain.clock.advance(days=30)
    brain.workers.run_now("decay")
    assert sal(x) == pytest.approx(0.125)
    assert sal(y) == pytest.approx(0.15)
    assert sal(z) == 1.0
    # Running again at the same instant changes nothing.
    brain.workers.run_now("decay")
    assert sal(x) == pytest.approx(0.125)


def _wait_for(cond, timeout: float = HANG_S) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_scheduler_runs_due_workers_on_the_injected_clock(brain: Brain) -> None:
    ran: list[float] = []
    brain.settings.workers["off"] = WorkerSettings(enabled=False, interval_s=10)
    brain.workers.register(
        "probe", lambda: ran.append(brain.clock.now().timestamp()) or {}, interval_s=60
    )
    brain.workers.register("off", lambda: ran.append(-1.0) or {})
    assert brain.workers.running
    time.sleep(1.2)  # a few ticks: nothing is due before the clock moves
    assert ran == []
    brain.clock.advance(seconds=61)
    assert _wait_for(lambda: len(ran) == 1)
    time.sleep(1.0)
    assert len(ran) == 1  # interval measured on the clock, not wall time
    brain.clock.advance(seconds=60)
    assert _wait_for(lambda: len(ran) == 2)
    assert -1.0 not in ran  # disabled by its [workers.off] section
    assert brain.workers.run_now("off") == {} and ran[-1] == -1.0  # run_now runs it anyway
    assert brain.meta.data["worker_runs"]["probe"] == ran[1]
    status = {s["name"]: s for s in brain.workers.status()}
    assert status["off"]["enabled"] is False and status["probe"]["runs"] == 2
    with pytest.raises(Exception, match="no worker"):
        brain.workers.run_now("nope")


def test_one_scheduler_per_data_dir(brain: Brain) -> None:
    from brain.workers import WorkerRegistry

    second = WorkerRegistry(brain.home, brain.clock, brain.meta, brain.settings.workers)
    assert brain.workers.running and second.start() is False
    brain.workers.stop()
    assert second.start() is True
    second.stop()
