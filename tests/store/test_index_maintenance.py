"""Index maintenance: the worker decides from the store's state and optimizes on its own (an
injected clock drives it), searches answer during a run, a kill -9 at any step of a run
leaves a store that opens with every acknowledged note, and brain_stats shows the state.

Qdrant Edge indexes a segment once its dense vectors pass an indexing threshold (10 MB by
default: ~6,700 384-d vectors). The stores here set it to 1,000 vectors (``index_min_vectors``,
what ``[index] min_unindexed`` sets in a brain) and load 1,500 points, so a run really builds an
HNSW index, at a fifth of the default threshold's cost (the kill -9 runs took 40-140 s of a
loaded suite with 7,000).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from brain.app import Brain
from brain.clock import ManualClock
from brain.memory import RecallFilter
from brain.store.index_maintenance import IndexConfig, IndexMaintenance
from brain.vector_store import IndexState, Point
from brain.vector_store.edge import EdgeStore
from config import Settings

ROOT = Path(__file__).resolve().parents[2]
THRESHOLD = 1000  # the stores' indexing threshold, in vectors
N = 1500  # above it: a run indexes these


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The conftest settings with this module's indexing threshold (the brain fixture's)."""
    settings.index.min_unindexed = THRESHOLD
    return settings


def _points(n: int, seed: int, project: str = "p") -> list[Point]:
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, 384)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [Point(str(uuid.uuid4()), {"kind": "bulk", "project": project}, vecs[i].tolist())
            for i in range(n)]


