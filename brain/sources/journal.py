"""The change journal: a durable, append-only record of every file fs_write changed.

Layout, under ``<home>/changes/`` (the data dir, which no source may index):

- ``journal.jsonl``: one JSON object a line, appended and fsynced before the call returns.
  A ``write`` event records a change (who, which source and path, the sha of the bytes
  written and of the bytes it replaced); ``approved`` / ``reverted`` events decide it.
  The state of a change is the fold of its events, so nothing is ever rewritten. Each line
  carries ``sum``, a digest of the rest of its event: replay checks every line on its own,
  keeps the good ones and reports each damaged one (a byte flip, bytes that are not UTF-8, a
  line cut short by a truncation or a crash mid-append) with the file, its byte offset and
  what it held as far as it can be read (:attr:`ChangeJournal.damage`, shown by
  ``changes list``). Lines written before ``sum`` existed are checked as JSON only.
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
import re
import threading
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from brain.private import fsync_dir

log = logging.getLogger(__name__)

PENDING, APPROVED, REVERTED = "pending", "approved", "reverted"
DECISIONS = (APPROVED, REVERTED)
_FIRST = ("event", "id", "user_id", "agent_id", "visibility")
_CHANGE_ID = re.compile(rb"chg-[0-9a-f]{12}")
_EVENT = re.compile(rb'"event": "(write|approved|reverted)"')
_OWNER = {k: re.compile(rb'"' + k.encode() + rb'": "([^"\\]{1,128})"')
          for k in ("user_id", "agent_id", "visibility")}


def _sum(event: dict[str, Any]) -> str:
    """The digest a line carries of the rest of its event (``sum`` itself left out)."""
    body = json.dumps({k: v for k, v in event.items() if k != "sum"}, ensure_ascii=False,
                      sort_keys=True)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Damage:
    """One journal line replay could not trust: where it is and what it held, as far as the
    damaged bytes still tell (the event kind and the change id, when they survive)."""

    path: str
    offset: int  # byte offset of the line in the file
    length: int  # its bytes, without the newline
    reason: str
    event: str | None = None  # write / approved / reverted
    change_id: str | None = None
    # The owner fields a lost write still shows (user_id, agent_id, visibility), so that
    # only a caller who may see the change is told its id; never shown themselves.
    owner: dict[str, str] = field(default_factory=dict, compare=False)

    def lost(self) -> str:
        what = {"write": "the record of a change", "approved": "an approval",
                "reverted": "a revert"}.get(self.event or "", "an event")
        of = f" of {self.change_id}" if self.change_id else ""
        return f"{what}{of}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("owner")
        return {**out, "lost": self.lost()}


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
        self.damage: list[Damage] = []
        self._replay()

    # -- replay ----------------------------------------------------------------------------
    def _replay(self) -> None:
        if not self.path.exists():
            return
        raw = self.path.read_bytes()
        self._end_torn_line()
        offset = 0
        for line in raw.split(b"\n"):
            start, offset = offset, offset + len(line) + 1
            if not line.strip():
                continue
            reason = self._replay_line(line)
            if reason is not None:
                self._damaged(line, start, reason, torn=start + len(line) == len(raw))

    def _replay_line(self, line: bytes) -> str | None:
        """Apply one line; None when it was good, else why it was not applied."""
        try:
            event = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return f"bytes that are not UTF-8 at +{exc.start}"
        except ValueError:
            return "not a whole JSON record"
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            return "not a journal event"
        given = event.pop("sum", None)
        if given is not None and given != _sum(event):
            return "its digest does not match (bytes changed on disk)"
        try:
            self._apply(event)
        except (ValueError, TypeError, KeyError) as exc:
            return f"a malformed event ({type(exc).__name__}: {exc})"
        return None

    def _damaged(self, line: bytes, offset: int, reason: str, torn: bool) -> None:
        if torn and reason == "not a whole JSON record":
            reason = "cut short at the end of the file (a truncation, or a crash mid-append)"
        kind = _EVENT.search(line)
        cid = _CHANGE_ID.search(line)
        owner = {}
        for k, pattern in _OWNER.items():
            m = pattern.search(line)
            if m:
                owner[k] = m.group(1).decode("utf-8", "replace")
        d = Damage(str(self.path), offset, len(line), reason,
                   kind.group(1).decode() if kind else None,
                   cid.group(0).decode() if cid else None, owner)
        self.damage.append(d)
        log.warning("change journal %s: the line at byte %d (%d bytes) is damaged (%s); "
                    "skipped, lost: %s; the other lines are kept",
                    d.path, d.offset, d.length, d.reason, d.lost())

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
        # What names a change and its owner goes first, so that a line cut short still
        # says whose change it was (Damage); the digest is of the sorted event.
        head = {k: event[k] for k in _FIRST if k in event}
        event = {**head, **dict(sorted(event.items())), "sum": _sum(event)}
        line = json.dumps(event, ensure_ascii=False) + "\n"
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
