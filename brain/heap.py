"""Giving a process's idle memory back to the system: the C heap's free pages, and the store
files' pages the process has mapped but does not use.

glibc keeps memory a process has freed for its own reuse, so a resident size grows with the
largest burst of work and stays there: after a bulk import of 100,000 notes it kept 2.0 GB
(RSS 2.9 GB, 0.9 GB after a trim), and an embedding batch leaves its activations
(BENCHMARKS.md).

Qdrant Edge memory-maps its files and, on open, reads every page of its writable segment's
files in: the payload indexes' preallocated page files (4 MB each, 28 indexes), the vector
chunk (32 MB), the WAL. Those pages count in the server's resident size (130 of its 455 MB
at 1,000 notes) though the data in them is a few MB. The mappings are shared file mappings,
so dropping a page from the process (``madvise(MADV_DONTNEED)``) loses nothing: the next read
of it maps it again from the page cache, where the kernel keeps or evicts it like any cached
file. A store registers its directory with :func:`watch_files`; :func:`release` drops those
pages wherever the process gives memory back (after an index run's swap, after embedding
batches stop, after the store opens), and :func:`touch` has them dropped, and the heap
trimmed, when tool calls stop for a second.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

MADV_DONTNEED = 4

_roots: set[str] = set()
_lock = threading.Lock()
# Held while the watched mappings are read from /proc/self/maps and advised, and by the
# store around every call that can unmap one of them (close, a swap, a reload, a write or
# flush: Edge grows, rotates and retires its files there). Without it a mapping could go
# between the read and the advice and its addresses be reused by the heap or a thread
# stack, which MADV_DONTNEED would zero: a crash (seen once in the suite) or worse.
_maps_lock = threading.RLock()


def mapping_change() -> threading.RLock:
    """The lock a caller holds while it may unmap a watched file (``with heap.mapping_change():
    shard.close()``); :func:`release_files` never advises a mapping while it is held."""
    return _maps_lock


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


def watch_files(root: Path) -> None:
    """Let :func:`release` drop the pages of ``root``'s files this process has mapped."""
    with _lock:
        _roots.add(str(Path(root).resolve()) + "/")


def unwatch_files(root: Path) -> None:
    with _lock:
        _roots.discard(str(Path(root).resolve()) + "/")


def release_files() -> int:
    """Drop the resident pages of the watched roots' shared file mappings; returns how many
    mappings were released. Private mappings are never touched (their written pages exist
    nowhere else)."""
    with _lock:
        roots = tuple(_roots)
    libc = _libc()
    if not roots or libc is None:
        return 0
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    released = 0
    with _maps_lock:
        with _lock:  # unwatched meanwhile (a store closed): its mappings are gone
            roots = tuple(_roots)
        if not roots:
            return 0
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
                lines = maps.readlines()
        except OSError:
            return 0
        for line in lines:
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or parts[1][3:4] != "s" or not parts[5].startswith(roots):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if madvise(lo, hi - lo, MADV_DONTNEED) == 0:
                released += 1
    return released


class _IdleRelease:
    """Drops the watched files' pages, and trims the C heap, once the process has been idle
    ``IDLE_S`` after its last :func:`touch` (a tool call): the pages a burst of searches
    mapped in (the vectors, payloads and index pages they read, 50 MB at 10,000 notes) stay
    in the page cache, so the next search maps them again from there (10.9 vs 11.1 ms p50 at
    10,000 notes, measured with a release before every other search). The heap a burst of
    searches freed stays with glibc otherwise: 200 searches at 10,000 notes left anon memory
    30 MB higher, 21 MB of it free heap a trim gives back (BENCHMARKS.md, "Footprint, round
    four").
    One thread, started on first use, wakes twice per ``IDLE_S``; a release runs once per
    idle spell."""

    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s
        self._last = 0.0
        self._pending = False
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def touch(self) -> None:
        self._last = time.monotonic()
        self._pending = True
        if self._thread is None:
            with self._start:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="idle-release",
                                                    daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.idle_s / 2)
            if self._pending and time.monotonic() - self._last >= self.idle_s:
                self._pending = False
                settle_if_due(full=True)
                release()
            elif self._pending and not calls_in_flight():
                # Calls keep coming (an agent at work, no spell of IDLE_S): settle between
                # two of them, so the collector's own full runs walk only what came since.
                # A full settle counts as one of either kind: the other is then not due.
                settle_if_due(full=True, every_s=FULL_UNDER_LOAD_S)
                settle_if_due(full=False)


# A server at rest between an agent's turns gives its mapped store pages back after this
# long; the cost is a page-cache lookup per page the next search reads (above).
IDLE_S = 1.0
_idle = _IdleRelease(IDLE_S)


def touch() -> None:
    """Mark activity (a tool call): the store's mapped pages are dropped once it stops."""
    _idle.touch()


_probes: dict[int, Callable[[], int]] = {}


def watch_calls(key: int, in_flight: Callable[[], int]) -> None:
    """Let the settles tell whether a tool call is in flight: ``in_flight()`` counts them
    (a Brain's gate); ``key`` names the probe for :func:`unwatch_calls`."""
    with _lock:
        _probes[key] = in_flight