class _FakeStore:
    """A store whose index state the test sets; counts optimize calls."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self.optimized = 0
        self.changes = True

    def index_state(self) -> IndexState:
        return self.state

    def optimize(self, hold: Any = None) -> bool:
        self.optimized += 1
        if self.changes:
            self.state = IndexState(points=self.state.points, indexed=self.state.points,
                                    unindexed=0, segments=2, deleted_share=0.0)
        return self.changes


def test_decides_from_the_state_and_not_below_the_thresholds() -> None:
    clock = ManualClock()
    config = IndexConfig(min_unindexed=5000, max_segments=16, max_deleted_share=0.2)
    calm = IndexState(points=9000, indexed=5000, unindexed=4999, segments=3, deleted_share=0.1)
    store = _FakeStore(calm)
    m = IndexMaintenance(store, config, clock)  # type: ignore[arg-type]
    assert m.tick()["ran"] is False and store.optimized == 0
    for state in (
        IndexState(points=9000, indexed=4000, unindexed=5000, segments=3, deleted_share=0.0),
        IndexState(points=9000, indexed=9000, unindexed=0, segments=17, deleted_share=0.0),
        IndexState(points=9000, indexed=9000, unindexed=0, segments=2, deleted_share=0.25),
    ):
        store.state = state
        before = store.optimized
        out = m.tick()
        assert out["ran"] is True and store.optimized == before + 1, state
        assert m.tick()["ran"] is False  # the run fixed it
    # A run that changes nothing is not repeated on every tick: it backs off on the clock.
    store.changes = False
    store.state = IndexState(points=9000, indexed=0, unindexed=9000, segments=1)
    assert m.tick()["ran"] is True
    store.state = IndexState(points=9001, indexed=0, unindexed=9001, segments=1)
    assert m.tick()["ran"] is False
    clock.advance(seconds=config.noop_backoff_s + 1)
    assert m.tick()["ran"] is True
    store.state = IndexState(points=14001, indexed=0, unindexed=14001, segments=1)
    assert m.tick()["ran"] is True  # within the back-off, but min_unindexed more came in
    disabled = IndexMaintenance(store, IndexConfig(enabled=False), clock)  # type: ignore[arg-type]
    assert disabled.tick()["ran"] is False


def test_a_run_that_replayed_writes_is_followed_by_another() -> None:
    """Writes landing during a run (a bulk import under way) are replayed into an unindexed
    segment after the copy was optimized: the next tick runs again for them, though the store
    takes no more writes. A run with nothing replayed is not repeated for the state it left."""
    clock = ManualClock()
    config = IndexConfig(min_unindexed=5000)
    left = IndexState(points=30000, indexed=24000, unindexed=6000, segments=2, deleted_share=0.0)

    class _Importing(_FakeStore):
        replayed = [6000.0, 0.0]

        def optimize(self, hold: Any = None) -> bool:
            self.optimized += 1
            self.last_optimize = {"replayed": self.replayed.pop(0)}
            self.state = left
            return True

    store = _Importing(IndexState(points=30000, indexed=0, unindexed=30000, segments=1))
    m = IndexMaintenance(store, config, clock)  # type: ignore[arg-type]
    assert m.tick()["ran"] is True  # 6,000 written meanwhile: left unindexed
    assert m.tick()["ran"] is True and store.optimized == 2  # nothing written since: again
    assert m.tick()["ran"] is False and store.optimized == 2  # nothing replayed: done


def test_a_few_writes_replayed_do_not_earn_another_run() -> None:
    """A busy store takes a few writes during every run. When the state a run left still asks
    for a run the store cannot satisfy (more segments than allowed), those few writes must not
    make the worker run back to back: fewer than min_unindexed replayed is no reason again."""
    clock = ManualClock()
    config = IndexConfig(min_unindexed=5000, max_segments=16)
    left = IndexState(points=30000, indexed=29990, unindexed=10, segments=17, deleted_share=0.0)

    class _Busy(_FakeStore):
        def optimize(self, hold: Any = None) -> bool:
            self.optimized += 1
            self.last_optimize = {"replayed": 10.0}
            self.state = left
            return True

    store = _Busy(IndexState(points=30000, indexed=0, unindexed=30000, segments=1))
    m = IndexMaintenance(store, config, clock)  # type: ignore[arg-type]
    assert m.tick()["ran"] is True
    assert m.reason(left) is None  # the state it left, 10 writes replayed: not again
    assert m.tick()["ran"] is False and store.optimized == 1


def test_the_catch_up_goes_in_rounds_until_few_writes_are_left_for_the_swap(
    tmp_path: Path,
) -> None:
    """Writes keep coming while the catch-up replays into the optimized copy (a bulk import):
    what came in during one round is replayed in the next, so the swap, which holds every
    search off, replays only the few written during the last round."""
    import shutil

    import qdrant_edge as qe

    from brain.vector_store import edge_convert as cv
    from brain.vector_store.edge_swap import CATCH_UP_LEFT, catch_up

    live = EdgeStore(tmp_path / "live")
    live.open(384)
    live.upsert(_points(10, 0))
    live.close()
    work = tmp_path / "work"
    shutil.copytree(tmp_path / "live", work)

    def entry(pts: list[Point]) -> tuple[str, Any]:
        return ("upsert", [(p.id, qe.Point(p.id, cv.vectors(p), cv.shadow(p.payload)))
                           for p in pts])

    recorded = [entry(_points(500, s)) for s in range(1, 7)]  # 3,000 before the catch-up
    arriving = [[entry(_points(400, 20 + s)) for s in range(6)],  # 2,400 during round 1
                [entry(_points(30, 40))],  # 30 during round 2
                [entry(_points(30, 41))]]  # 30 during round 3
    assert 6 * 400 > CATCH_UP_LEFT >= 30
    asked: list[int] = []

    def pending(n: int) -> list[tuple[str, Any]]:
        asked.append(n)
        new = recorded[n:]
        if arriving:
            recorded.extend(arriving.pop(0))  # written while this round replays
        return new

    caught = catch_up(work, pending)
    assert asked == [0, 6, 12]  # 3,000, then 2,400 (still many), then 30: few, stop
    assert caught == 13 and len(recorded) - caught == 1  # the swap replays 30 points
    copy = EdgeStore(work)
    copy.open(384)
    try:
        assert copy.count() == 10 + 3000 + 2400 + 30
    finally:
        copy.close()
    assert catch_up(work, lambda n: None) == 0  # an abandoned run: nothing to replay


def test_worker_runs_on_its_own_search_answers_meanwhile_stats_show_it(brain: Brain) -> None:
    clock = brain.clock
    assert isinstance(clock, ManualClock)
    brain.memory.add("the index worker keeps the store searchable", project="p")
    clock.advance(seconds=120)  # every worker is due; the store is far below the thresholds
    deadline = time.monotonic() + 30
    while brain.workers.status() and not any(
        w["name"] == "index" and w["runs"] for w in brain.workers.status()
    ):
        assert time.monotonic() < deadline, "the index worker never ran"
        time.sleep(0.1)
    assert brain.index_maintenance.runs == 0  # it looked and decided there was nothing to do

    brain.store.upsert(_points(N, 1))
    before = brain.stats()["index"]
    assert before["unindexed"] >= N and before["running"] is False and before["last_run"] is None

    clock.advance(seconds=31)  # the scheduler thread sees the index worker due and runs it
    deadline = time.monotonic() + 60
    while not brain.index_maintenance.running and brain.index_maintenance.runs == 0:
        assert time.monotonic() < deadline, "the index worker did not start a run"
        time.sleep(0.05)
    # Searches and writes answer while the run goes on, not after it.
    answered_during_run = added = 0
    while brain.index_maintenance.running:
        hits = brain.memory.search("index worker store", 5, RecallFilter(project="p"))
        brain.memory.add(f"written during the run {added}", project="p")
        added += 1
        if brain.index_maintenance.running:
            answered_during_run += 1
        assert hits
        assert time.monotonic() < deadline + 240, "the run never ended"
        time.sleep(0.02)  # an agent's pace, not a loop that starves the run of the CPU
    assert answered_during_run >= 1
    assert brain.index_maintenance.last_error is None, brain.index_maintenance.last_error

    after = brain.stats()["index"]
    assert after["running"] is False and after["runs"] == 1 and after["last_changed"] is True
    assert after["last_run"] is not None and after["last_duration_s"] > 0
    # The run indexed the N points; without it every point would be unindexed.
    assert after["indexed"] >= N and after["unindexed"] < before["unindexed"] + added
    assert after["points"] == before["points"] + added
    assert brain.memory.search("written during the run 0", 5, RecallFilter(project="p"))
    # The same state is not optimized again on the next due tick.
    clock.advance(seconds=31)
    assert brain.workers.run_now("index")["ran"] is False


# A writer that keeps adding points (printing each acknowledged id) while an optimization
# runs, and dies by SIGKILL at the step the test names.
_SCRIPT = r'''
import os, signal, sys, threading, time, uuid
from pathlib import Path
import numpy as np
import brain.vector_store.edge as edge
from brain.vector_store.base import Point

path, stage, threshold = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
store = edge.EdgeStore(path, index_min_vectors=threshold)
store.open(384)
rng = np.random.default_rng(0)
lock = threading.Lock()

def add(n):
    pts = [Point(str(uuid.uuid4()), {"project": "p"}, rng.standard_normal(384).tolist())
           for _ in range(n)]
    store.upsert(pts)
    with lock:
        print("\n".join(p.id for p in pts), flush=True)

for _ in range(3):
    add(500)

def die():
    os.kill(os.getpid(), signal.SIGKILL)

fsync = edge.fsync_dir
def fsync_then_maybe_die(p):
    fsync(p)
    aside, live = store.aside_path.exists(), path.exists()
    if stage == "renamed_aside" and aside and not live:
        die()
    if stage == "renamed_in" and aside and live:
        die()
edge.fsync_dir = fsync_then_maybe_die

during = []
def writer():
    while True:
        add(20)
        during.append(1)
        time.sleep(0.02)
        if stage == "child" and path.with_name(path.name + ".optimizing").exists() \
                and len(during) >= 5:
            die()
threading.Thread(target=writer, daemon=True).start()
store.optimize()
print("FINISHED", flush=True)
'''


@pytest.mark.parametrize("stage", ["child", "renamed_aside", "renamed_in"])
def test_kill_9_during_an_optimization_keeps_every_acknowledged_note(
    tmp_path: Path, stage: str
) -> None:
    path = tmp_path / "store" / "shard"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(path), stage, str(THRESHOLD)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == -9, (proc.returncode, proc.stderr[-2000:])
    assert "FINISHED" not in proc.stdout
    acked = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(acked) > N

    store = EdgeStore(path, index_min_vectors=THRESHOLD)
    store.open(384)
    try:
        found = {p.id for p in store.retrieve(acked)}
        assert len(found) == len(acked), f"{len(acked) - len(found)} acknowledged notes lost"
        leftovers = [p.name for p in path.parent.iterdir() if p.name != path.name
                     and not p.name.endswith(".lock")]
        assert leftovers == []
        assert store.query_dense(np.ones(384).tolist(), None, 3)  # it answers
        # And a run from here completes.
        assert store.optimize() in (True, False)
        assert {p.id for p in store.retrieve(acked)} == found
    finally:
        store.close()


def test_search_waits_for_the_swap_only_not_the_run(tmp_path: Path) -> None:
    """A search started during the run completes before the run does."""
    store = EdgeStore(tmp_path / "shard", index_min_vectors=THRESHOLD)
    store.open(384)
    try:
        store.upsert(_points(N, 2))
        done = threading.Event()
        result: dict[str, Any] = {}

        def run() -> None:
            result["changed"] = store.optimize()
            done.set()

        t = threading.Thread(target=run)
        t.start()
        deadline = time.monotonic() + 60
        while not store.index_state().optimizing:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        hits = store.query_dense(np.ones(384).tolist(), None, 5)
        assert len(hits) == 5
        assert not done.is_set(), "the search waited for the whole optimization"
        t.join(timeout=300)
        assert result["changed"] is True
        state = store.index_state()
        assert state.unindexed == 0 and state.indexed == N and not state.optimizing
    finally:
        store.close()


async def test_brain_stats_tool_shows_the_index_state(client: Any) -> None:
    stats = (await client.call_tool("brain_stats", {})).structured_content
    index = stats["index"]
    assert index["points"] >= 1 and index["running"] is False and index["enabled"] is True
    assert {"indexed", "unindexed", "segments", "deleted_share", "last_run",
            "last_duration_s"} <= set(index)


def test_a_run_the_store_closes_under_stops_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Closing the store mid-run (a short-lived process exiting) aborts the run: the worker
    says so in one line and in its status, raises nothing, logs no traceback."""
    store = EdgeStore(tmp_path / "shard", index_min_vectors=THRESHOLD)
    store.open(384)
    store.upsert(_points(N, 5))
    m = IndexMaintenance(store, IndexConfig(min_unindexed=1), ManualClock())
    result: dict[str, Any] = {}
    failed: list[BaseException] = []

    def run() -> None:
        try:
            result.update(m.run("test"))
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            failed.append(exc)

    caplog.set_level("INFO", logger="brain")
    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 30
    while not m.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert m.running
    store.close()
    t.join(60)
    assert not t.is_alive() and failed == []
    assert result["changed"] is False and "closed" in result["aborted"]
    assert "OptimizeAborted" in (m.last_error or "")  # what brain_stats shows
    assert not [r for r in caplog.records if r.exc_info or r.levelname in ("WARNING", "ERROR")]


def test_local_mode_has_no_index_to_maintain(tmp_path: Path) -> None:
    from brain.vector_store.qdrant import QdrantClientStore

    store = QdrantClientStore("c", local_path=str(tmp_path / "local"))
    store.open(384)
    try:
        store.upsert(_points(20, 3))
        state = store.index_state()
        assert state.points == 20 and state.unindexed is None and not state.optimizing
        assert store.optimize() is False  # nothing to do, and nothing done
        m = IndexMaintenance(store, IndexConfig(min_unindexed=1), ManualClock())
        assert m.tick()["ran"] is False and m.runs == 0
    finally:
        store.close()
