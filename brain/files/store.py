"""Durable side of brain files: the parsed text, the raw bytes while needed, one record per
owner and content.

What is kept of an upload (``[files] keep_raw``):

- ``keep_raw = false`` (default): the raw bytes wait at ``<home>/files/incoming/<id>`` only
  until the worker has parsed them, then are deleted; a failed upload's bytes too. What
  stays is the parsed text, redacted, at ``<home>/files/text/<id>.json``: reprocess
  re-chunks it.
- ``keep_raw = true``: the bytes are kept content-addressed at
  ``<home>/files/blobs/<sha[:2]>/<sha>``, written once, so two users uploading the same
  document share one blob while each keeps a record; reprocess parses them again.

Every file is written whole (temp file + rename), so a crash leaves the old file or the
new one, never half of one; a stray temp file is swept at start. Records live in SQLite
(``<home>/files/files.db``) with their owner (user, agent, visibility: brain/trust/tenancy.py); a
unique index on ``(user_id, dedupe_scope, content_hash)`` is what makes the dedupe
race-free.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from brain.store import sqlite_check
from brain.trust import tenancy
from brain.trust.identity import Identity

__all__ = ["BlobStore", "DuplicateContent", "FileRecords", "TextStore", "sweep_temp_files"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    file_name TEXT NOT NULL,
    file_size INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    storage_path TEXT NOT NULL,
    project TEXT NOT NULL,
    status TEXT NOT NULL,
    chunks_count INTEGER,
    reason TEXT,
    generation INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS files_status ON files (status);
"""
# Owner columns (brain/trust/tenancy.py), added to databases made before they existed: their
# rows belong to the settings identity and are shared. ``dedupe_scope`` is "" for a shared
# record and the agent for a private one, so the same bytes dedupe within what the uploader
# may see and never answer with a sibling agent's private record.
_OWNER_COLUMNS = (("agent_id", "''"), ("visibility", "'shared'"), ("dedupe_scope", "''"))
_INDEXES = """
DROP INDEX IF EXISTS files_user_hash;
CREATE UNIQUE INDEX IF NOT EXISTS files_owner_hash ON files (user_id, dedupe_scope, content_hash);
"""
_COLUMNS = (
    "id", "user_id", "agent_id", "visibility", "dedupe_scope", "file_name", "file_size",
    "content_hash", "storage_path", "project", "status", "chunks_count", "reason",
    "generation", "created_at", "updated_at",
)  # fmt: skip


class DuplicateContent(Exception):
    """The user already has a record for these bytes (raised by ``FileRecords.insert``)."""


_TMP_PREFIX = ".tmp-"


