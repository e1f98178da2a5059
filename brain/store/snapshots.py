"""Store snapshots: copies of the Edge shard to restore when the store is damaged.

qdrant-edge-py 0.9.0 can apply snapshots made by a Qdrant server (``unpack_snapshot``,
``update_from_snapshot``) but cannot make one. So a snapshot is a copy of the shard directory
taken while the brain's writes pause (``GuardedStore.paused``) with the shard flushed, plus
an online backup of the sqlite records (sources, files). The copy keeps the mmap files sparse
(``cp --sparse=always``): an empty shard is ~300 MB apparent, ~200 KB on disk.

Layout: ``<home>/snapshots/<name>/{shard/, sqlite/, snapshot.json}``; a snapshot is written
under a temporary name and renamed when complete, so a half-made one is never listed. The
``snapshot`` worker (``[workers.snapshot]``, registered by brain/app.py for an embedded
store) takes one on its interval when something changed and keeps the newest
``[storage] snapshots_keep``. ``brain restore NAME`` puts one back, with
the data dir not served, and keeps the replaced store aside as ``store.damaged-<time>``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from brain.errors import InvalidArgument, StoreDamaged, StoreError
from brain.store import sqlite_check
from brain.store.guarded import GuardedStore
from brain.store.integrity import Manifest, SpaceGuard, path_location, store_location
from brain.store.snapshot_catalog import INFO, list_snapshots, snapshots_dir
from brain.vector_store.base import Filter, Match, ShardFiles
from brain.vector_store.forwarding import backend_of

log = logging.getLogger(__name__)

# sqlite records kept with the store (relative to the data dir). The sqlite copy is taken
# first: records older than the store only make a later sync redo work, never skip it.
SQLITE = ("sources.db", "files/files.db")


def _disk_usage(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def _copy_tree(src: Path, dst: Path) -> None:
    res = subprocess.run(["cp", "-r", "--sparse=always", str(src), str(dst)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise StoreError(f"copying {src} to {dst} failed: {res.stderr.strip()}")


def _backup_sqlite(home: Path, target: Path) -> list[str]:
    done = []
    for rel in SQLITE:
        src = Path(home) / rel
        if not src.is_file():
            continue
        dst = target / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            with contextlib.closing(sqlite3.connect(src, timeout=30)) as a, \
                    contextlib.closing(sqlite3.connect(dst)) as b:
                a.backup(b)  # consistent while others write
                # The backup copies pages as they are: a page damaged since the start would
                # be kept, and found only when the snapshot is restored.
                sqlite_check.quick_check(b, src)
        except sqlite3.DatabaseError as exc:
            raise sqlite_check.typed(src, exc) from None
        done.append(rel)
    return done


def _check_sqlite(home: Path, name: str, src: Path, rels: list[str]) -> None:
    """The snapshot's SQLite copies pass their integrity check, or the restore is refused
    before anything is replaced (a start would refuse them)."""
    for rel in rels:
        try:
            sqlite_check.check_file(src / "sqlite" / rel)
        except StoreDamaged as exc:
            raise StoreDamaged(
                f"snapshot {name} is damaged: its copy of {rel} fails its check "
                f"({exc.details.get('problem') or exc}). Nothing was restored and the current "
                f"store was left as it was; {_other_way(home, name)}.",
                snapshot=name, what=f"{rel}: damaged",
            ) from None


def _other_way(home: Path, name: str) -> str:
    older = [s["name"] for s in list_snapshots(home) if s["name"] != name]
    return f"try an older one ({', '.join(older[-3:])})" if older else \
        "no other snapshot exists: restore a backup or an export of the data dir"


def _name(root: Path) -> str:
    base = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    name, n = base, 1
    while (root / name).exists():
        n += 1
        name = f"{base}-{n:02d}"
    return name


class StorageSection(Protocol):
    """``[storage]``: what snapshots read of it (on each use: tests and the CLI change it)."""

    @property
    def min_free_mb(self) -> float: ...

    @property
    def snapshots_keep(self) -> int: ...


def shard_of(store: GuardedStore) -> Path | None:
    """The Edge shard directory behind the store; None for a Qdrant server."""
    live = backend_of(store)
    return Path(live.path) if isinstance(live, ShardFiles) else None


class Snapshots:
    """Snapshots of one brain's store (``brain.store.snapshots``): take one now, or on a schedule."""

    def __init__(
        self, store: GuardedStore, home: Path, storage: StorageSection, model: Callable[[], str]
    ) -> None:
        self.store = store
        self.home = Path(home)
        self.storage = storage
        self.model = model  # the store's model, read when the snapshot is taken

    @property
    def available(self) -> bool:
        return shard_of(self.store) is not None

    def take(self) -> dict[str, Any]:
        """Snapshot the store now; returns the snapshot's description."""
        return take(self.store, self.home, self.model(), self.storage.min_free_mb,
                    self.storage.snapshots_keep)

    def worker(self) -> dict[str, Any]:
        """The ``snapshot`` worker: one snapshot when something was written since the last."""
        store = self.store
        if list_snapshots(self.home) and store.writes == store.snapshot_writes:
            return {"skipped": "nothing written since the last snapshot"}
        snap = self.take()
        store.snapshot_writes = snap["writes"]
        return {"snapshot": snap["name"], "points": snap["points"]}