def unwatch_calls(key: int) -> None:
    with _lock:
        _probes.pop(key, None)


def calls_in_flight() -> int:
    with _lock:
        probes = tuple(_probes.values())
    return sum(p() for p in probes)


_settle_lock = threading.Lock()
_last_settle = -1e9  # any settle
_last_full = -1e9  # a full one (unfrozen first)
# The least time between two settles that heavy work asks for (:func:`settle_if_due`).
SETTLE_EVERY_S = 30.0
# Under calls that never pause for IDLE_S, a full settle (the garbage among frozen objects)
# still runs this often, between two calls.
FULL_UNDER_LOAD_S = 300.0


def settle(full: bool = True) -> None:
    """Collect the cyclic garbage now, while no call waits, and keep what survives out of
    later collections (``gc.freeze``). A full collection walks every tracked object, ~150,000
    once the server has loaded (75-80 ms on this machine's 2 CPUs), and the collector runs
    one whenever enough new objects have outlived two younger collections: during an
    ingest that was a stop of every thread, a tool call's included, of ~100 ms, 5-6 times a
    minute (the tail of search_memory during heavy work, BENCHMARKS.md "Tool calls during
    heavy work"); with the survivors frozen it walks only what came since. ``full`` first
    unfreezes, so garbage among the frozen objects is collected too: the idle spells do
    that (when tool calls stop for ``IDLE_S``); heavy work between its batches, when no
    call is in flight, settles without it (:func:`settle_if_due`), and its garbage among
    the frozen waits for the next idle spell."""
    with _settle_lock:
        _settle_locked(full)


def _settle_locked(full: bool) -> None:
    global _last_settle, _last_full
    if full:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
    _last_settle = time.monotonic()
    if full:
        _last_full = _last_settle


def settle_if_due(full: bool = False, every_s: float = SETTLE_EVERY_S) -> None:
    """:func:`settle` when the last one of its kind is ``SETTLE_EVERY_S`` old (checked under
    the lock, so two threads never settle back to back): without unfreezing after the
    model's warm-up (the loaded process's objects) and between two batches of heavy work
    (what its first calls imported and built); ``full`` at an idle spell, so a server idling
    between an agent's turns walks all its objects at most once per ``SETTLE_EVERY_S``, and
    heavy work's settles never put the full one off. Between the calls of an agent at work
    (no idle spell), the idle thread settles too, when no call is in flight: without
    unfreezing every ``SETTLE_EVERY_S``, fully every ``FULL_UNDER_LOAD_S``."""
    with _settle_lock:
        last = _last_full if full else _last_settle
        if time.monotonic() - last >= every_s:
            _settle_locked(full)


def release() -> None:
    """glibc's ``malloc_trim(0)`` and :func:`release_files`; a no-op where there is no
    glibc."""
    libc = _libc()
    if libc is not None:
        try:
            libc.malloc_trim(0)
        except AttributeError:
            pass
    release_files()


# The share of the memory the system reports available that a store's warm-up may ask to be
# read into the page cache (page cache, not this process's resident memory).
WARM_SHARE = 0.25


def _available_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def warm_files(root: Path, budget: int | None = None) -> int:
    """Ask the kernel to read ``root``'s files (not its WAL, nor files mostly of holes) into
    the page cache, smallest first (indexes, then vectors), up to ``budget`` bytes (default: ``WARM_SHARE`` of the available memory);
    the bytes asked for. A restarted server's first searches otherwise read their pages from
    the disk one fault at a time: at 1,000,000 notes, on a machine that had evicted the store
    from its cache, search_memory p50 53-55 ms against 26-30 ms with the store cached
    (BENCHMARKS.md). Advice only: nothing is mapped or held, the kernel evicts these pages
    like any cached file's, and the call reads nothing itself."""
    if not hasattr(os, "posix_fadvise"):
        return 0
    left = int(_available_bytes() * WARM_SHARE) if budget is None else budget
    files: list[tuple[int, str]] = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "wal"]  # replayed at open, never read by a search
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            # A file mostly of holes is one Edge preallocated (its load reads those in itself):
            # asking for it would fill the cache with zeros, ~0.6 s for a new store's 317 MB.
            if st.st_blocks * 512 >= st.st_size // 2:
                files.append((st.st_size, path))
    asked = 0
    for size, path in sorted(files):
        if size > left:
            break
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, size, os.POSIX_FADV_WILLNEED)
        except OSError:
            continue
        finally:
            os.close(fd)
        left -= size
        asked += size
    return asked


def warm_in_background(root: Path) -> threading.Thread:
    """:func:`warm_files` on a daemon thread (an open does not wait for the disk)."""

    def run() -> None:
        t0 = time.monotonic()
        asked = warm_files(root)
        log.debug("asked for %.0f MB of %s to be cached in %.2f s", asked / 2**20, root,
                  time.monotonic() - t0)

    thread = threading.Thread(target=run, name="store-warm", daemon=True)
    thread.start()
    return thread
