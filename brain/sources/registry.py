"""Durable records of sources and of what their last sync saw, in SQLite in the data dir.

Two tables:

- ``sources``: one row per source (folder, name, project, trigger, filters, caps, the
  last run and the index snapshot). SQLite gives atomic, crash-safe writes for free.
- ``files``: the sync state, one row per indexed file (size, mtime, content hash, chunk
  count, text length). It is a cache of what the store holds, used to skip unchanged
  files without reading them. ``state_complete`` on the source says whether the cache
  can be trusted for deletions; when it cannot (forgotten, or a run was interrupted)
  the next full sync asks the store which files it holds.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import threading
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

from brain.store.sqlite_check import typed
from brain.trust import tenancy
from brain.trust.identity import Identity

# A source belongs to one (user, agent) and is shared within the user or private to the
# agent (brain/trust/tenancy.py). Names are unique per owner, not globally: a global name would
# tell one user that another's source exists.
_SOURCES = """
CREATE TABLE IF NOT EXISTS {table} (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    visibility TEXT NOT NULL DEFAULT 'shared',
    data TEXT NOT NULL,
    UNIQUE (user_id, agent_id, name)
)"""
_SCHEMA = _SOURCES.format(table="sources") + """;
CREATE TABLE IF NOT EXISTS files (
    source_id TEXT NOT NULL,
    rel TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    text_len INTEGER NOT NULL,
    n_chunks INTEGER NOT NULL,
    category TEXT NOT NULL,
    created_ts REAL NOT NULL,
    embed_model TEXT NOT NULL,
    PRIMARY KEY (source_id, rel)
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    source_id TEXT NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    data TEXT NOT NULL
);
"""
# Sync jobs kept for sync_status after a restart (the newest; older ones are pruned).
JOB_HISTORY = 1000

Trigger = Literal["auto", "manual", "interval"]
TRIGGERS: tuple[str, ...] = get_args(Trigger)

# Marks a field its owner may change after adding the source (EDITABLE_FIELDS).
_EDITABLE = {"editable": True}


@dataclass(slots=True)
class SourceRecord:
    id: str
    name: str = field(metadata=_EDITABLE)
    root: str
    project: str = field(metadata=_EDITABLE)
    trigger: str = field(default="manual", metadata=_EDITABLE)
    exclude: list[str] = field(default_factory=list, metadata=_EDITABLE)
    include: list[str] = field(default_factory=list, metadata=_EDITABLE)
    max_scan_files: int | None = field(default=None, metadata=_EDITABLE)
    interval_s: float | None = field(default=None, metadata=_EDITABLE)
    use_gitignore: bool = field(default=True, metadata=_EDITABLE)
    user_id: str = ""
    agent_id: str = ""
    visibility: str = "shared"
    # Always active: keeps syncing in the background under [sync] auto = "packages-only".
    # None: pinned when the source holds package content (brain/sources/auto.py).
    pinned: bool | None = field(default=None, metadata=_EDITABLE)
    created: str = ""
    updated: str = ""
    config_hash: str = ""
    state_complete: bool = False
    last_run: dict[str, Any] = field(default_factory=dict)
    snapshot: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourceRecord:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


# What ``sources update`` may change, in the record's order: the tool's and the CLI's edit
# arguments are these names.
EDITABLE_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(SourceRecord) if f.metadata.get("editable"))


@dataclass(slots=True)
class FileState:
    rel: str
    size: int
    mtime_ns: int
    content_hash: str
    text_len: int
    n_chunks: int
    category: str
    created_ts: float
    embed_model: str


def new_source_id() -> str:
    return "src-" + uuid.uuid4().hex[:12]


class Registry:
    """Thread-safe; one connection guarded by a lock (writes are short)."""

    def __init__(self, path: Path, owner: Identity) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate(owner)
            self._db.executescript(_SCHEMA)
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise typed(self.path, exc) from None
        except BaseException:
            self._db.close()
            raise

    def _migrate(self, owner: Identity) -> None:
        """A sources table from before owners (name globally unique, no owner columns) is
        rebuilt in one transaction; its sources belong to the settings identity, shared."""
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(sources)")}
        if not cols or "user_id" in cols:
            return
        with self._db:
            self._db.execute(_SOURCES.format(table="sources_owned"))
            self._db.execute(
                "INSERT INTO sources_owned (id, name, user_id, agent_id, visibility, data) "
                "SELECT id, name, ?, ?, 'shared', data FROM sources",
                (owner.user_id, owner.agent_id),
            )
            self._db.execute("DROP TABLE sources")
            self._db.execute("ALTER TABLE sources_owned RENAME TO sources")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- sources ---------------------------------------------------------------------------
    @staticmethod
    def _record(row: Any) -> SourceRecord:
        """The owner columns are the truth (the JSON of a migrated row has none)."""
        user_id, agent_id, visibility, data = row
        return SourceRecord.from_dict(
            {**json.loads(data), "user_id": user_id, "agent_id": agent_id,
             "visibility": visibility}
        )

    def list(self, who: Identity | None = None) -> list[SourceRecord]:
        """Sources ``who`` may see (tenancy.sql); every source for the process's own work
        (watcher, scheduler, orphan detection), which never shows them to a caller."""
        sql = "SELECT user_id, agent_id, visibility, data FROM sources"
        args: list[str] = []
        if who is not None:
            clause, args = tenancy.sql(who)
            sql += f" WHERE {clause}"
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY name, id", args).fetchall()
        return [self._record(r) for r in rows]

    def find(self, key: str, who: Identity | None = None) -> SourceRecord | None:
        """A source by id or by name, among those ``who`` may see (all when None). Two
        visible sources of one name (one shared by a sibling, one of ``who``'s own): its own."""
        sql = "SELECT user_id, agent_id, visibility, data FROM sources WHERE (id = ? OR name = ?)"
        args: list[str] = [key, key]
        order = " ORDER BY id = ? DESC"
        if who is not None:
            clause, params = tenancy.sql(who)
            sql += f" AND {clause}"
            args += params
            order += ", agent_id = ? DESC"
        with self._lock:
            row = self._db.execute(
                sql + order, [*args, key, *([who.agent_id] if who else [])]
            ).fetchone()
        return self._record(row) if row else None

    def save(self, rec: SourceRecord) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO sources (id, name, user_id, agent_id, visibility, data) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name, "
                "visibility = excluded.visibility, data = excluded.data",
                (rec.id, rec.name, rec.user_id, rec.agent_id, rec.visibility,
                 json.dumps(rec.to_dict())),
            )

    def patch(self, source_id: str, **fields: Any) -> SourceRecord | None:
        """Read-modify-write of some fields under the lock; None when the source is gone."""
        with self._lock:
            rec = self.find(source_id)
            if rec is None or rec.id != source_id:
                return None
            rec = SourceRecord.from_dict({**rec.to_dict(), **fields})
            self.save(rec)
            return rec

    # -- sync jobs -------------------------------------------------------------------------
    def save_job(self, job: dict[str, Any]) -> None:
        """Record a sync job (queued, running or finished) so its id outlives the process."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO jobs (id, source_id, status, created, data) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET status = excluded.status, data = excluded.data",
                (job["job_id"], job["source_id"], job["status"], float(job["created"]),
                 json.dumps(job, default=str)),
            )
            self._db.execute(
                "DELETE FROM jobs WHERE id NOT IN (SELECT id FROM jobs ORDER BY created DESC "
                "LIMIT ?)", (JOB_HISTORY,))

    def load_job(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def unfinished_jobs(self) -> builtins.list[dict[str, Any]]:
        """Jobs a previous process queued or ran and never finished, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT data FROM jobs WHERE status IN ('queued', 'running') ORDER BY created"
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def delete(self, source_id: str) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM sources WHERE id = ?", (source_id,))
            self._db.execute("DELETE FROM files WHERE source_id = ?", (source_id,))

    # -- sync state ------------------------------------------------------------------------
    def file_states(self, source_id: str) -> dict[str, FileState]:
        with self._lock:
            rows = self._db.execute(
                "SELECT rel, size, mtime_ns, content_hash, text_len, n_chunks, category, "
                "created_ts, embed_model FROM files WHERE source_id = ?",
                (source_id,),
            ).fetchall()
        return {r[0]: FileState(*r) for r in rows}

    def count_states(self, source_id: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*) FROM files WHERE source_id = ?", (source_id,)
            ).fetchone()
        return int(row[0])

    def put_states(self, source_id: str, states: Iterable[FileState]) -> None:
        rows = [
            (
                source_id,
                s.rel,
                s.size,
                s.mtime_ns,
                s.content_hash,
                s.text_len,
                s.n_chunks,
                s.category,
                s.created_ts,
                s.embed_model,
            )
            for s in states
        ]
        if not rows:
            return
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )

    def delete_states(self, source_id: str, rels: Iterable[str]) -> None:
        rows = [(source_id, r) for r in rels]
        if not rows:
            return
        with self._lock, self._db:
            self._db.executemany("DELETE FROM files WHERE source_id = ? AND rel = ?", rows)

    def restamp_model(self, model_id: str) -> None:
        """After a model switch's swap: the points of every file were embedded again with
        ``model_id``, so an unchanged file needs no new sync."""
        with self._lock, self._db:
            self._db.execute("UPDATE files SET embed_model = ?", (model_id,))

    def clear_states(self, source_id: str) -> int:
        with self._lock, self._db:
            cur = self._db.execute("DELETE FROM files WHERE source_id = ?", (source_id,))
        return cur.rowcount

    def forget_mtimes(self, source_id: str, rels: Iterable[str] | None = None) -> None:
        """Make the next sync read these files (all when ``rels`` is None) again."""
        with self._lock, self._db:
            if rels is None:
                self._db.execute("UPDATE files SET mtime_ns = -1 WHERE source_id = ?", (source_id,))
            else:
                self._db.executemany(
                    "UPDATE files SET mtime_ns = -1 WHERE source_id = ? AND rel = ?",
                    [(source_id, r) for r in rels],
                )
