"""Heavy work yields to tool calls (issue 50 item 6): brain/embedding/lanes.py.

An upload's and a sync's embedding batches run in the background lane, each after the tool
calls in flight. The functional tests hold a tool call open on the brain's generation gate
(what every MCP tool call and explorer request holds), serve a query and a note inside it
while the ingest still has batches to go, and read the order of the work from the lanes'
events: no batch starts between the moment the ingest yields and the end of the call, and the
remaining batches all come after it. Order, never timing.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from brain.app import Brain
from brain.embedding.lanes import Lanes, RunLocks
from brain.embedding.registry import DEFAULT_MODEL, REGISTRY, build_embedder
from brain.generations import Gate
from tests.files.test_files import long_text, write
from tests.timing import HANG_S


class _Log:
    """The lanes' events and the test's own marks, in the order they happened."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def event(self, kind: str, fields: dict[str, Any]) -> None:
        with self._lock:
            self.items.append((kind, str(fields.get("lane", ""))))

    def mark(self, what: str) -> None:
        with self._lock:
            self.items.append((what, "test"))

    def index(self, kind: str, lane: str, after: int = -1) -> int | None:
        with self._lock:
            for i, item in enumerate(self.items):
                if i > after and item == (kind, lane):
                    return i
        return None

    def wait_for(self, kind: str, lane: str, after: int = -1) -> int:
        deadline = time.monotonic() + HANG_S
        while (i := self.index(kind, lane, after)) is None:
            assert time.monotonic() < deadline, f"no {kind} of {lane} after {after}: {self.items}"
            time.sleep(0.005)
        return i


def _held_call(brain: Brain, log: _Log, lane: str, serve: Any) -> tuple[int, int]:
    """Hold a tool call open until the ``lane`` yields to it, serve a query and a note inside
    it, close it; (index of the yield, index of the call's end) in the log."""
    with brain.gate.shared():  # a tool call in flight, as mcp_server._gated holds it
        start = len(log.items)
        log.mark("call")
        yielded = log.wait_for("yield", lane, after=start)
        serve()
        log.mark("served")
        end = len(log.items)
        log.mark("call-end")
    return yielded, end


def _check_order(log: _Log, lane: str, yielded: int, end: int) -> None:
    inside = log.items[yielded:end + 1]
    assert ("served", "test") in inside
    # Nothing of the ingest started while the call was in flight, once it had yielded...
    assert ("batch", lane) not in inside, inside
    # ...and it had batches left, which all came after the call.
    after = [k for k, ln in log.items[end:] if ln == lane and k == "batch"]
    assert after, log.items[end:]


def _patient(brain: Brain, log: _Log) -> None:
    """The held call stays a tool call however slow the machine (no starvation bound)."""
    brain.lanes.long_s = HANG_S * 10
    brain.lanes.max_wait_s = HANG_S * 10
    brain.lanes.on_event = log.event


def test_query_during_a_large_upload_is_served_before_its_remaining_batches(
    real_brain: Brain, tmp_path: Path
) -> None:
    b = real_brain
    b.settings.files.chunk_tokens = 40  # hundreds of chunks: many batches
    b.settings.files.overlap_tokens = 0
    log = _Log()
    _patient(b, log)
    rec = b.files.ingest(str(write(tmp_path, "big.md", long_text(300))))
    first = log.wait_for("batch", "files")  # the ingest is under way, batches queued
    yielded, end = _held_call(b, log, "files", lambda: (
        b.files.search("arctic tern migration", limit=3),
        b.memory.add("the ingest yields to tool calls", "lanes"),
    ))
    assert yielded > first
    deadline = time.monotonic() + HANG_S * 4
    while (done := b.files.get(rec["id"]))["status"] == "processing":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert done["status"] == "ready" and done["chunks_count"] > 50, done
    _check_order(log, "files", yielded, end)


def test_query_during_a_sync_is_served_before_its_remaining_files(
    real_brain: Brain, tmp_path: Path
) -> None:
    b = real_brain
    root = tmp_path / "many"
    for i in range(60):  # a chunk each: a batch of files per embedding batch
        write(root, f"d{i % 5}/f{i}.txt",
              f"file {i} " + " ".join(f"word{i}x{j}" for j in range(30)))
    b.sources.add(str(root), name="many", project="web", sync=False)
    log = _Log()
    _patient(b, log)
    job = b.sources.sync("many")
    first = log.wait_for("batch", "sources")
    yielded, end = _held_call(b, log, "sources", lambda: (
        b.sources.search("word7x3", project="web"),
        b.memory.add("a sync yields to tool calls", "lanes"),
    ))
    assert yielded > first
    done = b.sources.wait(job["job_id"], HANG_S * 4)
    assert done["status"] == "done", done
    _check_order(log, "sources", yielded, end)


def test_a_steady_stream_of_calls_never_stops_the_background() -> None:
    """Under calls that never end, each batch waits at most max_wait_s, then runs."""
    lanes = Lanes(busy=lambda _: 1, max_wait_s=0.0)
    log = _Log()
    lanes.on_event = log.event
    texts = [f"t{i}" for i in range(20)]
    out = lanes.embed("files", lambda part: np.ones((len(part), 3)), texts, limit=4)
    assert out is not None and out.shape == (20, 3)
    kinds = [k for k, _ in log.items]
    assert kinds.count("batch") == kinds.count("yield") == kinds.count("resume") >= 3


