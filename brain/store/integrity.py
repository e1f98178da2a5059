"""The store checks itself at start against records kept outside it; writes check free space.

Why outside: a store that lost its files also loses anything kept inside it (the meta point
included), and would then look like a new one. So the brain keeps ``store_manifest.json``
next to the store, holding a *lower bound* of the store's point count, and checks at start:

- the store is there at all when the data dir shows a brain lived here (manifest, graph
  cache or the sqlite records);
- the store holds at least the recorded number of points;
- the graph cache names no more notes than the store holds (notes are never hard-deleted:
  retired ones leave a tombstone, so cache nodes <= notes + tombstones);
- a sample of points has finite, unit-norm dense vectors (Qdrant normalises cosine vectors
  on write) and payloads that decode.

The bound stays a lower bound across a ``kill -9`` at any instant, so a crash never raises a
false alarm: an upsert records the new count *after* the store has it (a crash in between
leaves the record low), and a delete lowers the record *before* touching the store.

Free space: Qdrant Edge memory-maps sparse files; a page written on a full disk kills the
process with SIGBUS. Every write first checks ``statvfs`` against ``[storage] min_free_mb`` and
raises ``DiskFull`` instead, and so does opening the store.
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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from brain.errors import DiskFull, StoreDamaged, StoreError, StoreLocked
from brain.store import recall_key
from brain.store.meta import META_ID
from brain.store.snapshot_catalog import list_snapshots
from brain.vector_store.base import (
    Filter,
    Hit,
    Hold,
    IndexState,
    MatchAny,
    Point,
    SparseVector,
    StoreInfo,
)

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
    path = getattr(store, "path", None)
    if path is None or not Path(path).is_dir():
        return 0
    return sum(f.stat().st_blocks * 512 for f in Path(path).rglob("*") if f.is_file())


def space_to_open(store: Any) -> int:
    """Bytes opening ``store`` may take beyond the margin: a new embedded shard's files."""
    path = getattr(store, "path", None)
    if path is None or (Path(path).is_dir() and any(Path(path).iterdir())):
        return 0
    return CREATE_BYTES


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
    path = getattr(store, "path", None)
    if path is not None:
        return path_location(path, home)
    where = str(getattr(store, "_location", ""))
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
                        **details)


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
    path = getattr(store, "path", None)
    if path is None or (Path(path).is_dir() and any(Path(path).iterdir())):
        return
    aside = getattr(store, "aside_path", None)
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
    path = getattr(store, "path", None)
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
            # Payloads: reading them is the check (a scribbled one fails to decode above);
            # their fields are not, since older brains wrote notes without ``kind``.
            fault = _vector_fault(p.dense)
            if fault is not None:
                raise _damaged(home, f"{fault} (point {p.id})", point=p.id)
            checked += 1
    return checked


