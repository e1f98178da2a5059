"""How tests bound time, so the suite passes on a loaded machine (issue 49).

A test never compares a wall-clock duration with a tight bound: on a box running a build
beside the suite a 50 ms call can take 3 s. What a test bounds instead:

- work, by counting it (requests sent, rows scanned, calls made);
- CPU time of this process and its reaped children (``CpuClock``), which a loaded machine
  barely moves: a quadratic split or a backtracking regex burns its seconds whatever the
  load, a linear one stays far below a generous bound;
- a hang, with ``HANG_S`` of wall clock: long enough that only a stuck call reaches it.

Timing figures (latency, throughput, ratios) belong in ``make bench``.
``tests/house/test_suite_hygiene.py`` fails on a wall-clock bound below ``HANG_FLOOR_S``.
"""

from __future__ import annotations

import resource

HANG_S = 30.0  # wall clock that only a hang reaches, even at a load average of ~20
HANG_FLOOR_S = 20.0  # the hygiene test refuses a wall-clock bound below this
CPU_BOUND_S = 10.0  # CPU time a fixed DoS input may burn; the regressions took 20 s to minutes


def cpu_seconds() -> float:
    """User + system CPU time of this process (every thread) and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class CpuClock:
    """CPU seconds spent since it was made: ``clock = CpuClock(); ...; clock.used()``."""

    def __init__(self) -> None:
        self.start = cpu_seconds()

    def used(self) -> float:
        return cpu_seconds() - self.start
