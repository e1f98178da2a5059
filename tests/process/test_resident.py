"""The store's mapped file pages are given back (brain/heap.py) without losing a byte."""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from brain import heap
from brain.embedding.bm25 import BM25Encoder
from brain.vector_store import Match, Point
from brain.vector_store.base import Filter
from brain.vector_store.edge import EdgeStore
from tests.timing import HANG_S

DIM = 16
bm25 = BM25Encoder()


def _mapped_rss_kb(root: Path) -> int:
    """Resident kB of this process's mappings of files under ``root`` (/proc/self/smaps)."""
    prefix, inside, total = str(root.resolve()) + "/", False, 0
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            head = line.split(maxsplit=5)
            if "-" in head[0] and len(head) >= 5 and head[0][0] != "R":
                inside = len(head) == 6 and head[5].strip().startswith(prefix)
            elif inside and line.startswith("Rss:"):
                total += int(head[1])
    return total


def _points(n: int, offset: int = 0) -> list[Point]:
    rng = np.random.default_rng(offset)
    out = []
    for i in range(offset, offset + n):
        v = rng.normal(size=DIM)
        out.append(Point(str(uuid.UUID(int=i + 1)), {"kind": "note", "project": f"p{i % 3}",
                                                     "n": i},
                         (v / np.linalg.norm(v)).tolist(), bm25.document(f"note number {i}")))
    return out


def _reopened(path: Path, n: int) -> EdgeStore:
    """A store at ``path`` holding ``n`` points, closed and opened again (the load whose
    pages and warm-up the tests look at)."""
    store = EdgeStore(path)
    store.open(DIM)
    store.upsert(_points(n))
    store.close()
    store = EdgeStore(path)
    store.open(DIM)
    return store


def test_an_open_store_holds_few_of_its_mapped_pages_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    store = _reopened(path, 300)  # Edge read ~170 MB of preallocated pages in at the open
    try:
        assert _mapped_rss_kb(path) < 16 * 1024
        # Every point is still there and searchable, and a write after the release lands.
        hits = store.query_dense(_points(1, offset=7)[0].dense or [], Filter(
            must=(Match("project", "p1"),)), limit=5)
        assert len(hits) == 5 and all(h.payload["project"] == "p1" for h in hits)
        store.upsert(_points(10, offset=300))
        heap.release_files()
        assert store.count() == 310
        assert {p.payload["n"] for p in store.retrieve([_points(1, offset=305)[0].id])} == {305}
    finally:
        store.close()
    store = EdgeStore(path)
    store.open(DIM)
    try:
        assert store.count() == 310  # what was written around the releases is durable
    finally:
        store.close()


def test_private_mappings_and_unwatched_files_are_left_alone(tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    data = watched / "data.bin"
    data.write_bytes(b"\0" * mmap.PAGESIZE * 4)
    with open(data, "r+b") as fh:
        private = mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_PRIVATE)
        shared = mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_SHARED)
    try:
        private[:5] = b"local"  # exists only in this process: a release would zero it
        shared[mmap.PAGESIZE : mmap.PAGESIZE + 6] = b"shared"
        heap.watch_files(watched)
        assert heap.release_files() >= 1
        assert private[:5] == b"local"
        assert shared[mmap.PAGESIZE : mmap.PAGESIZE + 6] == b"shared"  # read back from the file
        heap.unwatch_files(watched)
        private.close()
        assert shared[0] == 0  # maps a page again
        heap.release_files()
        assert _mapped_rss_kb(watched) > 0  # no longer watched: kept
    finally:
        heap.unwatch_files(watched)
        private.close()
        shared.close()


