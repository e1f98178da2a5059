"""Where and how an onnxruntime session's threads run: the intra-op pool's size, its bounded
spin (:func:`spin_options`) and, on 2-4 CPUs, which CPU each thread runs on
(:class:`Placement`). The runtime (brain/embedding/onnx.py) applies them to its session."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

# onnxruntime's intra-op threads spin (busy-wait) for work by default, and keep spinning ~40
# ms after each run. A memory server shares the machine with the agent and its client: on 2
# CPUs, three stdio servers on one 1,000-note store queried in turn under a load of 3-5
# answered search_memory at p50 40.4 ms spinning that way, 26.6 ms not (footprint round
# four), so the threads used not to spin at all. Each of a query's ~50 operators then wakes
# the pool's sleeping thread (a futex wake, and a wait for the scheduler when the CPUs are
# busy). A spin bounded to ``SPIN_US`` between operators, and stopped when the run ends
# (``force_spinning_stop``), keeps the pool awake inside a run only: a query embeds in 2.6
# instead of 3.3 ms with less CPU (5.0 vs 5.7 ms a query), beside two CPU-bound processes in
# 3.2-3.7 instead of 8.0 ms, and a run leaves no thread spinning (BENCHMARKS.md, "Round
# seven"). onnxruntime before 1.32 may not read the bound (an unknown key is ignored,
# and the threads would spin unbounded), so there the pool does not spin.
SPIN_US = 20
SPIN_FROM = (1, 32)


def spin_options(version: str) -> list[tuple[str, str]]:
    """The session's spin settings under onnxruntime ``version`` (see above)."""
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        major, minor = 0, 0
    if (major, minor) < SPIN_FROM:
        return [("session.intra_op.allow_spinning", "0")]
    return [("session.intra_op.allow_spinning", "1"),
            ("session.intra_op.spin_duration_us", str(SPIN_US)),
            ("session.force_spinning_stop", "1")]


# The most intra-op threads a session runs (the calling thread and its pool).
MAX_THREADS = 4


class Placement:
    """Where a session's threads run when its pool covers every CPU the process may use
    (2-4 CPUs). After a pause of even 50 ms, Linux placed the pool's thread on the calling
    thread's CPU for the next ~5 runs (a 2-CPU VM: the two on one CPU in 17-21 of 25 such runs,
    a query embedding in 5.0-5.7 instead of 2.9 ms, about one thread's time;
    ``/work/notes/runs/qemb_gap3.py``). So the pool's threads are pinned to all CPUs but the
    first, and the calling thread runs on the first for the length of a run, then gets its
    CPUs back: 2.8-3.1 ms after the pause. A stdio search at 1k answered in 0.93-0.97 of the
    time quiet, 0.86-0.99 beside one CPU-bound process, 0.89-1.04 beside two (BENCHMARKS.md,
    "Round seven"). With more CPUs than threads nothing is pinned: the pool can go where the
    CPUs are idle."""

    def __init__(self, caller: frozenset[int], pool: tuple[int, ...]) -> None:
        self.caller = caller
        self.pool = pool

    @classmethod
    def plan(cls, allowed: set[int] | frozenset[int], threads: int) -> Placement | None:
        """The placement for ``threads`` threads over the CPUs ``allowed``; None when the
        pool does not cover them (one thread, or more CPUs than threads)."""
        cpus = sorted(allowed)
        if threads < 2 or len(cpus) != threads:
            return None
        return cls(frozenset(cpus[:1]), tuple(cpus[1:]))

    def option(self) -> tuple[str, str]:
        """onnxruntime's session entry: one CPU per pool thread, numbered from 1."""
        return ("session.intra_op_thread_affinities", ";".join(str(c + 1) for c in self.pool))

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The calling thread on the caller's CPUs for the length of a run, then back."""
        try:
            before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, self.caller)
        except OSError:  # a CPU set changed under the process: run where it is
            yield
            return
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, before)


def _allowed_cpus() -> set[int]:
    """The CPUs this process may run on (empty where the OS does not say)."""
    try:
        return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
    except OSError:
        return set()


def placement(threads: int) -> Placement | None:
    """This process's :class:`Placement` (None where the OS has no CPU affinity, or with
    ``BRAIN_ONNX_PIN=0``)."""
    allowed = _allowed_cpus()
    if not allowed or os.environ.get("BRAIN_ONNX_PIN") == "0":
        return None
    return Placement.plan(allowed, threads)


def intra_op_threads() -> int:
    """The intra-op threads of a session: the CPUs this process may use, at most
    ``MAX_THREADS``."""
    return max(1, min(MAX_THREADS, len(_allowed_cpus()) or os.cpu_count() or 1))
