"""A durable job queue for background enrichment: SQLite in WAL mode in the data dir.

One row per job: ``(id, zk_id, kind, state, attempts, not_before, created, updated,
completions, last_error)``. States: pending -> running -> done | failed (or back to pending
with a delay on a retry).

Why this is exactly-once in effect:

- ``enqueue`` commits (WAL, ``synchronous=NORMAL``) before the write path returns, so an
  acknowledged note has its job in the WAL: a killed process loses nothing. Only a power
  loss can drop the last commits; the service's start-up sweep re-queues every heuristic
  note without an open or failed job, which covers that (and a note written while no model
  was configured). FULL would add an fsync per note to ``add_memory``.
- At most one *pending* job per (note, kind) (a partial unique index): a burst of updates
  collapses into one job, which reads the note's current payload when it runs.
- ``claim`` moves a job to *running* in one transaction. A process killed mid-job leaves it
  *running*; ``recover`` (at start, before any worker runs) puts it back to *pending*, so the
  job runs again. Handlers are idempotent (they check what the note already has), so a
  second run of a half-finished job finishes it without duplicating anything.
- ``complete`` flips running -> done in one statement guarded by ``state='running'``, and
  counts ``completions``: a job is marked done once and only once.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    zk_id       TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    state       TEXT    NOT NULL DEFAULT 'pending',
    attempts    INTEGER NOT NULL DEFAULT 0,
    not_before  REAL    NOT NULL DEFAULT 0,
    created     REAL    NOT NULL,
    updated     REAL    NOT NULL,
    completions INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT    NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_one_pending
    ON jobs(zk_id, kind) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, not_before, id);
CREATE INDEX IF NOT EXISTS jobs_zk ON jobs(zk_id);
"""

STATES = ("pending", "running", "done", "failed")


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    zk_id: str
    kind: str
    attempts: int


class JobQueue:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            str(path), timeout=30.0, check_same_thread=False, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self.wakeup = threading.Event()

    # -- writes -----------------------------------------------------------------------------
    def enqueue(self, zk_id: str, kind: str) -> bool:
        """Queue a job unless one is already pending for this note and kind."""
        now = time.time()
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO jobs(zk_id, kind, created, updated) VALUES (?,?,?,?)",
                (zk_id, kind, now, now),
            )
        self.wakeup.set()
        return cur.rowcount == 1

    def recover(self) -> int:
        """Jobs a dead process left running go back to pending (run before any worker).

        A note may already have a newer pending job; then the orphan is simply done.
        """
        now = time.time()
        with self._lock, self._tx():
            orphans = self._db.execute(
                "SELECT id, zk_id, kind FROM jobs WHERE state='running'"
            ).fetchall()
            for job_id, zk_id, kind in orphans:
                newer = self._db.execute(
                    "SELECT 1 FROM jobs WHERE zk_id=? AND kind=? AND state='pending'",
                    (zk_id, kind),
                ).fetchone()
                state = "done" if newer else "pending"
                self._db.execute(
                    "UPDATE jobs SET state=?, updated=?, completions=completions+? WHERE id=?",
                    (state, now, 1 if newer else 0, job_id),
                )
        return len(orphans)

    def claim(self) -> Job | None:
        """The oldest due pending job, now running; None when nothing is due."""
        now = time.time()
        with self._lock, self._tx():
            row = self._db.execute(
                "SELECT id, zk_id, kind, attempts FROM jobs WHERE state='pending' "
                "AND not_before<=? ORDER BY id LIMIT 1",
                (now,),
            ).fetchone()
            if row is None:
                return None
            self._db.execute(
                "UPDATE jobs SET state='running', attempts=attempts+1, updated=? WHERE id=?",
                (now, row[0]),
            )
        return Job(id=row[0], zk_id=row[1], kind=row[2], attempts=row[3] + 1)

    def complete(self, job_id: int) -> bool:
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET state='done', completions=completions+1, updated=? "
                "WHERE id=? AND state='running'",
                (time.time(), job_id),
            )
        return cur.rowcount == 1

    def retry(self, job_id: int, error: str, delay_s: float, count_attempt: bool = True) -> None:
        """Back to pending after ``delay_s``; a newer pending job for the note supersedes it."""
        now = time.time()
        with self._lock, self._tx():
            row = self._db.execute("SELECT zk_id, kind FROM jobs WHERE id=?", (job_id,)).fetchone()
            if row is None:
                return
            newer = self._db.execute(
                "SELECT 1 FROM jobs WHERE zk_id=? AND kind=? AND state='pending'", row
            ).fetchone()
            if newer:
                self._db.execute(
                    "UPDATE jobs SET state='done', completions=completions+1, updated=?, "
                    "last_error=? WHERE id=?",
                    (now, error[:500], job_id),
                )
                return
            self._db.execute(
                "UPDATE jobs SET state='pending', not_before=?, updated=?, last_error=?, "
                "attempts=attempts-? WHERE id=?",
                (now + delay_s, now, error[:500], 0 if count_attempt else 1, job_id),
            )

    def fail(self, job_id: int, error: str) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET state='failed', updated=?, last_error=? WHERE id=?",
                (time.time(), error[:500], job_id),
            )

    # -- reads ------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        out = dict.fromkeys(STATES, 0)
        out.update({state: n for state, n in rows})
        return out

    def open_or_failed(self, zk_ids: list[str], kind: str | None = None) -> set[str]:
        """Which of these notes have a pending, running or failed job (of ``kind``)."""
        found: set[str] = set()
        with self._lock:
            for start in range(0, len(zk_ids), 500):
                part = zk_ids[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT DISTINCT zk_id FROM jobs WHERE state IN ('pending', 'running', "
                    f"'failed') AND kind LIKE ? AND zk_id IN ({marks})",
                    [kind or "%", *part],
                ).fetchall()
                found.update(r[0] for r in rows)
        return found

    def next_due_in(self) -> float | None:
        """Seconds until the next pending job is due (0 if one is due now)."""
        with self._lock:
            row = self._db.execute(
                "SELECT MIN(not_before) FROM jobs WHERE state='pending'"
            ).fetchone()
        if row is None or row[0] is None:
            return None
        return max(0.0, float(row[0]) - time.time())

    def jobs(self) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._db.execute(
                "SELECT id, zk_id, kind, state, attempts, completions, last_error FROM jobs "
                "ORDER BY id"
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _tx(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error) on an autocommit connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")
