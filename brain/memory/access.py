"""Access stamps of notes (access_count, last_accessed, salience), which decay reads.

An access boosts the note's salience as of the access (brain/memory/salience.py: it decays on
read) and restarts its decay from there (``salience_ts``); the filter key follows.

Stamps are coalesced in memory and written by :meth:`AccessStamps.flush` (by every reader
of access data, and by a background thread once :meth:`AccessStamps.due`), so a search does
not pay one store write per hit: that was ~10 ms of a 35 ms search at 10 hits. The thread
writes once searches pause (``IDLE_S``), so its writes (~0.2 ms a note) do not take the CPU
and the GIL from searches that follow each other: at 1,000 notes, a stdio search_memory
answered ~1 ms sooner (p50) with no flush among back-to-back searches. A long burst is still
written every ``MAX_AGE_S``, or once ``MAX_PENDING`` notes wait; a crash loses at most that
much access history (stamps are bookkeeping no caller was promised).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from brain.memory import salience
from brain.notes import point_id
from brain.vector_store import VectorStore

IDLE_S = 0.3  # no stamp for this long: the searches paused, write
MAX_AGE_S = 5.0  # the oldest pending stamp waited this long: write even mid-burst
MAX_PENDING = 2048  # notes


class AccessStamps:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._flush_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        # zk_id -> (accesses, last access iso, last access ts, salience boost per access)
        self._pending: dict[str, tuple[int, str, float, float]] = {}
        self._first = self._last = 0.0  # monotonic times of the oldest, newest pending stamp

    def stamp(self, zk_ids: Sequence[str], now: str, ts: float, boost: float) -> None:
        with self._pending_lock:
            self._last = self._clock()
            if not self._pending:
                self._first = self._last
            for z in dict.fromkeys(zk_ids):
                n = self._pending.get(z, (0, "", 0.0, 0.0))[0]
                self._pending[z] = (n + 1, now, ts, boost)

    def due(self) -> bool:
        """Whether the background writer should flush now (see the module docstring)."""
        now = self._clock()
        with self._pending_lock:
            return bool(self._pending) and (
                now - self._last >= IDLE_S or now - self._first >= MAX_AGE_S
                or len(self._pending) >= MAX_PENDING)

    def flush(self, store: VectorStore, half_life_s: float) -> int:
        """Write the pending stamps to ``store`` (the service's current one: the owner's
        audit may wrap it); returns how many notes were stamped. ``half_life_s``: the
        salience half-life of the store's keys."""
        with self._flush_lock:
            with self._pending_lock:
                pending, self._pending = self._pending, {}
            if not pending:
                return 0
            for pt in store.retrieve([point_id(z) for z in pending]):
                p = pt.payload
                n, now, ts, boost = pending[p["zk_id"]]
                current = salience.salience_now(p, ts, half_life_s)
                fields = {
                    "access_count": int(p.get("access_count", 0)) + n,
                    "last_accessed": now,
                    "last_accessed_ts": ts,
                    "salience": min(1.0, current + boost * n),
                    "salience_ts": ts,
                }
                fields["salience_key"] = salience.salience_key({**p, **fields}, half_life_s)
                store.set_payload([pt.id], fields)
            return len(pending)

    def rekey(self, store: VectorStore, ids: Sequence[str], half_life_s: float) -> int:
        """Write ``salience_key`` (and nothing else) for the notes ``ids`` (point ids) whose
        key is missing or not computed with ``half_life_s``; returns how many were written.
        Read again under the flush lock, so a stamp written meanwhile is keyed from."""
        written = 0
        with self._flush_lock:
            for pt in store.retrieve(list(ids)):
                if pt.payload.get("kind") == "note" and salience.needs_key(pt.payload,
                                                                           half_life_s):
                    key = salience.salience_key(pt.payload, half_life_s)
                    store.set_payload([pt.id], {"salience_key": key})
                    written += 1
        return written
