"""Index maintenance: the store's HNSW and segments kept in shape by the product itself.

Qdrant Edge runs no optimizer of its own: points written since the last optimization sit in
unindexed segments that every search reads one by one (62.8 ms p50 vs 19.4 ms at 100k notes
in BENCHMARKS.md). The ``index`` worker (registered in brain/app.py, every 30 s by default,
``[workers.index]``) reads the store's :class:`IndexState` and optimizes when

- ``unindexed >= [index] min_unindexed`` dense vectors, or
- ``segments > [index] max_segments``, or
- ``deleted_share > [index] max_deleted_share``,

and not again for a state it already ran on, unless writes landed during that run (a run
that changed nothing waits
``noop_backoff_s`` before the next). The run itself is the store's ``optimize()``: for Qdrant
Edge a child process optimizes a copy while searches and writes go on (see
brain/vector_store/edge.py); a server optimizes by itself and qdrant-client's local mode has no
index, so there it does nothing. Time stamps come from the injected clock, durations from the
monotonic clock.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from brain.clock import Clock, iso
from brain.errors import OptimizeAborted
from brain.vector_store.base import CancelsOptimize, IndexState, OptimizeSteps, VectorStore
from brain.vector_store.forwarding import backend_of

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IndexConfig:
    """``[index]``: when the worker optimizes (the defaults live in config.py)."""

    enabled: bool = True
    min_unindexed: int = 5000
    max_segments: int = 16
    max_deleted_share: float = 0.2
    noop_backoff_s: float = 600.0


def _shape(state: IndexState) -> tuple[Any, ...]:
    return (state.points, state.unindexed, state.segments, state.deleted_share)


class IndexMaintenance:
    def __init__(self, store: VectorStore, config: IndexConfig, clock: Clock) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()  # one run at a time
        self._running = threading.Event()
        self.runs = 0
        self.last_run: str | None = None  # ISO time the last run started
        self._last_run_ts: float | None = None
        self.last_duration_s: float | None = None
        self.last_reason: str | None = None
        self.last_changed: bool | None = None
        self.last_error: str | None = None
        self._after: tuple[Any, ...] | None = None  # the state the last run left
        self._noop_unindexed = 0  # unindexed vectors a run that changed nothing left

    # ------------------------------------------------------------------ deciding
    def reason(self, state: IndexState) -> str | None:
        """Why ``state`` needs an optimization, or None."""
        c = self.config
        if state.optimizing or state.points == 0:
            return None
        why = None
        if state.unindexed is not None and state.unindexed >= c.min_unindexed:
            why = f"{state.unindexed} unindexed vectors >= {c.min_unindexed}"
        elif state.segments is not None and state.segments > c.max_segments:
            why = f"{state.segments} segments > {c.max_segments}"
        elif state.deleted_share is not None and state.deleted_share > c.max_deleted_share:
            why = f"deleted share {state.deleted_share:.2f} > {c.max_deleted_share}"
        if why is None or _shape(state) == self._after:
            return None  # nothing to do, or already done for exactly this state
        if (self.last_changed is False and self._last_run_ts is not None
                and self.clock.now().timestamp() - self._last_run_ts < c.noop_backoff_s
                and (state.unindexed or 0) < self._noop_unindexed + c.min_unindexed):
            return None  # the last run found nothing to optimize: back off, unless it grew
        return why

    def tick(self) -> dict[str, Any]:
        """The worker's job: optimize when the store's state asks for it."""
        if not self.config.enabled:
            return {"ran": False, "why": "disabled ([index] enabled = false)"}
        state = self.store.index_state()
        why = self.reason(state)
        if why is None:
            return {"ran": False, "state": state.as_dict()}
        return self.run(why)

    # ------------------------------------------------------------------ running
    def run(self, why: str = "requested") -> dict[str, Any]:
        """Optimize now (off the request path: the worker thread or a CLI call)."""
        if not self._lock.acquire(blocking=False):
            return {"ran": False, "why": "a run is already going on"}
        self._running.set()
        started = time.monotonic()
        self._last_run_ts = self.clock.now().timestamp()
        self.last_run, self.last_reason = iso(self.clock.now()), why
        log.info("index maintenance: optimizing (%s)", why)
        try:
            changed = bool(self.store.optimize())
            self.last_changed, self.last_error = changed, None
        except OptimizeAborted as exc:
            # Expected (the store closed meanwhile, or too many writes to replay): the live
            # store is as it was and the next run starts over. One line, no traceback.
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.last_changed = None
            log.info("index maintenance stopped: %s; the next run starts over", exc)
            return {"ran": True, "why": why, "changed": False, "aborted": str(exc)}
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.last_changed = None
            log.warning("index maintenance failed: %s", self.last_error)
            raise
        finally:
            self.last_duration_s = round(time.monotonic() - started, 3)
            self.runs += 1
            self._running.clear()
            self._lock.release()
        after = self.store.index_state()
        # Not again for the state this run left, unless at least min_unindexed writes landed
        # during it: those were replayed into an unindexed segment after the optimized copy was
        # made (a bulk import under way), and the next run indexes them. Without this a store
        # that took no more writes kept them unindexed, every search reading them one by one.
        # Fewer replayed writes do not earn a run of their own: on a store that always takes a
        # few writes during a run, that rule alone would run back to back without end.
        steps = self._last_optimize() or {}
        replayed = changed and float(steps.get("replayed") or 0) >= self.config.min_unindexed
        self._after = None if replayed else _shape(after)
        self._noop_unindexed = (after.unindexed or 0) if not changed else 0
        log.info("index maintenance: done in %.1f s (%s)", self.last_duration_s, after)
        return {"ran": True, "why": why, "changed": changed,
                "duration_s": self.last_duration_s, "state": after.as_dict()}

    def cancel(self) -> None:
        """Give up a run in progress (closing): the store stays as it was before it."""
        live = backend_of(self.store)
        if isinstance(live, CancelsOptimize):
            live.cancel_optimize()

    def _last_optimize(self) -> dict[str, float] | None:
        """Seconds per step of the last optimization (an embedded store's optimizer)."""
        live = backend_of(self.store)
        return live.last_optimize if isinstance(live, OptimizeSteps) else None

    @property
    def running(self) -> bool:
        return self._running.is_set()

    def status(self) -> dict[str, Any]:
        """The index section of brain_stats."""
        state = self.store.index_state()
        steps = self._last_optimize()
        quantization = getattr(self.store, "quantization", None)  # none / int8; None: keeps none
        return {
            "quantization": quantization() if callable(quantization) else None,
            **state.as_dict(),
            "running": self.running or state.optimizing,
            "enabled": self.config.enabled,
            "runs": self.runs,
            "last_run": self.last_run,
            "last_duration_s": self.last_duration_s,
            "last_reason": self.last_reason,
            "last_changed": self.last_changed,
            "last_error": self.last_error,
            "last_steps_s": dict(steps) if steps else None,
        }