def take(
    store: GuardedStore, home: Path, model: str, min_free_mb: float, keep: int
) -> dict[str, Any]:
    """Snapshot ``store`` (the Edge shard of the brain at ``home``) now; keeps the newest
    ``keep``. Returns the snapshot's description."""
    shard = shard_of(store)
    if shard is None:
        raise InvalidArgument("snapshots are made of the embedded Qdrant Edge store; a Qdrant "
                              "server keeps its own (use its snapshot API)")
    home = Path(home)
    root = snapshots_dir(home)
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    SpaceGuard(home, min_free_mb).require("take a snapshot", extra=_disk_usage(shard))
    name = _name(root)
    tmp = root / f".{name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    t0 = time.monotonic()
    try:
        sqlite = _backup_sqlite(home, tmp / "sqlite")
        with store.paused():
            points = store.count(None)
            notes = store.count(Filter(must=(Match("kind", "note"),)))
            writes = store.writes
            _copy_tree(shard, tmp / "shard")
        info = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "created_ts": time.time(), "points": points, "notes": notes,
                "location": store_location(backend_of(store), home), "model": model,
                "sqlite": sqlite, "writes": writes}
        (tmp / INFO).write_text(json.dumps(info, indent=2), encoding="utf-8")
        tmp.rename(root / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("snapshot %s: %s points (%s notes) in %.2f s", name, points, notes,
             time.monotonic() - t0)
    prune(home, keep)
    return {**info, "name": name, "path": str(root / name)}


def prune(home: Path, keep: int) -> list[str]:
    snaps = list_snapshots(home)
    gone = [s["name"] for s in snaps[: max(0, len(snaps) - keep)]]
    for name in gone:
        shutil.rmtree(snapshots_dir(home) / name, ignore_errors=True)
    return gone


def find(home: Path, name: str) -> dict[str, Any]:
    for snap in list_snapshots(home):
        if snap["name"] == name:
            return snap
    known = ", ".join(s["name"] for s in list_snapshots(home)) or "none"
    raise InvalidArgument(f"no snapshot {name!r} in {snapshots_dir(home)}; known: {known} "
                          "(see `brain snapshots`)", field="name")


def _dimension(shard: Path, default: int) -> int:
    """The dense vectors' size a shard's own config records (``default`` if unreadable)."""
    try:
        data = json.loads((shard / "edge_config.json").read_text(encoding="utf-8"))
        return int(data["vectors"]["dense"]["size"])
    except (OSError, ValueError, KeyError, TypeError):
        return default


def verify(home: Path, name: str, shard: Path, snap: dict[str, Any], dimension: int) -> None:
    """Open the copy ``shard`` of snapshot ``name`` and check it as a start would (its point
    count against the snapshot's record, a sample of vectors and payloads, every note's
    payload); a snapshot that fails is ``StoreDamaged``, naming it and what is wrong."""
    from brain.store.integrity import probe
    from brain.vector_store.edge import EdgeStore

    store = EdgeStore(shard)
    fault: str | None
    try:
        store.open(_dimension(shard, dimension))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a Rust panic is a BaseException
        fault = f"its files cannot be loaded ({type(exc).__name__}: {exc})"
    else:
        try:
            fault = probe(home, store, int(snap.get("points") or 0))
        finally:
            store.close()
    if fault is not None:
        raise StoreDamaged(
            f"snapshot {name} is damaged: {fault}. Nothing was restored and the current "
            f"store was left as it was; {_other_way(home, name)}, or run `brain accept-loss` "
            "to serve the current store as it is.", snapshot=name, what=fault)


def restore(home: Path, store_dir: Path, name: str, min_free_mb: float,
            graph_path: Path | None = None, dimension: int = 0) -> dict[str, Any]:
    """Put snapshot ``name`` back as the store at ``store_dir``. The caller holds the data
    dir (no server runs on it). The snapshot is copied beside the store and verified there
    first (:func:`verify`): a damaged one changes nothing. The replaced store and records are
    moved aside, not deleted."""
    home = Path(home)
    snap = find(home, name)
    src = Path(snap["path"])
    SpaceGuard(home, min_free_mb).require("restore a snapshot", extra=_disk_usage(src))
    store_dir.parent.mkdir(parents=True, exist_ok=True)
    work = store_dir.with_name(f".{store_dir.name}.restoring")
    shutil.rmtree(work, ignore_errors=True)
    _check_sqlite(home, name, src, list(snap.get("sqlite", [])))
    try:
        _copy_tree(src / "shard", work)
        verify(home, name, work, snap, dimension)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        work.with_name(work.name + ".lock").unlink(missing_ok=True)
    aside = home / f"store.damaged-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    aside.mkdir(mode=0o700)
    if store_dir.exists():
        store_dir.rename(aside / store_dir.name)
    work.rename(store_dir)
    for rel in snap.get("sqlite", []):
        cur = home / rel
        for extra in (cur, cur.with_name(cur.name + "-wal"), cur.with_name(cur.name + "-shm")):
            if extra.exists():
                (aside / "sqlite").mkdir(exist_ok=True)
                extra.rename(aside / "sqlite" / extra.name)
        cur.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / "sqlite" / rel, cur)
    # The graph cache describes the replaced store: rebuilt from the restored one at start.
    graph = Path(graph_path) if graph_path is not None else home / "graph.json"
    if graph.exists():
        shutil.move(graph, aside / graph.name)
    Manifest(home, path_location(store_dir, home)).save(int(snap["points"]))
    log.info("restored snapshot %s (%s points); the replaced store is in %s",
             name, snap["points"], aside)
    return {"restored": name, "points": snap["points"], "notes": snap.get("notes"),
            "replaced_store_kept_in": str(aside)}