# ------------------------------------------------------------------------------ the wrapper
class GuardedStore:
    """The store as the brain uses it: every write checks free space, is serialised, keeps the
    manifest's lower bound and each note's recall key, and can be paused (snapshots copy
    the files meanwhile)."""

    def __init__(self, inner: Any, space: SpaceGuard, manifest: Manifest) -> None:
        self.inner = inner
        self.space = space
        self.manifest = manifest
        self.backend = inner.backend
        self._lock = threading.RLock()
        self.writes = 0  # write batches since open: a snapshot is skipped when nothing changed
        self.snapshot_writes: int | None = None  # ``writes`` at this process's last snapshot

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold every write while the block runs; a write already begun has finished."""
        with self._lock:
            yield

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold every write while the block runs, with the store flushed to its files."""
        with self.held():
            self.inner.flush()
            yield

    def _record(self, points: int) -> None:
        if points == self.manifest.points:
            return
        try:
            self.manifest.save(points, lazy=points > (self.manifest.points or 0))
        except OSError as exc:  # the record stays low: safe, only less precise
            log.warning("cannot update the store manifest: %s", exc)

    def _added(self, points: Sequence[Point]) -> int:
        """How many of ``points`` the store does not hold yet, found by id (ids only)."""
        ids = list({p.id for p in points})
        return len(ids) - len(self.inner.retrieve(ids, with_payload=False))

    def _wrote(self, known: int | None, change: int) -> None:
        """A write batch is done: count it, and move the record by ``change`` (with no record
        yet, to the store's count: the baseline)."""
        self.writes += 1
        if known is not None:
            self._record(known + change)
        elif self.manifest.location is not None:
            self._record(self.inner.count(None))

    # writes ----------------------------------------------------------------------------
    def upsert(self, points: Sequence[Point]) -> None:
        if not points:
            return
        with self._lock:
            self.space.check_write("write to the store")
            # The record grows by the ids this write adds: counting the store after every
            # write read all its points (142 of 212 ms per add_memory at 1,000,000 notes).
            # Writes are serialised here, so the record stays a lower bound.
            known = self.manifest.points
            added = 0 if known is None else self._added(points)
            # Each note's recall key is computed from the payload it is written with, in the
            # same write: never stale, never set by a caller (brain/store/recall_key.py).
            self.inner.upsert(recall_key.stamped(points))
            self._wrote(known, added)

    def _delete(self, gone: Callable[[], int], run: Callable[[], None]) -> None:
        """A delete lowers the record by what it removes *before* the store removes it."""
        with self._lock:
            self.space.check_write("delete from the store")
            known = self.manifest.points
            change = 0
            if known is not None:
                change = -min(known, gone())
                try:
                    self.manifest.save(known + change)
                except OSError as exc:
                    raise StoreError(f"cannot record a delete in {self.manifest.path}: "
                                     f"{exc}") from exc
            run()
            self._wrote(known, change)

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if not ids:
            return
        with self._lock:
            self.space.check_write("update the store")
            if list(ids) == [META_ID]:  # bookkeeping (a worker's last run) is not a change
                self.inner.set_payload(ids, payload)
                return
            if recall_key.INPUTS.isdisjoint(payload) and recall_key.FIELD not in payload:
                self.inner.set_payload(ids, payload)
            else:
                self._set_keyed(ids, payload)
            self.writes += 1

    def _set_keyed(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        """A change to what a recall key is computed from: each point's new key goes in the
        same write as the change (a crash between two writes would leave a forgotten note
        findable), one write per distinct key."""
        payload = {k: v for k, v in payload.items() if k != recall_key.FIELD}
        groups: dict[tuple[str, ...], list[str]] = {}
        found = self.inner.retrieve(list(dict.fromkeys(ids)))
        for p in found:
            groups.setdefault(tuple(recall_key.keys({**p.payload, **payload})), []).append(p.id)
        for want, group in groups.items():
            self.inner.set_payload(group, {**payload, recall_key.FIELD: list(want)})
        held = {p.id for p in found}
        missing = [i for i in ids if i not in held]
        if missing:  # as the store answers a change to points it does not hold
            self.inner.set_payload(missing, payload)

    def rekey(self, points: Sequence[Point]) -> int:
        """Write the recall key of each of ``points`` (as just read) whose stored key is not
        the one its payload gives; returns how many. The caller holds the writes
        (:meth:`held`), so the payloads are still the stored ones."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for p in points:
            want = recall_key.keys(p.payload)
            if p.payload.get(recall_key.FIELD, []) != want:
                groups.setdefault(tuple(want), []).append(p.id)
        with self._lock:
            for key, group in groups.items():
                self.space.check_write("update the store")
                self.inner.set_payload(group, {recall_key.FIELD: list(key)})
        if groups:
            self.writes += 1
        return sum(len(g) for g in groups.values())

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        unique = list(set(ids))
        self._delete(lambda: len(self.inner.retrieve(unique, with_payload=False)),
                     lambda: self.inner.delete(ids))

    def delete_by_filter(self, flt: Filter) -> None:
        self._delete(lambda: int(self.inner.count(flt)), lambda: self.inner.delete_by_filter(flt))

    def ensure_indexes(self) -> int:
        with self._lock:
            self.space.check_write("index the store")
            return int(self.inner.ensure_indexes())

    def index_state(self) -> IndexState:
        state: IndexState = self.inner.index_state()
        return state

    def rebuild_index(self, name: str) -> None:
        with self._lock:
            self.space.check_write("index the store")
            self.inner.rebuild_index(name)

    def set_quantization(self, mode: str, hold: Hold | None = None) -> dict[str, Any]:
        """Like optimize: the rebuild works on a copy of an embedded shard."""
        self.space.require("rebuild the store", extra=store_bytes(self.inner))
        return dict(self.inner.set_quantization(mode, hold or self.paused))

    def optimize(self, hold: Hold | None = None) -> bool:
        """Optimize with writes (and snapshots) held off only for its copy and swap steps."""
        # The copy of an embedded shard needs its size again on disk.
        self.space.require("optimize the store", extra=store_bytes(self.inner))
        return bool(self.inner.optimize(hold or self.paused))

    # reads (explicit for the type checker; everything else passes through) -----------
    def retrieve(self, ids: Sequence[str], with_vectors: bool = False,
                 with_payload: bool = True) -> list[Point]:
        return list(self.inner.retrieve(ids, with_vectors, with_payload))

    def query_dense(self, vector: Sequence[float], flt: Filter | None, limit: int,
                    exact: bool = False, fields: Sequence[str] | None = None) -> list[Hit]:
        return list(self.inner.query_dense(vector, flt, limit, exact, fields))

    def query_sparse(self, vector: SparseVector, flt: Filter | None, limit: int,
                     fields: Sequence[str] | None = None) -> list[Hit]:
        return list(self.inner.query_sparse(vector, flt, limit, fields))

    def scroll(self, flt: Filter | None, limit: int = 256, offset: str | None = None,
               with_vectors: bool = False) -> tuple[list[Point], str | None]:
        points, nxt = self.inner.scroll(flt, limit, offset, with_vectors)
        return list(points), nxt

    def count(self, flt: Filter | None = None) -> int:
        return int(self.inner.count(flt))

    def info(self) -> StoreInfo:
        info: StoreInfo = self.inner.info()
        return info

    def flush(self) -> None:
        self.inner.flush()

    def open(self, dimension: int) -> None:
        self.inner.open(dimension)

    def close(self) -> None:
        with self._lock:
            self.inner.close()
            try:
                self.manifest.flush()
            except OSError as exc:  # the file keeps a lower count: safe, only less precise
                log.warning("cannot update the store manifest: %s", exc)