def test_pages_a_burst_mapped_are_given_back_once_calls_stop(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    store = EdgeStore(path)
    store.open(DIM)
    try:
        store.upsert(_points(2000))  # the WAL's and the segment's pages are mapped in
        for p in _points(50, offset=3000):
            store.query_dense(p.dense or [], None, limit=10)
        busy = _mapped_rss_kb(path)
        assert busy > 512
        heap.touch()
        time.sleep(heap.IDLE_S * 2.5)
        assert _mapped_rss_kb(path) < busy / 4
        assert store.count() == 2000
    finally:
        store.close()


def _rss_anon_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_heap_a_burst_freed_is_given_back_once_calls_stop() -> None:
    """Free heap glibc keeps after a burst of calls (searches left ~21 MB at 10,000 notes)
    goes back to the system with the idle release."""
    chunks = [bytearray(60_000) for _ in range(2000)]  # ~120 MB from malloc, below mmap's
    last = chunks[-1]  # a live chunk at the top: glibc's own trim at free cannot shrink
    del chunks
    held = _rss_anon_mb()
    heap.touch()
    time.sleep(heap.IDLE_S * 2.5)
    assert _rss_anon_mb() < held - 60
    assert len(last) == 60_000


def test_a_release_waits_for_a_mapping_change(tmp_path: Path) -> None:
    """release_files never reads the maps or advises while a store may be unmapping."""
    done = threading.Event()
    heap.watch_files(tmp_path)
    try:
        with heap.mapping_change():
            worker = threading.Thread(target=lambda: (heap.release_files(), done.set()))
            worker.start()
            assert not done.wait(0.3)
        assert done.wait(10)
        worker.join()
    finally:
        heap.unwatch_files(tmp_path)


def test_releases_racing_store_closes_never_zero_reused_memory(tmp_path: Path) -> None:
    """Stores open, write and close while another thread releases back to back; memory the
    process allocates after each close (where the store's mappings were) keeps its bytes.
    A release that advised a mapping gone since it read /proc/self/maps would zero it."""
    stop = threading.Event()
    releases = [0]

    def releaser() -> None:
        while not stop.is_set():
            heap.release_files()
            releases[0] += 1

    worker = threading.Thread(target=releaser, daemon=True)
    worker.start()
    kept: list[np.ndarray] = []
    try:
        for round_ in range(6):
            store = EdgeStore(tmp_path / f"shard{round_}")
            store.open(DIM)
            store.upsert(_points(50, offset=round_ * 50))
            store.close()
            for _ in range(8):  # large blocks are mmap'd: they take the freed addresses
                kept.append(np.full(4 * 1024 * 1024, round_ + 1, dtype=np.uint8))
            time.sleep(0.05)
    finally:
        stop.set()
        worker.join(10)
    assert releases[0] > 6
    for i, block in enumerate(kept):
        assert block.min() == block.max() == i // 8 + 1, f"block {i} was changed"


def _cached_pages(path: Path) -> int:
    """Pages of ``path`` in the page cache (mincore on a fresh read-only mapping)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        vec = (ctypes.c_ubyte * pages)()
        try:
            assert libc.mincore(ctypes.c_void_p(addr), size, vec) == 0
        finally:
            libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)
    return sum(b & 1 for b in vec)


def _evicted(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_warming_asks_for_the_smallest_files_first_within_a_budget_and_skips_the_wal(
        tmp_path: Path) -> None:
    root = tmp_path / "shard"
    (root / "segments" / "a").mkdir(parents=True)
    (root / "wal").mkdir()
    sizes = {"segments/a/links.bin": 1 << 20, "segments/a/vectors.dat": 4 << 20,
             "segments/idx.bin": 256 << 10, "wal/open-1": 2 << 20}
    for name, size in sizes.items():
        (root / name).write_bytes(os.urandom(size))
        _evicted(root / name)
    assert all(_cached_pages(root / name) < 16 for name in sizes)
    with open(root / "segments/a/preallocated.dat", "wb") as fh:  # holes: never asked for
        fh.truncate(512 << 10)

    # A budget that holds the two smaller segment files but not the vectors.
    assert heap.warm_files(root, budget=2 << 20) == (256 << 10) + (1 << 20)
    deadline = time.monotonic() + HANG_S
    while _cached_pages(root / "segments/a/links.bin") < 256 and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel reads ahead asynchronously
    assert _cached_pages(root / "segments/a/links.bin") == 256
    assert _cached_pages(root / "segments/idx.bin") == 64
    assert _cached_pages(root / "segments/a/vectors.dat") < 16
    assert _cached_pages(root / "wal/open-1") < 16
    assert _cached_pages(root / "segments/a/preallocated.dat") == 0
    assert heap.warm_files(root, budget=0) == 0


def test_an_open_store_warms_its_files_on_a_thread(tmp_path: Path) -> None:
    store = _reopened(tmp_path / "shard", 50)
    try:
        assert store._warming is not None
        store._warming.join(10)
        assert not store._warming.is_alive()
        assert store.count() == 50
    finally:
        store.close()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_settle_keeps_survivors_out_of_collections_until_an_idle_one() -> None:
    """heap.settle: survivors are frozen (later collections skip them); garbage among them
    waits for a full settle (an idle spell), which collects it."""
    import gc
    import weakref

    try:
        obj = _Cycle()
        ref = weakref.ref(obj)
        heap.settle(full=False)  # heavy work's settle, between two batches
        assert gc.get_freeze_count() > 0
        del obj
        gc.collect()
        assert ref() is not None  # frozen: an ordinary collection does not walk it
        heap.settle(full=True)  # the idle spell's settle
        assert ref() is None
    finally:
        gc.unfreeze()


def test_heavy_work_settles_between_batches_only_when_due() -> None:
    """A background lane settles before a batch when no call is in flight and the last
    settle is SETTLE_EVERY_S old; not again right after."""
    import gc

    import numpy as np

    from brain.embedding.lanes import Lanes

    try:
        gc.unfreeze()
        heap._last_settle = -1e9  # noqa: SLF001 - as after a long busy stretch
        frozen: list[int] = []

        def embed(part: list[str]) -> np.ndarray:
            frozen.append(gc.get_freeze_count())
            gc.unfreeze()
            return np.zeros((len(part), 2), dtype=np.float32)

        Lanes().embed("files", embed, ["a", "b"], limit=1)  # two batches
        assert frozen[0] > 0 and frozen[1] == 0, frozen
    finally:
        gc.unfreeze()


def test_calls_without_an_idle_spell_are_settled_between_when_none_is_in_flight(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent at work calls every few tens of ms, so no idle spell comes: the idle thread
    settles between two calls (when the registered probe counts none in flight), not while
    one is in flight, and fully only every FULL_UNDER_LOAD_S."""
    import gc
    import weakref

    from tests.timing import HANG_S

    release = heap._IdleRelease(idle_s=0.4)  # noqa: SLF001 - its own thread, not the process's
    in_flight = [1]
    heap.watch_calls(-7, lambda: in_flight[0])
    monkeypatch.setattr(heap, "_last_settle", -1e9)
    monkeypatch.setattr(heap, "_last_full", time.monotonic())  # a full one just ran

    def calls_until(done: Callable[[], bool], at_most: int) -> None:
        """A call every 50 ms (never an idle spell) until ``done()``, at most ``at_most``
        calls or HANG_S."""
        end = time.monotonic() + HANG_S
        for _ in range(at_most):
            if done() or time.monotonic() > end:
                return
            release.touch()
            time.sleep(0.05)

    try:
        gc.unfreeze()
        obj = _Cycle()
        ref = weakref.ref(obj)
        calls_until(lambda: False, 24)  # ~6 wake-ups of the thread, a call always in flight
        assert gc.get_freeze_count() == 0  # never while a call was in flight
        in_flight[0] = 0
        calls_until(lambda: gc.get_freeze_count() > 0, 10**6)
        assert gc.get_freeze_count() > 0  # settled between two calls
        del obj
        gc.collect()
        assert ref() is not None  # frozen, and no full settle: FULL_UNDER_LOAD_S not reached
        monkeypatch.setattr(heap, "_last_full", -1e9)
        calls_until(lambda: ref() is None, 10**6)
        assert ref() is None  # the full settle under load collected it
    finally:
        heap.unwatch_calls(-7)
        gc.unfreeze()