def write_whole(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` via a private temp file and a rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_TMP_PREFIX)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def sweep_temp_files(root: Path) -> int:
    """Remove temp files a killed process left under ``root``; how many."""
    removed = 0
    for tmp in root.rglob(f"{_TMP_PREFIX}*") if root.is_dir() else ():
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed += 1
    return removed


class BlobStore:
    """Raw bytes: content-addressed (kept) or by record id (until parsed)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def relpath(self, sha: str) -> str:
        return f"blobs/{sha[:2]}/{sha}"

    def path(self, sha: str) -> Path:
        return self.root / self.relpath(sha)

    def put(self, sha: str, data: bytes) -> str:
        """Keep ``data`` content-addressed; its path relative to the files root."""
        target = self.path(sha)
        if not target.is_file():
            write_whole(target, data)
        return self.relpath(sha)

    def put_incoming(self, file_id: str, data: bytes) -> str:
        """Hold ``data`` for one record until it is parsed; its relative path."""
        rel = f"incoming/{file_id}"
        write_whole(self.root / rel, data)
        return rel

    def read(self, relpath: str) -> bytes:
        return (self.root / relpath).read_bytes()

    def has(self, relpath: str) -> bool:
        return bool(relpath) and (self.root / relpath).is_file()

    def discard(self, relpath: str) -> None:
        if relpath:
            with contextlib.suppress(FileNotFoundError):
                (self.root / relpath).unlink()

    def get(self, sha: str) -> bytes:
        return self.path(sha).read_bytes()

    def exists(self, sha: str) -> bool:
        return self.path(sha).is_file()

    def remove(self, sha: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(sha).unlink()

    def kept_count(self) -> int:
        """Raw blobs kept content-addressed (an older data dir kept every upload's)."""
        root = self.root / "blobs"
        return sum(1 for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0


DIGEST = "sha256"


def text_digest(doc: dict[str, Any]) -> str:
    """The digest of a stored text's content: its text, page spans and format."""
    body = json.dumps([doc.get("text"), doc.get("pages"), doc.get("format")],
                      ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


class TextStore:
    """The parsed, redacted text of each upload (with its page spans), by record id."""

    def __init__(self, root: Path) -> None:
        self.root = root / "text"

    def _path(self, file_id: str) -> Path:
        return self.root / f"{file_id}.json"

    def put(self, file_id: str, doc: dict[str, Any]) -> None:
        """Keep ``doc`` with a digest of its text and pages (``sha256``), so a damaged file
        is told from a good one before anything is rebuilt from it (:meth:`damage`)."""
        doc = {k: v for k, v in doc.items() if k != DIGEST}
        doc[DIGEST] = text_digest(doc)
        write_whole(self._path(file_id), json.dumps(doc, ensure_ascii=False).encode("utf-8"))

    def get(self, file_id: str) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._path(file_id).read_text("utf-8")))
        except (FileNotFoundError, ValueError):
            return None

    def path(self, file_id: str) -> Path:
        return self._path(file_id)

    def damage(self, file_id: str) -> str | None:
        """What is wrong with the stored text of ``file_id`` (None: sound, or none stored):
        not UTF-8 JSON, no text, or a text whose digest is not the one kept with it."""
        try:
            doc = json.loads(self._path(file_id).read_bytes().decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            return f"it cannot be read as JSON ({type(exc).__name__}: {exc})"
        if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
            return "it holds no text"
        kept = doc.get(DIGEST)
        if kept is not None and kept != text_digest(doc):
            return "its text no longer matches the digest kept when it was stored"
        return None

    def has(self, file_id: str) -> bool:
        return self._path(file_id).is_file()

    def remove(self, file_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(file_id).unlink()


class FileRecords:
    """The records of uploaded files; safe to share across threads."""

    def __init__(self, db_path: Path, owner: Identity) -> None:
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
        except sqlite3.DatabaseError as exc:
            raise sqlite_check.typed(db_path, exc) from None
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._migrate(owner)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise sqlite_check.typed(db_path, exc) from None
        except BaseException:
            self._db.close()
            raise

    def _migrate(self, owner: Identity) -> None:
        """Give a database from before tenancy its owner columns, in one transaction."""
        have = {r[1] for r in self._db.execute("PRAGMA table_info(files)")}
        with self._tx() as db:
            for name, default in _OWNER_COLUMNS:
                if name not in have:
                    db.execute(f"ALTER TABLE files ADD COLUMN {name} TEXT NOT NULL "
                               f"DEFAULT {default}")
            db.execute("UPDATE files SET agent_id = ? WHERE agent_id = ''", (owner.agent_id,))
            for stmt in filter(None, (x.strip() for x in _INDEXES.split(";"))):
                db.execute(stmt)

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @staticmethod
    def _row(row: sqlite3.Row | None) -> dict[str, Any] | None:
        if row is None:
            return None
        rec = {k: row[k] for k in _COLUMNS}
        rec.update(json.loads(row["extra"] or "{}"))
        return rec

    def insert(self, rec: dict[str, Any]) -> None:
        base = {k: rec.get(k) for k in _COLUMNS}
        extra = {k: v for k, v in rec.items() if k not in _COLUMNS}
        cols = ", ".join((*_COLUMNS, "extra"))
        marks = ", ".join("?" * (len(_COLUMNS) + 1))
        try:
            with self._tx() as db:
                db.execute(
                    f"INSERT INTO files ({cols}) VALUES ({marks})",
                    (*base.values(), json.dumps(extra)),
                )
        except sqlite3.IntegrityError as exc:
            raise DuplicateContent(rec["content_hash"]) from exc

    def get(self, file_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM files WHERE id = ?", (file_id,)).fetchone()
        return self._row(row)

    def by_hash(self, user_id: str, scope: str, content_hash: str) -> dict[str, Any] | None:
        """The record these bytes dedupe to for a user and dedupe scope (see above)."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM files WHERE user_id = ? AND dedupe_scope = ? AND content_hash = ?",
                (user_id, scope, content_hash),
            ).fetchone()
        return self._row(row)

    def hash_users(self, content_hash: str) -> int:
        """How many records share these bytes (the blob goes when the last one does)."""
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*) FROM files WHERE content_hash = ?", (content_hash,)
            ).fetchone()
        return int(row[0])

    def list(self, who: Identity | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Records ``who`` may see (tenancy.sql), or all of them (the worker's resume)."""
        sql, args = "SELECT * FROM files WHERE 1=1", []
        if who is not None:
            clause, params = tenancy.sql(who)
            sql += f" AND {clause}"
            args.extend(params)
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created_at, id", args).fetchall()
        return [r for r in (self._row(row) for row in rows) if r is not None]

    def update(self, file_id: str, **fields: Any) -> dict[str, Any] | None:
        """Merge ``fields`` into the record; None when it no longer exists."""
        with self._tx() as db:
            row = db.execute("SELECT * FROM files WHERE id = ?", (file_id,)).fetchone()
            rec = self._row(row)
            if rec is None:
                return None
            rec.update(fields)
            base = {k: rec[k] for k in _COLUMNS if k != "id"}
            extra = {k: v for k, v in rec.items() if k not in _COLUMNS}
            sets = ", ".join(f"{k} = ?" for k in base)
            db.execute(
                f"UPDATE files SET {sets}, extra = ? WHERE id = ?",
                (*base.values(), json.dumps(extra), file_id),
            )
        return rec

    def delete(self, file_id: str) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM files WHERE id = ?", (file_id,)).rowcount > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()
