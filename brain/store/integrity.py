"""The store checks itself at start against records kept outside it; writes check free space.

Why outside: a store that lost its files also loses anything kept inside it (the meta point
included), and would then look like a new one. So the brain keeps ``store_manifest.json``
next to the store, holding a *lower bound* of the store's point count, and checks at start:

- the store is there at all when the data dir shows a brain lived here (manifest, graph
  cache or the sqlite records);
- the store holds at least the recorded number of points;
- the graph cache names no more notes than the store holds (notes are never hard-deleted:
  retired ones leave a tombstone, so cache nodes <= notes + tombstones);
- the link graph holds the links the notes' payloads name: the cache is rebuilt from the
  store, with a warning naming it, when it is older than the store's last link write or
  lacks links that notes hold (:func:`load_graph`);
- a sample of points has finite, unit-norm dense vectors (Qdrant normalises cosine vectors
  on write) and payloads that decode.

The bound stays a lower bound across a ``kill -9`` at any instant, so a crash never raises a
false alarm: an upsert records the new count *after* the store has it (a crash in between
leaves the record low), and a delete lowers the record *before* touching the store.

Free space: Qdrant Edge memory-maps sparse files; a page written on a full disk kills the
process with SIGBUS. Every write first checks ``statvfs`` against ``[storage] min_free_mb`` and
raises ``DiskFull`` instead, and so does opening the store.

The layer of the store stack that keeps the record and checks the space as writes go on is
brain/store/guarded.py (``GuardedStore``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from brain.errors import DiskFull, StoreDamaged, StoreError, StoreLocked
from brain.store.meta import META_ID
from brain.store.snapshot_catalog import list_snapshots
from brain.vector_store.base import (
    Filter,
    Match,
    MatchAny,
    scroll_all,
)
from brain.vector_store.forwarding import backend_of

log = logging.getLogger(__name__)

MANIFEST = "store_manifest.json"
LAZY_S = 2.0  # how often, at most, a growing count is rewritten (Manifest.save)
# Files whose presence shows that a brain lived in a data dir (besides the manifest).
BRAIN_MARKERS = ("sources.db", "files/files.db")
SAMPLE_WINDOWS = 4  # scroll windows read at start, each from a random point id
SAMPLE_SIZE = 32
NORM_TOLERANCE = 1e-2
# Within one operation (one thread), writes that follow a passed check may go on down to half
# the margin: an add_memory is several store writes, and refusing its third would half-write it.
GRACE_S = 5.0
# Points that are never graph nodes. Everything else may be one: notes, retired tombstones,
# and notes of older brains written without a ``kind`` (a new kind only loosens the check).
NOT_NODES = ("meta", "file", "chunk", "doc", "doc_chunk", "hype")
# Creating an Edge shard (segment, WAL, ~25 payload indexes) takes ~2 MB on ext4 but ~52 MB
# on tmpfs, which allocates every page Edge preallocates: measured, rounded up.
CREATE_BYTES = 64_000_000
NOTES = Filter(must=(Match("kind", "note"),))
# Up to this many notes, the start check reads every note's links against the graph (about
# 0.1 s a thousand notes on Edge); above, SAMPLE_WINDOWS windows of LINK_SAMPLE notes from
# random points.
LINK_CHECK_ALL = 10_000
LINK_SAMPLE = 64


# ------------------------------------------------------------------------------ free space
def free_bytes(path: Path) -> int:
    """Bytes available to this user on the filesystem holding ``path`` (or its parent)."""
    p = Path(path)
    while not p.exists() and p.parent != p:
        p = p.parent
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def store_bytes(store: Any) -> int:
    """Bytes the files of an embedded store take on disk (0 for a server)."""
    path = getattr(backend_of(store), "path", None)
    if path is None or not Path(path).is_dir():
        return 0
    return sum(f.stat().st_blocks * 512 for f in Path(path).rglob("*") if f.is_file())


def space_to_open(store: Any) -> int:
    """Bytes opening ``store`` may take beyond the margin: a new embedded shard's files, or
    what an existing shard's files grow by as Edge maps them (:func:`space_to_reopen`)."""
    path = getattr(backend_of(store), "path", None)
    if path is None:
        return 0
    if Path(path).is_dir() and any(Path(path).iterdir()):
        return space_to_reopen(Path(path))
    return CREATE_BYTES


# Edge's payload index files are sparse (a 4 MiB page file and a 1 MiB tracker per index,
# ~2 KB of them on disk). On tmpfs (and ramfs), where a mapped page is allocated as soon as it
# is touched, even read, opening a shard fills those holes: a 5-note brain took 140 MB on
# its first reopen (measured), and a page touched on a full tmpfs is a SIGBUS. On a disk
# filesystem reading a hole allocates nothing, so the holes are not counted there.
FILLS_HOLES = ("tmpfs", "ramfs")