def test_a_call_in_flight_long_stops_holding_the_background() -> None:
    """The gate counts only holders younger than the window: a call that waits on a sync
    (minutes) would otherwise hold back the very sync it waits for."""
    gate = Gate()
    entered, release = threading.Event(), threading.Event()

    def call() -> None:
        with gate.shared():
            entered.set()
            release.wait(HANG_S)

    t = threading.Thread(target=call)
    t.start()
    assert entered.wait(HANG_S)
    try:
        assert gate.busy(HANG_S * 10) == 1
        assert gate.busy(0.0) == 0
        lanes = Lanes(busy=gate.busy, long_s=0.0, max_wait_s=HANG_S * 10)
        assert lanes.busy() == 0
        lanes.turn("files")  # returns at once: nothing young in flight
        assert lanes.yields == 0
    finally:
        release.set()
        t.join(HANG_S)
    assert gate.busy(HANG_S * 10) == 0


def test_a_cancel_between_batches_stops_the_lane() -> None:
    lanes = Lanes()
    seen: list[int] = []

    def embed(part: list[str]) -> np.ndarray:
        seen.append(len(part))
        return np.zeros((len(part), 2))

    assert lanes.embed("sources", embed, ["a"] * 50, limit=5, stop=lambda: len(seen) >= 2) is None
    assert len(seen) == 2


def test_calls_between_batches_earn_the_lane_a_rest() -> None:
    """A tool call that came in during a batch (the gate's entry count moved) makes the lane
    rest before its next batch, though no call is in flight any more; batches with no call
    between them follow each other at once."""
    calls = [0]
    lanes = Lanes(activity=lambda: calls[0], busy_share=0.5, max_wait_s=HANG_S)
    log = _Log()
    lanes.on_event = log.event

    def embed(part: list[str]) -> np.ndarray:
        if len([k for k, _ in log.items if k == "batch"]) == 2:
            calls[0] += 1  # a call arrives while the second batch runs
        return np.zeros((len(part), 2))

    out = lanes.embed("files", embed, ["t"] * 8, limit=2)  # four batches of two
    assert out is not None and out.shape == (8, 2)
    kinds = [k for k, _ in log.items]
    assert kinds == ["batch", "batch", "yield", "resume", "batch", "batch"], kinds


def test_a_call_stops_an_onnx_batch_in_flight_and_the_batch_runs_again() -> None:
    """On the default runtime a background run is stopped by a tool call (onnxruntime's
    RunOptions.terminate), the lane gives way, and the batch runs again whole once the lane
    has waited its longest: the vectors are the ones a plain embedding gives."""
    pytest.importorskip("onnxruntime")
    emb = build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx")
    texts = [f"passage {i} about " + "lanes and batches " * 40 for i in range(6)]
    plain = emb.embed_documents(texts)
    lanes = Lanes(busy=lambda _s: 1, max_wait_s=0.05)  # a call always in flight
    log = _Log()
    lanes.on_event = log.event
    out = lanes.embed("files", emb.embed_documents, texts, limit=6)
    kinds = [k for k, _ in log.items]
    assert kinds == ["yield", "resume", "batch", "preempted", "yield", "resume", "batch"], kinds
    assert lanes.preempted == 1 and lanes.batches == 1
    assert out is not None and np.allclose(out, plain, atol=1e-6)


def test_a_tool_calls_run_never_waits_behind_a_background_batch() -> None:
    """The runtime's locks (RunLocks): while a background batch holds its lock, a tool
    call's run takes its own at once, and a second background batch waits for the first."""
    locks = RunLocks()
    lanes = Lanes()
    holding, release = threading.Event(), threading.Event()

    def embed(part: Any) -> np.ndarray:
        with locks():  # what the onnx and torch runtimes take around a run
            holding.set()
            release.wait(HANG_S)
        return np.zeros((len(part), 2), dtype=np.float32)

    bg = threading.Thread(target=lanes.embed, args=("files", embed, ["t"]))
    bg.start()
    try:
        assert holding.wait(HANG_S)
        fg = locks()
        assert fg.acquire(blocking=False), "a tool call waited behind a background batch"
        fg.release()
        seen: list[bool] = []

        def other_batch(part: Any) -> np.ndarray:
            lock = locks()
            seen.append(lock.acquire(blocking=False))
            if seen[-1]:
                lock.release()
            return np.zeros((len(part), 2), dtype=np.float32)

        Lanes().embed("sources", other_batch, ["u"])
        assert seen == [False], "two background batches ran at once"
    finally:
        release.set()
        bg.join(HANG_S)


def test_a_query_embeds_while_an_onnx_batch_holds_the_runtime() -> None:
    """On the default runtime: a search's query embedding completes while a background
    batch is inside the runtime's lock, and gives the vector it gives alone."""
    pytest.importorskip("onnxruntime")
    emb = build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx")
    alone = emb.embed_query("where is the retry budget set")
    inner = getattr(emb, "inner", emb)
    holding, release = threading.Event(), threading.Event()

    def embed(part: Any) -> np.ndarray:
        with inner._encode_lock():  # the background side of the runtime, held mid-batch
            holding.set()
            release.wait(HANG_S)
        return np.asarray(emb.embed_documents(list(part)))

    bg = threading.Thread(target=Lanes().embed, args=("files", embed, ["a passage"]))
    bg.start()
    try:
        assert holding.wait(HANG_S)
        got: list[np.ndarray] = []
        q = threading.Thread(target=lambda: got.append(emb.embed_query(
            "where is the retry budget set")))
        q.start()
        q.join(HANG_S)
        assert got, "the query waited for the background batch"
        assert np.allclose(got[0], alone, atol=1e-6)
    finally:
        release.set()
        bg.join(HANG_S)
