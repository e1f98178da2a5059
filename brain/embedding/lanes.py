"""Tool calls first: the one scheduler heavy work asks before each of its batches.

Embedding an upload (brain/files/worker.py) or a source sync (brain/sources/indexer.py) runs
in the background lane: its texts go to the model in bounded batches (``budget_s`` of work at
the speed measured so far, at most ``max_texts``), and before each batch the lane waits while a
tool call is in flight. A tool call is the foreground: a search's query embedding, its store
queries and fusion, an add_memory's embedding. So a query that arrives during a large ingest
waits at most for the batch already running (about ``budget_s``), then runs alone on the CPU,
and the ingest's remaining batches come after it (issue 50 item 6; the search latency during
an ingest is measured by ``python -m bench.ingest_contention``). A call never waits for the
runtime itself: the runtimes lock per side (:class:`RunLocks`), so a query embedding runs
beside a batch that cannot be stopped (a whole one, or on torch), and a batch that runs
between calls first settles the collector (brain/heap.py: ``settle_if_due``), so a full
collection does not stop a call instead.

What counts as a tool call in flight is ``busy(long_s)``, given by the composition root: the
generation gate's holders (every MCP tool call and explorer request holds it, brain/app.py),
plus whatever entered :meth:`Lanes.foreground` here. Two bounds keep the background from
starving:

- a call in flight longer than ``long_s`` is not short work (a tool call that waits on a sync
  would otherwise stop the very sync it waits for): the gate counts only younger holders;
- a batch waits at most ``max_wait_s`` in all: under a steady stream of calls the ingest
  still moves, one batch per ``max_wait_s`` at least.

``on_event(kind, fields)``, when set, sees each step: ``batch`` (a background batch starts:
``lane``, ``texts``), ``yield`` (a batch waits for tool calls: ``lane``, ``busy``),
``resume`` (it goes on: ``lane``, ``waited_s``, ``overdue``), ``preempted`` (a tool call
came in while a batch ran on a runtime that can stop it, the onnx one: the run was stopped
and the batch runs again after the call; after ``max_wait_s`` of that a batch runs whole). Tests observe the order of work
through it, never its timing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from brain import heap

Event = Callable[[str, dict[str, Any]], None]

BUDGET_S = 0.1  # work per background batch: what a query that lands on one waits at most
MAX_WAIT_S = 1.0  # longest a background batch waits for tool calls before it runs anyway
FIRST_BATCH = 8  # texts in a lane's first batch, before its speed is known
BUSY_SHARE = 0.25  # while tool calls keep coming, a lane works this share of the time
LONG_S = 2.0  # a tool call in flight longer than this no longer holds the background
_POLL_S = 0.02  # a waiting lane looks again: each look takes the GIL from the call it waits for
_WATCH_S = 0.002  # a batch in flight looks for a call this often (no call runs meanwhile)
_bg = threading.local()  # the background batch the calling thread runs, if any


class Batch:
    """A background batch in flight: a runtime that can stop a run registers its run's
    handle here (brain/embedding/onnx.py: onnxruntime's RunOptions), and a tool call that
    comes in preempts it: the run ends at once, the lane gives way, then runs it again."""

    def __init__(self) -> None:
        self.preempted = False
        self._handles: list[Any] = []
        self._lock = threading.Lock()

    def register(self, handle: Any) -> None:
        with self._lock:
            self._handles.append(handle)
            if self.preempted:
                handle.terminate = True

    def preempt(self) -> None:
        with self._lock:
            self.preempted = True
            for h in self._handles:
                h.terminate = True


def current_batch() -> Batch | None:
    """The preemptible background batch the calling thread runs (None: a tool call's, or a
    background batch that runs whole)."""
    return getattr(_bg, "batch", None)


def in_background() -> bool:
    """Whether the calling thread runs a background lane's batch (stoppable or whole)."""
    return bool(getattr(_bg, "depth", 0))


class RunLocks:
    """The runtime's locks (brain/embedding/onnx.py, registry.py): one run at a time per
    side, never a tool call behind a background batch. A query embedding that waited on one
    lock for the batch in flight was the whole tail of a search during an ingest (p99 8-11x
    idle; BENCHMARKS.md, "Tool calls during heavy work"): now the call runs beside the batch
    (one session takes concurrent runs), and the batch is stopped where the runtime can."""

    def __init__(self) -> None:
        self._background = threading.Lock()
        self._foreground = threading.Lock()

    def __call__(self) -> threading.Lock:
        return self._background if in_background() else self._foreground


class Lanes:
    """The foreground (tool calls) and the background lane (ingest batches) of one brain."""

    def __init__(
        self,
        busy: Callable[[float], int] | None = None,
        activity: Callable[[], int] | None = None,
        *,
        busy_share: float = BUSY_SHARE,
        budget_s: float = BUDGET_S,
        max_wait_s: float = MAX_WAIT_S,
        long_s: float = LONG_S,
        max_texts: int = 4096,
    ) -> None:
        self._busy = busy
        self._activity = activity
        self.busy_share = busy_share
        self._seen: dict[str, int] = {}  # per lane: the activity count at its last batch
        self._last_batch_s: dict[str, float] = {}
        self.budget_s = budget_s
        self.max_wait_s = max_wait_s
        self.long_s = long_s
        self.max_texts = max(1, max_texts)
        self.on_event: Event | None = None
        self.enabled = True  # off: batches neither wait nor stop for calls (benchmarks)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._active = 0  # foreground entries in flight (outside the gate)
        self._per_text: dict[str, float] = {}  # seconds per text, per lane (moving average)
        # Counters, read by the benchmark and brain_stats-like reports.
        self.yields = 0
        self.waited_s = 0.0
        self.batches = 0
        self.preempted = 0
        self._starved: dict[str, float] = {}  # per lane: when its batches began to be preempted

    # ------------------------------------------------------------------ foreground
    @contextlib.contextmanager
    def foreground(self) -> Iterator[None]:
        """Mark the calling thread's work as a tool call (re-entrant per thread)."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        if not depth:
            with self._lock:
                self._active += 1
        try:
            yield
        finally:
            self._local.depth = depth
            if not depth:
                with self._lock:
                    self._active -= 1

    def busy(self) -> int:
        """Tool calls in flight that the background yields to."""
        with self._lock:
            own = self._active
        return own + (self._busy(self.long_s) if self._busy is not None else 0)

    # ------------------------------------------------------------------ background
    def _emit(self, kind: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(kind, fields)

    def _rest(self, lane: str) -> float:
        """Before a batch: when tool calls came in since the lane's last batch, a rest of
        the last batch's time x (1 - busy_share) / busy_share (the rebuild's pace,
        brain/generations/rebuild.py): the lane then works ``busy_share`` of the time, so a
        call lands on a running batch about that often, not on nearly every one."""
        if self._activity is None:
            return 0.0
        seen = self._activity()
        before = self._seen.get(lane)
        self._seen[lane] = seen
        if before is None or seen == before:
            return 0.0
        share = min(max(self.busy_share, 1e-3), 1.0)
        return min(self.max_wait_s, self._last_batch_s.get(lane, 0.0) * (1 - share) / share)

    def turn(self, lane: str, stop: threading.Event | None = None, *,
             batch: bool = False) -> None:
        """Wait (at most ``max_wait_s``) until no tool call is in flight; returns at once
        when none is, or when ``stop`` is set. Before a ``batch``, also the rest that
        tool calls since the last batch earn (:meth:`_rest`)."""
        if not self.enabled:
            return
        busy = self.busy()
        rest = self._rest(lane) if batch else 0.0
        if not busy and rest <= 0:
            return
        self._emit("yield", lane=lane, busy=busy)
        t0 = time.monotonic()
        if rest > 0:
            if stop is not None:
                stop.wait(rest)
            else:
                time.sleep(rest)
        end = t0 + self.max_wait_s
        while time.monotonic() < end and not (stop is not None and stop.is_set()):
            if not self.busy():
                break
            time.sleep(_POLL_S)
        overdue = bool(self.busy()) and not (stop is not None and stop.is_set())
        waited = time.monotonic() - t0
        with self._lock:
            self.yields += 1
            self.waited_s += waited
        self._emit("resume", lane=lane, waited_s=round(waited, 4), overdue=overdue)

    def batch_size(self, lane: str, limit: int) -> int:
        """Texts in the next batch of ``lane``: about ``budget_s`` of work at the speed
        measured so far, within ``limit`` (and ``max_texts``)."""
        size = max(1, min(limit, self.max_texts))
        per = self._per_text.get(lane, 0.0)
        if per <= 0:  # no speed measured yet: a small first batch
            return min(size, FIRST_BATCH)
        return max(1, min(size, int(self.budget_s / per)))

    def measured(self, lane: str, texts: int, seconds: float) -> None:
        if texts <= 0:
            return
        per = seconds / texts
        with self._lock:
            old = self._per_text.get(lane, 0.0)
            self._per_text[lane] = per if not old else 0.7 * old + 0.3 * per

    def embed(
        self,
        lane: str,
        embed: Callable[[Sequence[str]], np.ndarray],
        texts: Sequence[str],
        *,
        limit: int = 64,
        stop: Callable[[], bool] | None = None,
    ) -> np.ndarray | None:
        """``embed(texts)`` in background batches, each after its :meth:`turn`; None when
        ``stop()`` turned true between two batches (a cancel)."""
        _bg.depth = getattr(_bg, "depth", 0) + 1
        try:
            out = self._batches(lane, embed, texts, limit, stop)
        finally:
            _bg.depth -= 1
        if out is None:
            return None
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        return np.concatenate(out)

    def _batches(self, lane: str, embed: Callable[[Sequence[str]], np.ndarray],
                 texts: Sequence[str], limit: int,
                 stop: Callable[[], bool] | None) -> list[np.ndarray] | None:
        out: list[np.ndarray] = []
        i = 0
        while i < len(texts):
            self.turn(lane, batch=True)
            if stop is not None and stop():
                return None
            if self.enabled and not self.busy():
                heap.settle_if_due()  # a collection now, not in the middle of a call
            size = self.batch_size(lane, limit)
            part = list(texts[i : i + size])
            self._emit("batch", lane=lane, texts=len(part))
            t0 = time.perf_counter()
            vecs = self._preemptible(lane, embed, part, t0)
            if vecs is None:
                continue  # a tool call came in: it goes first, the batch runs again
            took = time.perf_counter() - t0
            self.measured(lane, len(part), took)
            self._last_batch_s[lane] = took
            with self._lock:
                self.batches += 1
            if len(vecs) != len(part):
                raise ValueError(f"{len(vecs)} vectors for {len(part)} texts")
            out.append(np.asarray(vecs, dtype=np.float32))
            i += len(part)
        return out

    def _preemptible(self, lane: str, embed: Callable[[Sequence[str]], np.ndarray],
                     part: list[str], t0: float) -> np.ndarray | None:
        """``embed(part)``, stopped by a tool call that comes in meanwhile (None then),
        unless the lane has given way for ``max_wait_s`` since its last whole batch."""
        since = self._starved.get(lane)
        if not self.enabled:
            return embed(part)
        if since is not None and time.monotonic() - since >= self.max_wait_s:
            return embed(part)  # starved: this one runs whole
        batch, done = Batch(), threading.Event()

        def watch() -> None:
            while not done.wait(_WATCH_S):
                if self.busy():
                    batch.preempt()
                    return

        watcher = threading.Thread(target=watch, name="brain-lanes-watch", daemon=True)
        if self.busy():  # a call already in flight (a lane that waited its longest)
            batch.preempt()
        _bg.batch = batch
        watcher.start()
        try:
            vecs = embed(part)
        except Exception:
            if not batch.preempted:
                raise
            self._starved.setdefault(lane, t0)
            with self._lock:
                self.preempted += 1
            self._emit("preempted", lane=lane, texts=len(part))
            return None
        finally:
            done.set()
            _bg.batch = None
            watcher.join()
        self._starved.pop(lane, None)
        return vecs

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {"yields": self.yields, "waited_s": round(self.waited_s, 3),
                    "batches": self.batches, "preempted": self.preempted,
                    "per_text_ms": {k: round(v * 1000, 3) for k, v in self._per_text.items()}}
