"""The data dir's SQLite files, checked at open: a zeroed or scribbled page is refused by name
(STORE_DAMAGED, saying what the file holds and the two ways back), not found later as rows
silently missing or a query failing mid-work.

- ``sources.db`` (brain/sources/registry.py): the sources, their sync state and job history;
- ``files/files.db`` (brain/files/store.py): the records of uploaded documents.

Brain.open checks both (``PRAGMA quick_check``, which reads every page: once per start, not
again as each keeper opens its connection) before the store is opened or locked; a keeper
types the SQLite errors its own open meets (:func:`typed`). A snapshot checks its copies as it
takes them and before it restores them (brain/store/snapshots.py).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from brain.errors import BrainError, StoreDamaged, StoreError, disk_full

_LOW_SPACE = 16_000_000  # below this, an I/O error of SQLite at open is taken for a full disk
_DAMAGE = ("SQLITE_CORRUPT", "SQLITE_NOTADB")

# file name -> (what it holds, what moving it aside leaves and how to get it back)
_WHAT = {
    "sources.db": (
        "the sources, their sync state and job history",
        "to start with no sources: add them again with `brain source add` and drop the old "
        "sources' points with `brain health gc`",
    ),
    "files.db": (
        "the records of the uploaded documents",
        "to start with no uploaded documents: ingest them again with `brain ingest` and drop "
        "the old documents' passages with `brain health gc`",
    ),
}


def damaged(path: Path, problem: str) -> StoreDamaged:
    """STORE_DAMAGED naming ``path``, what it holds, and the two ways back."""
    holds, aside = _WHAT.get(path.name, ("part of the brain's bookkeeping",
                                         "and start it again empty"))
    return StoreDamaged(
        f"{path} is damaged (SQLite integrity check: {problem}); it holds {holds}, and nothing "
        "was changed. Restore it with the rest of the data dir (`brain snapshots`, then "
        f"`brain restore NAME`), or move it aside (`mv {path} {path}.damaged`) {aside}.",
        path=str(path), problem=problem,
    )


def quick_check(db: sqlite3.Connection, path: Path) -> None:
    """``PRAGMA quick_check`` on an open connection; raises STORE_DAMAGED naming ``path``."""
    rows = [str(r[0]) for r in db.execute("PRAGMA quick_check(5)").fetchall()]
    if rows != ["ok"]:
        raise damaged(path, "; ".join(rows))


def typed(path: Path, exc: sqlite3.DatabaseError) -> BrainError:
    """Damage (a corrupt page, not a database) is STORE_DAMAGED; a full disk met while
    opening (SQLite says "disk I/O error" when it cannot make its -wal or -shm) is
    DISK_FULL; anything else is STORE_ERROR naming the file."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    if name.startswith(_DAMAGE) or "malformed" in str(exc):
        return damaged(path, str(exc))
    if name.startswith(("SQLITE_FULL", "SQLITE_IOERR")) and \
            shutil.disk_usage(path.parent).free < _LOW_SPACE:
        return disk_full(f"open {path.name}", str(path))
    return StoreError(f"{path} could not be opened ({name or type(exc).__name__}: {exc}); "
                      "check its permissions and the disk, then retry.", path=str(path))


def check_file(path: Path) -> None:
    """Check the SQLite file at ``path`` (when there is one) and change nothing; raises
    STORE_DAMAGED (or STORE_ERROR, DISK_FULL) naming it."""
    path = Path(path)
    if not path.is_file():
        return
    try:
        db = sqlite3.connect(str(path), timeout=30)
    except sqlite3.DatabaseError as exc:
        raise typed(path, exc) from None
    try:
        quick_check(db, path)
    except sqlite3.DatabaseError as exc:
        raise typed(path, exc) from None
    finally:
        db.close()
