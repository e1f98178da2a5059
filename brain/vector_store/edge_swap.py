"""The out-of-process optimization of an Edge shard (edge.py's module docstring tells the
whole run): the child that optimizes a copy, the copy, the replay of the writes made
meanwhile, and the lock that lets reads wait for the swap only."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

# The child process: optimize a copy of the shard. It dies with the thread that started it
# (PR_SET_PDEATHSIG), runs at low priority, and prints whether anything changed.
_CHILD = """
import ctypes, os, sys
try:
    ctypes.CDLL(None).prctl(1, 9)
except Exception:
    pass
if os.getppid() != int(sys.argv[2]):
    sys.exit(3)  # the parent died before the line above took effect
os.nice(10)
import qdrant_edge as qe
from brain.vector_store.base import declared_indexes
from brain.vector_store.edge_convert import SHADOW, reconcile_indexes
shard = qe.EdgeShard.load(sys.argv[1])
# Indexes a store holds built otherwise than declared (an older version's) are built again
# here, on the copy: at 1,000,000 notes each one reads every point.
reconcile_indexes(shard, declared_indexes(SHADOW, tiers=True))
if len(sys.argv) > 3:  # payloads rewritten in the copy first, so the run indexes them
    from brain.vector_store.edge_swap import rewrite_payloads
    rewrite_payloads(shard, sys.argv[3])
changed = shard.optimize()
shard.flush()
shard.close()
print(int(bool(changed)))
"""
# Writes made during a run are kept in memory to be replayed at the swap; past this many
# points the run is abandoned (its copy would be too stale to be worth it) and retried later.
MAX_REPLAY_POINTS = 200_000


def rewrite_payloads(shard: Any, target: str, page: int = 1024) -> int:
    """Set, on every point of ``shard``, the fields ``target`` ("module:function", a function
    of a payload returning the fields to set, or None) gives; returns how many points changed.
    Run in the optimizer child on its copy: a payload written in an indexed segment moves the
    point to the unindexed one, so a rewrite of every point in the live store would leave
    searches reading every vector one by one until the next run; here the run indexes them."""
    import importlib
    import json

    module, _, name = target.partition(":")
    fn = getattr(importlib.import_module(module), name)
    offset, changed = None, 0
    while True:
        recs, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=page,
                                                     with_payload=True, with_vector=False))
        groups: dict[str, list[Any]] = {}
        for r in recs:
            patch = fn(dict(r.payload or {}))
            if patch:
                groups.setdefault(json.dumps(patch, sort_keys=True), []).append(str(r.id))
        for patch, ids in groups.items():
            shard.update(qe.UpdateOperation.set_payload(ids, json.loads(patch)))
            changed += len(ids)
        if offset is None:
            return changed


def _copy_tree(src: Path, dst: Path) -> None:
    """A copy, not links (Edge writes segment files in place), keeping files sparse: Edge
    preallocates (459 MB apparent, 91 MB on disk at 10k notes)."""
    cp = shutil.which("cp")
    if cp is not None and sys.platform.startswith("linux"):
        done = subprocess.run([cp, "-a", "--sparse=always", "--reflink=auto", str(src), str(dst)],
                              capture_output=True, check=False)
        if done.returncode == 0:
            return
        shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)


# The catch-up before a swap goes in rounds until at most this many points are left for the
# swap to replay (it holds reads and writes off meanwhile), or for at most this many rounds.
CATCH_UP_LEFT = 2_000
CATCH_UP_ROUNDS = 8


def points_of(recorded: Sequence[tuple[str, Any]]) -> int:
    """How many points recorded writes touch (an upsert entry is a whole batch)."""
    return sum(len(item) if kind == "upsert" else 1 for kind, item in recorded)


def catch_up(work: Path,
             pending: Callable[[int], Sequence[tuple[str, Any]] | None]) -> int:
    """Replay into the optimized copy ``work`` the writes recorded so far, in rounds: what was
    written during one round is replayed in the next, until few are left, so the swap replays
    only those. During a bulk import one round took 42 s at 300,000 notes, and the writes that
    came in meanwhile were left to the swap: a 30 s stall of every search (reopening the
    shard is the rest of a swap: 26 s at 1,000,000 notes). ``pending(n)`` gives the
    recorded writes after the first ``n`` (None: the run was abandoned). Returns how many
    recorded writes were replayed."""
    done = 0
    shard: Any = None
    try:
        for _ in range(CATCH_UP_ROUNDS):
            new = pending(done)
            if not new:
                break
            if shard is None:
                shard = qe.EdgeShard.load(str(work))
            _replay(shard, new)
            done += len(new)
            if points_of(new) <= CATCH_UP_LEFT:
                break
        if shard is not None:
            shard.flush()
    finally:
        if shard is not None:
            shard.close()
    return done


def _replay(shard: Any, recorded: Sequence[tuple[str, Any]]) -> None:
    """Apply recorded writes in order; runs of upserts go as one batch (an id seen twice
    starts a new batch, so the later write still wins)."""
    batch: list[Any] = []
    ids: set[str] = set()

    def send() -> None:
        if batch:
            shard.update(qe.UpdateOperation.upsert_points(list(batch)))
            batch.clear()
            ids.clear()

    for kind, item in recorded:
        if kind == "upsert":
            for pid, point in item:
                if pid in ids:
                    send()
                batch.append(point)
                ids.add(pid)
        else:
            send()
            shard.update(item)
    send()


class _SwapLock:
    """Many readers, or the one swap: reads never wait on each other, only on a swap."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._swapping = False

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            while self._swapping:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._swapping:
                self._cond.wait()
            self._swapping = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()