def space_to_reopen(shard: Path) -> int:
    """Bytes opening an existing shard may take: on a filesystem that fills holes when they
    are mapped, the holes of its payload index files (0 once filled); else 0."""
    if fs_type(shard) not in FILLS_HOLES:
        return 0
    grow = 0
    for f in Path(shard).glob("segments/*/payload_index/*/*"):
        with contextlib.suppress(OSError):
            st = f.stat()
            grow += max(0, st.st_size - st.st_blocks * 512)
    return grow


def fs_type(path: Path) -> str:
    """The type of the filesystem holding ``path`` (Linux: the longest mount point above it
    in /proc/self/mounts); "" where it cannot be told."""
    try:
        mounts = Path("/proc/self/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    real = os.path.realpath(path)
    best, kind = "", ""
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


class SpaceGuard:
    """Refuses work when the data dir's filesystem has less than the margin free."""

    def __init__(self, path: Path, min_free_mb: float) -> None:
        self.path = Path(path)
        self.margin = int(min_free_mb * 1e6)
        self._ok = threading.local()
        self._warned = 0.0

    def require(self, what: str, extra: int = 0) -> None:
        """Raise ``DiskFull`` unless ``extra`` bytes fit with the margin to spare."""
        free = free_bytes(self.path)
        if free - extra < self.margin:
            raise self._full(what, free, extra)

    def check_write(self, what: str) -> None:
        free = free_bytes(self.path)
        now = time.monotonic()
        if free >= self.margin:
            self._ok.at = now
            return
        if free >= self.margin // 2 and now - getattr(self._ok, "at", -GRACE_S) < GRACE_S:
            return  # finishing an operation that passed its check a moment ago
        raise self._full(what, free, 0)

    def _full(self, what: str, free: int, extra: int) -> DiskFull:
        need = f" plus {_mb(extra)} for this" if extra else ""
        err = DiskFull(
            f"cannot {what}: only {_mb(free)} free on the disk holding {self.path}; the brain "
            f"keeps {_mb(self.margin)} free{need} ([storage] min_free_mb, "
            "BRAIN__STORAGE__MIN_FREE_MB). Free some space; nothing was written.",
            free_bytes=free, min_free_bytes=self.margin,
        )
        now = time.monotonic()
        if now - self._warned > 60:  # one line a minute, not one per refused write
            self._warned = now
            log.warning("%s", err)
        return err


# ------------------------------------------------------------------------------ the record
def path_location(path: Path, home: Path) -> str:
    """An embedded store's name: its path inside the data dir (moving the dir keeps it)."""
    with contextlib.suppress(ValueError):
        return str(Path(path).resolve().relative_to(Path(home).resolve()))
    return str(path)


def store_location(store: Any, home: Path) -> str | None:
    """A stable name of the store's data; None for a store that keeps nothing (in memory)."""
    path = getattr(backend_of(store), "path", None)
    if path is not None:
        return path_location(path, home)
    where = str(getattr(backend_of(store), "_location", ""))
    if not where or where == "local:":
        return None
    return f"{where}/{getattr(store, 'collection', '')}"


class Manifest:
    """``<home>/store_manifest.json``: the store's location and a lower bound of its points."""

    def __init__(self, home: Path, location: str | None) -> None:
        self.path = Path(home) / MANIFEST
        self.location = location
        self.points: int | None = None  # the record (the file may lag behind a growth)
        self._written: int | None = None
        self._written_at = -LAZY_S

    def load(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("store manifest %s is unreadable (%s); starting a new one", self.path, exc)
            return None
        return data if isinstance(data, dict) else None

    def save(self, points: int, lazy: bool = False) -> None:
        """Record ``points``. ``lazy`` (a count that grew): the file is rewritten at most
        every ``LAZY_S`` (and by :meth:`flush`); a file that lags behind a growing store is
        still a lower bound, and the rewrite cost ~5 ms of an add_memory. A count that falls
        is always written before the store drops the points."""
        if self.location is None:
            return
        self.points = int(points)
        if lazy and time.monotonic() - self._written_at < LAZY_S:
            return
        self._write()

    def flush(self) -> None:
        if self.location is not None and self.points is not None and \
                self.points != self._written:
            self._write()

    def _write(self) -> None:
        assert self.points is not None
        data = {"version": 1, "location": self.location, "points": self.points,
                "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, self.path)  # atomic: a crash leaves the old record or the new one
        self._written, self._written_at = self.points, time.monotonic()


# ------------------------------------------------------------------------------ checks
def recovery_hint(home: Path) -> str:
    snaps = list_snapshots(home)
    newest = f"; newest: {snaps[-1]['name']} ({snaps[-1]['points']} points)" if snaps else \
        "; none exist yet, so restore a backup or an export of the data dir"
    return (f"Recover with `brain snapshots` then `brain restore NAME`{newest} (it keeps the "
            "damaged store aside). To serve what is left instead, run `brain accept-loss`.")


def _damaged(home: Path, what: str, **details: Any) -> StoreDamaged:
    return StoreDamaged(f"the store at {home} lost data: {what}. {recovery_hint(home)}",
                        what=what, **details)


def probe(home: Path, store: Any, expected_points: int) -> str | None:
    """What is wrong with an opened store that should hold ``expected_points`` (a snapshot
    about to be restored), or None: its count, a sample of vectors and payloads, and every
    note's payload (a sample in a large store)."""
    try:
        found = int(_read(home, store.count, None))
        if found < expected_points:
            return f"{expected_points} points were recorded, {found} are there"
        check_sample(home, store)
        for _ in _linked_notes(home, store, None):
            pass
    except StoreDamaged as exc:
        return str(exc.details.get("what") or exc.message)
    return None


def _read(home: Path, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A read of the store; one that fails on its files is damage, with the recovery."""
    try:
        return fn(*args, **kwargs)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a Rust panic is a BaseException
        raise _damaged(home, f"reading points failed ({type(exc).__name__}: {exc})") from None


def check_present(home: Path, store: Any) -> None:
    """A missing embedded store is damage when the data dir shows a brain lived here."""
    path = getattr(backend_of(store), "path", None)
    if path is None or (Path(path).is_dir() and any(Path(path).iterdir())):
        return
    aside = getattr(backend_of(store), "aside_path", None)
    if aside is not None and Path(aside).is_dir():
        return  # an optimization's swap was interrupted: opening the store rolls it back
    home = Path(home)
    signs = [name for name in (MANIFEST, *BRAIN_MARKERS) if (home / name).exists()]
    manifest = Manifest(home, None).load()
    if manifest is not None and int(manifest.get("points", 0)) == 0:
        signs = [s for s in signs if s != MANIFEST]
    if signs:
        raise _damaged(home, f"the store directory {path} is missing, but {', '.join(signs)} "
                             "show a brain was kept here", expected="store", found="missing")


def open_store(home: Path, store: Any, dimension: int) -> None:
    """Open the store; an existing embedded shard that cannot be loaded is damage."""
    path = getattr(backend_of(store), "path", None)
    existing = path is not None and Path(path).is_dir() and any(Path(path).iterdir())
    try:
        store.open(dimension)
    except (KeyboardInterrupt, SystemExit, StoreLocked):
        raise
    except BaseException as exc:  # noqa: BLE001 - a Rust panic is a BaseException
        if not existing:
            raise
        detail = exc.message if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
        raise _damaged(home, f"its files cannot be loaded ({detail})") from None


def check_graph(home: Path, graph: Any, store: Any) -> None:
    """The graph cache, as loaded, names no more notes than the store holds. (A stale cache
    was rebuilt from the store instead: then the count check alone speaks.)"""
    nodes = len(graph.notes)
    notes = _read(home, store.count, Filter(must_not=(MatchAny("kind", NOT_NODES),)))
    if nodes > notes:
        raise _damaged(home, f"the graph cache {graph.path} knows {nodes} notes, the store "
                             f"holds {notes}", expected=nodes, found=notes)


def _linked_notes(home: Path, store: Any, seed: int | None) -> Any:
    """The note payloads the graph check reads: all of them in a small store, else samples.
    A note the index knows whose payload is gone is damage."""
    import random

    if _read(home, store.count, NOTES) <= LINK_CHECK_ALL:
        points: Any = scroll_all(store, NOTES)
    else:
        rnd = random.Random(seed)
        points = (p for _ in range(SAMPLE_WINDOWS) for p in store.scroll(
            NOTES, limit=LINK_SAMPLE, offset=str(uuid.UUID(int=rnd.getrandbits(128),
                                                           version=4)))[0])
    yield from _payloads(home, store, _read(home, list, points))


def _payloads(home: Path, store: Any, points: Any) -> Any:
    for p in points:
        if not p.payload:
            raise no_payload(home, store, p.id)
        yield p.payload


def load_graph(home: Path, graph: Any, store: Any, seq: int,
               seed: int | None = None) -> str | None:
    """Load the link graph's cache, or rebuild it from the store (the source of truth) when it
    is missing, stale or lacks links: its cache is older than the store's last link write
    (its sequence number is behind the store's: a crash between a link write and the
    cache's save), or notes read from the store hold links the cache has no edge for (the
    start check counts notes with links against the graph's edges). Returns the warning
    logged when links were rebuilt that the cache had lost, else None."""
    reason = None
    had_file = Path(graph.path).exists()
    if graph.load(seq):
        linked, missing = graph.missing_links(_linked_notes(home, store, seed))
        if not missing:
            log.info("graph cache loaded: %s", graph.stats())
            return None
        reason = (f"the graph cache {graph.path} lacks the links of {missing} of {linked} "
                  "notes with links read from the store")
    elif graph.stale_seq is not None:
        reason = (f"the graph cache {graph.path} is older than the store's last link write "
                  f"(cache seq {graph.stale_seq}, store seq {seq}), after a crash")
    elif not had_file:
        reason = f"the graph cache {graph.path} is missing"
    graph.rebuild(_payloads(home, store, scroll_all(store, NOTES)), seq)
    graph.save()
    stats = graph.stats()
    if reason is None or (reason.endswith("missing") and not stats["edges"]):
        log.info("graph rebuilt from the store: %s", stats)
        return None
    warning = (f"{reason}: rebuilt the link graph from the store ({stats['nodes']} notes, "
               f"{stats['edges']} links)")
    log.warning("%s", warning)
    return warning


def check_counts(home: Path, store: Any, manifest: Manifest) -> int:
    """Compare the store with its record; returns the store's point count."""
    found = int(_read(home, store.count, None))
    data = manifest.load()
    if data is None or data.get("location") != manifest.location:
        if data is not None:
            log.warning("store manifest names %s, the store is %s: recording a new baseline",
                        data.get("location"), manifest.location)
        manifest.save(found)
        return found
    expected = int(data.get("points", 0))
    if found < expected:
        raise _damaged(home, f"{expected} points were recorded, {found} are there",
                       expected=expected, found=found)
    if expected and not _read(home, store.retrieve, [META_ID]):
        # Its own record gone: a new one would be written and the graph rebuilt to match.
        raise _damaged(home, "the store's own meta record is gone", expected=expected,
                       found=found)
    # More than recorded is fine (a crash between a write and its record): writes from here
    # move the record from what is there.
    manifest.points = found
    return found


def _vector_fault(dense: Sequence[float] | None) -> str | None:
    if dense is None:
        return None
    if not all(math.isfinite(x) for x in dense):
        return "a dense vector holds NaN or infinity"
    norm = math.sqrt(sum(x * x for x in dense))
    if norm and abs(norm - 1.0) > NORM_TOLERANCE:
        return f"a dense vector has norm {norm:.3g} (cosine vectors are stored at norm 1)"
    return None


def payload_files(store: Any) -> list[str]:
    """The payload trackers of an embedded store's segments (where a point finds its payload)."""
    path = getattr(backend_of(store), "path", None)
    if path is None:
        return []
    return sorted(str(f) for f in Path(path).glob("**/payload_storage/tracker.dat"))


def no_payload(home: Path, store: Any, point: str) -> StoreDamaged:
    """The damage a point read without its payload is (its store's payload trackers named)."""
    files = payload_files(store)
    where = (f"the payload tracker {', '.join(files)} is damaged (truncated or overwritten)"
             if files else "the store's payload storage is damaged")
    return _damaged(home, f"point {point} answers no payload: {where}", point=point,
                    files=files)


def check_sample(home: Path, store: Any, seed: int | None = None) -> int:
    """Read a few random windows of points with vectors; returns how many were checked."""
    import random

    rnd = random.Random(seed)
    checked = 0
    offsets: list[str | None] = [None] + [str(uuid.UUID(int=rnd.getrandbits(128), version=4))
                                          for _ in range(SAMPLE_WINDOWS - 1)]
    for offset in offsets:
        points, _ = _read(home, store.scroll, None, limit=SAMPLE_SIZE, offset=offset,
                          with_vectors=True)
        for p in points:
            # Payloads: reading them is the check (a scribbled one fails to decode above), and
            # every point the brain writes has one (a damaged payload tracker answers none);
            # their fields are not, since older brains wrote notes without ``kind``.
            if not p.payload:
                raise no_payload(home, store, p.id)
            fault = _vector_fault(p.dense)
            if fault is not None:
                raise _damaged(home, f"{fault} (point {p.id})", point=p.id)
            checked += 1
    return checked
