"""The change journal: a durable, append-only record of every file fs_write changed.

Layout, under ``<home>/changes/`` (the data dir, which no source may index):

- ``journal.jsonl``: one JSON object a line, appended and fsynced before the call returns.
  A ``write`` event records a change (who, which source and path, the sha of the bytes
  written and of the bytes it replaced); ``approved`` / ``reverted`` events decide it.
  The state of a change is the fold of its events, so nothing is ever rewritten; a torn
  last line (a crash mid-append) is skipped on replay.
- ``blobs/<sha[:2]>/<sha>``: content-addressed copies of the bytes written (the snapshot)
  and of the bytes replaced (the baseline a revert restores). Written to a temp file,
  fsynced and renamed, so a blob is whole or absent.

Nothing that holds a credential is kept: fs_write redacts what it writes, and a baseline
the redactor would touch is not saved (a revert of that change then refuses with
BASELINE_MISSING rather than restoring a secret from the journal).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from brain.private import fsync_dir

log = logging.getLogger(__name__)

PENDING, APPROVED, REVERTED = "pending", "approved", "reverted"
DECISIONS = (APPROVED, REVERTED)


@dataclass(frozen=True, slots=True)
class Change:
    id: str
    source_id: str
    path: str  # POSIX, relative to the source root
    kind: str  # create | modify
    created: str
    user_id: str
    agent_id: str
    visibility: str  # the source's, so a sibling sees changes to a shared source
    snapshot_sha: str  # sha256 of the bytes written
    snapshot_size: int
    baseline_sha: str | None = None  # sha256 of the bytes replaced; None for a create
    baseline_kept: bool = False  # False: the baseline was not saved (see why)
    baseline_note: str = ""
    status: str = PENDING
    decided: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def new_change_id() -> str:
    return "chg-" + uuid.uuid4().hex[:12]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ChangeJournal:
    """Thread-safe; the file is the truth and the in-memory map its replay."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.blobs = self.root / "blobs"
        self.path = self.root / "journal.jsonl"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._changes: dict[str, Change] = {}
        self._replay()

    # -- replay ----------------------------------------------------------------------------
    def _replay(self) -> None:
        if not self.path.exists():
            return
        self._end_torn_line()
        with open(self.path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    self._apply(json.loads(line))
                except (ValueError, TypeError, KeyError):
                    log.warning("change journal line %d is unreadable; skipped", n)

    def _end_torn_line(self) -> None:
        """A crash mid-append leaves a line without its newline: end it, so the next event
        starts a line of its own instead of being glued to the torn one (and lost)."""
        with open(self.path, "rb+") as fh:
            if fh.seek(0, os.SEEK_END) == 0:
                return
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
                fh.flush()
                os.fsync(fh.fileno())

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.pop("event")
        if kind == "write":
            known = {k: v for k, v in event.items() if k in Change.__dataclass_fields__}
            change = Change(**known)
            self._changes[change.id] = change
        elif kind in DECISIONS:
            old = self._changes.get(event["id"])
            if old is not None:
                self._changes[old.id] = replace(old, status=kind, decided=event.get("ts"))

    def _append(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, ensure_ascii=False, sort_keys=True) + "\n"
        new = not self.path.exists()
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        if new:
            fsync_dir(self.root)

    # -- changes ---------------------------------------------------------------------------
    def record(self, change: Change) -> Change:
        with self._lock:
            self._append({"event": "write", **change.to_dict()})
            self._changes[change.id] = change
        return change

    def decide(self, change_id: str, status: str, ts: str) -> Change:
        if status not in DECISIONS:
            raise ValueError(f"unknown decision {status!r}")
        with self._lock:
            old = self._changes[change_id]
            self._append({"event": status, "id": change_id, "ts": ts})
            new = replace(old, status=status, decided=ts)
            self._changes[change_id] = new
        return new

    def get(self, change_id: str) -> Change | None:
        with self._lock:
            return self._changes.get(change_id)

    def all(self) -> list[Change]:
        with self._lock:
            return sorted(self._changes.values(), key=lambda c: (c.created, c.id))

    # -- blobs -----------------------------------------------------------------------------
    def _blob_path(self, sha: str) -> Path:
        return self.blobs / sha[:2] / sha

    def put_blob(self, data: bytes) -> str:
        sha = digest(data)
        path = self._blob_path(sha)
        if path.exists():
            return sha
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{sha}.{uuid.uuid4().hex[:8]}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
        return sha

    def blob(self, sha: str | None) -> bytes | None:
        """The bytes of ``sha``, or None when absent or damaged (their hash must match)."""
        if not sha:
            return None
        try:
            data = self._blob_path(sha).read_bytes()
        except OSError:
            return None
        return data if digest(data) == sha else None
