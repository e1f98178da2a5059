"""Background workers: a scheduler thread running registered jobs on the brain's clock.

Each worker is configured by ``[workers.<name>] enabled / interval_s`` (the ``sections``
mapping app.py hands over, read on each use); a worker without a section uses the defaults
given at registration. Time comes from the injected clock so tests move a ``ManualClock`` and
the due workers run on the next tick; ``run_now(name)`` runs one at once (tests, CLI).

Jobs are added with ``register(name, fn)`` where ``fn() -> dict | None`` closes over what it
works on, at any time, also while the scheduler runs. A job that could not run (its result
says ``retry_next_tick``) stays due and is tried again on the next tick. The composition root (brain/app.py)
registers ``decay`` (re-keys salience after a half-life change), ``reclamation`` (forgotten notes past the grace
period are retired), ``index`` (index maintenance, brain/store/index_maintenance.py) and ``snapshot``. The last run of each worker is kept in the store's meta record, so a
server that restarts often still runs its workers on schedule. Within one process a data
dir has at most one running scheduler; several processes sharing a data dir is the owner's
business (another issue).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from brain.clock import Clock
from brain.errors import DiskFull, InvalidArgument
from brain.store.meta import StoreMeta

log = logging.getLogger(__name__)

WorkerFn = Callable[[], dict[str, Any] | None]


def run_every(stop: threading.Event, interval_s: Callable[[], float], work: Callable[[], None],
              what: str) -> None:
    """A thread's loop: ``work`` every ``interval_s()`` seconds until ``stop`` is set (the
    brain's graph saver and access stamper, which run more often than the scheduler ticks).
    A failure is retried on the next tick: a full disk silently (the space guard logs it once
    a minute), anything else with its traceback."""
    while not stop.wait(interval_s()):
        try:
            work()
        except DiskFull:
            pass
        except Exception:  # noqa: BLE001 - retried on the next tick
            log.exception("%s failed", what)


class WorkerSection(Protocol):
    """``[workers.<name>]``: what the registry reads of a worker's settings."""

    @property
    def enabled(self) -> bool: ...

    @property
    def interval_s(self) -> float: ...


FIRST_RUN_DELAY_S = 60.0

_running_homes: set[Path] = set()
_homes_lock = threading.Lock()


@dataclass(slots=True)
class Worker:
    name: str
    fn: WorkerFn
    default_enabled: bool = True
    default_interval_s: float = 3600.0
    delay_first: bool = False  # first run one interval after registration, never at boot
    next_ts: float | None = None
    runs: int = 0
    last_run_ts: float | None = None
    last_result: dict[str, Any] | None = None
    last_error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class WorkerRegistry:
    def __init__(
        self,
        home: Path,
        clock: Clock,
        meta: StoreMeta,
        sections: Mapping[str, WorkerSection],
        tick_s: float = 0.5,
    ) -> None:
        self.clock = clock
        self.meta = meta
        self.sections = sections  # live: a section added or changed later counts at once
        self.tick_s = tick_s
        self._workers: dict[str, Worker] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._home = Path(home).resolve()

    # ------------------------------------------------------------------ registry
    def register(
        self, name: str, fn: WorkerFn, *, enabled: bool = True, interval_s: float = 3600.0,
        delay_first: bool = False,
    ) -> None:
        """Add (or replace) a worker; ``[workers.<name>]`` settings override the defaults.
        ``delay_first``: the first run comes one whole interval after registration, whatever
        the last recorded run (a destructive job never runs at boot)."""
        if not name or not callable(fn):
            raise InvalidArgument("a worker needs a name and a callable fn()", field="name")
        w = Worker(name, fn, enabled, float(interval_s), delay_first)
        with self._lock:
            self._workers[name] = w
        # Schedule from the registration instant, so a clock moved later makes it due.
        w.next_ts = self._first_due(w)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._workers)

    def config(self, name: str) -> tuple[bool, float]:
        """(enabled, interval_s) of a worker: its settings section, else its defaults."""
        w = self._get(name)
        conf = self.sections.get(name)
        if conf is None:
            return w.default_enabled, w.default_interval_s
        return bool(conf.enabled), float(conf.interval_s)

    def _get(self, name: str) -> Worker:
        with self._lock:
            w = self._workers.get(name)
        if w is None:
            raise InvalidArgument(
                f"no worker {name!r}; known: {', '.join(self.names())}", field="name"
            )
        return w

    # ------------------------------------------------------------------ running
    def run_now(self, name: str) -> dict[str, Any]:
        """Run one worker now (even if disabled) and return its result."""
        w = self._get(name)
        with w.lock:
            now_ts = self.clock.now().timestamp()
            try:
                result = w.fn() or {}
                w.last_error = None
            except Exception as exc:
                w.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("worker %s failed", name)
                raise
            finally:
                w.runs += 1
                w.last_run_ts = now_ts
                self._persist_last_run(name, now_ts)
            w.last_result = result
            return result

    def _persist_last_run(self, name: str, ts: float) -> None:
        try:
            runs = dict(self.meta.data.get("worker_runs") or {})
            runs[name] = ts
            self.meta.set(worker_runs=runs)
        except Exception:  # noqa: BLE001 - bookkeeping never fails a run
            log.exception("cannot record the last run of worker %s", name)

    def _first_due(self, w: Worker) -> float:
        """Last run (kept in the store's meta) + interval; a first run comes soon after."""
        interval = self.config(w.name)[1]
        if w.delay_first:
            return self.clock.now().timestamp() + interval
        last = (self.meta.data.get("worker_runs") or {}).get(w.name)
        if last is not None:
            return float(last) + interval
        return self.clock.now().timestamp() + min(interval, FIRST_RUN_DELAY_S)

    def _due(self, w: Worker, now_ts: float) -> bool:
        enabled, _ = self.config(w.name)
        if not enabled:
            return False
        if w.next_ts is None:
            w.next_ts = self._first_due(w)
        return now_ts >= w.next_ts

    def tick(self) -> list[str]:
        """Run every due worker once; returns the names that ran."""
        ran = []
        with self._lock:
            workers = list(self._workers.values())
        for w in workers:
            if self._stop.is_set():
                break
            now_ts = self.clock.now().timestamp()
            if not self._due(w, now_ts):
                continue
            result: dict[str, Any] = {}
            try:
                result = self.run_now(w.name)
            except Exception:  # noqa: BLE001 - logged in run_now; the scheduler goes on
                pass
            if result.get("retry_next_tick"):
                continue  # the job could not run now (e.g. a manual run held it): next tick
            w.next_ts = now_ts + self.config(w.name)[1]
            ran.append(w.name)
        return ran

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the scheduler never dies
                log.exception("worker scheduler tick failed")

    def start(self) -> bool:
        """Start the scheduler thread; False when one already runs for this data dir."""
        with _homes_lock:
            if self._thread is not None or self._home in _running_homes:
                return False
            _running_homes.add(self._home)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="brain-workers", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None:
            t.join(timeout=30)
            with _homes_lock:
                _running_homes.discard(self._home)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def status(self) -> list[dict[str, Any]]:
        out = []
        for name in self.names():
            w = self._get(name)
            enabled, interval = self.config(name)
            out.append(
                {
                    "name": name,
                    "enabled": enabled,
                    "interval_s": interval,
                    "runs": w.runs,
                    "last_run_ts": w.last_run_ts,
                    "next_ts": w.next_ts,
                    "last_error": w.last_error,
                }
            )
        return out
