"""Review of the changes fs_write journalled: list, preview, approve, revert.

The journal (journal.py) is the truth; the index is consulted only to say whether it holds
what the change wrote, and when it cannot be reached the list still comes from the journal.

A preview separates three sets of bytes: what is on disk now, the snapshot the change
wrote, and the baseline it replaced. Its ``fingerprint`` digests the change's status and
those hashes; approve and revert carry it and refuse (CHANGE_CONFLICT) when anything moved
on since the preview. A revert replaces only what the change wrote: when the path holds
other bytes now (a later write, an editor) it refuses with DESTINATION_OCCUPIED, and a
modification whose baseline was not kept refuses with BASELINE_MISSING. Every check runs
again at apply, under the caller's identity: another caller's change is CHANGE_NOT_FOUND.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from typing import Any

from brain.clock import iso
from brain.errors import (
    BaselineMissing,
    BrainError,
    ChangeConflict,
    ChangeNotFound,
    DestinationOccupied,
    InvalidArgument,
)
from brain.sources.fsio import FsService, Located, decode, index_hash
from brain.sources.journal import APPROVED, PENDING, REVERTED, Change
from brain.sources.points import file_point_id
from brain.sources.walker import open_beneath, size_cap
from brain.trust import tenancy
from brain.trust.identity import Identity
from brain.trust.redact import redact

STATUSES = ("pending", "approved", "reverted", "all")


class ChangeReview:
    def __init__(self, fs: FsService) -> None:
        self.fs = fs
        self.journal = fs.journal

    # ------------------------------------------------------------------ finding
    def _mine(self, change_id: str) -> Change:
        change = self.journal.get(change_id)
        if change is None or not tenancy.visible(change.to_dict(), self.fs.sources.caller):
            raise ChangeNotFound(
                f"no change {change_id!r}; 'brain changes list' (the changes tool's list "
                "action) shows the ones you may review.",
                change_id=change_id,
            )
        return change

    def _loc(self, change: Change) -> Located:
        return self.fs.locate(change.source_id, change.path)

    # ------------------------------------------------------------------ list
    def list(
        self, source: str | None = None, status: str = "pending", limit: int = 100
    ) -> dict[str, Any]:
        if status not in STATUSES:
            raise InvalidArgument(f"status must be one of {list(STATUSES)}.", status=status)
        source_id = self.fs.sources.get(source).id if source else None
        who = self.fs.sources.caller
        changes = [
            c for c in self.journal.all()
            if tenancy.visible(c.to_dict(), who)
            and status in ("all", c.status)
            and source_id in (None, c.source_id)
        ][-limit:]  # fmt: skip
        index = "ok"
        rows = []
        for c in changes:
            row = c.to_dict()
            if index == "ok":
                try:
                    row["index_state"] = self._index_state(c)
                except (BrainError, OSError, RuntimeError) as exc:
                    index = f"unreachable: {type(exc).__name__}"  # the journal alone answers
            rows.append(row)
        out: dict[str, Any] = {"changes": rows, "count": len(rows), "index": index,
                               "source": "journal"}
        if self.journal.damage:
            out.update(self._damage(who))
        return out

    def _damage(self, who: Identity) -> dict[str, Any]:
        """Damaged journal lines (journal.py): where they are and what was lost. A change id
        is shown only for a change the caller may see; the rest is the file's bookkeeping."""
        lost = []
        for d in self.journal.damage:
            known = self.journal.get(d.change_id) if d.change_id else None
            owner = known.to_dict() if known is not None else d.owner
            if d.change_id and not (len(owner) >= 3 and tenancy.visible(owner, who)):
                d = dataclasses.replace(d, change_id=None)
            lost.append(d.to_dict())
        return {
            "journal_damage": lost,
            "warning": (
                f"{len(lost)} damaged line(s) in {self.journal.path} were skipped (offsets and "
                "what each held are in journal_damage); every other change is listed. A lost "
                "record's written file is still on disk: review it with `fs` read (`brain fs "
                "read`). The file is left as it is; keep a copy before moving it aside."
            ),
        }

    def _index_state(self, change: Change) -> str:
        """missing / current (the index holds what the change wrote) / stale."""
        points = self.fs.sources.store.retrieve([file_point_id(change.source_id, change.path)])
        if not points:
            return "missing"
        data = self.journal.blob(change.snapshot_sha)
        text = decode(data) if data is not None else None
        if text is None:
            return "stored"
        same = points[0].payload.get("content_hash") == index_hash(change.path, text)
        return "current" if same else "stale"

    # ------------------------------------------------------------------ preview
    def _disk(self, loc: Located) -> bytes | None:
        """The bytes at the path now (None: nothing there); bounded like a sync's read."""
        try:
            with open_beneath(loc.root, loc.rel) as fh:
                return fh.read(size_cap(loc.rel) + 1)
        except FileNotFoundError:
            return None

    @staticmethod
    def _sha(data: bytes | None) -> str:
        return hashlib.sha256(data).hexdigest() if data is not None else "missing"

    def _fingerprint(self, change: Change, disk: bytes | None) -> str:
        parts = [change.id, change.status, self._sha(disk), change.snapshot_sha,
                 change.baseline_sha or "none", str(change.baseline_kept)]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]

    def _shown(self, data: bytes | None) -> dict[str, Any]:
        cap = self.fs.cfg.max_read_bytes
        if data is None:
            return {"state": "missing"}
        out: dict[str, Any] = {"sha256": self._sha(data), "size": len(data)}
        text = decode(data)
        if text is None:
            return {**out, "state": "binary"}
        if len(data) > cap:
            return {**out, "state": "too_large", "cap": cap}
        return {**out, "state": "present", "content": redact(text, keep_lines=True).text}

    def preview(self, change_id: str) -> dict[str, Any]:
        change = self._mine(change_id)
        loc = self._loc(change)
        disk = self._disk(loc)
        baseline = self.journal.blob(change.baseline_sha) if change.baseline_kept else None
        now = self._sha(disk)
        matches = ("snapshot" if now == change.snapshot_sha
                   else "baseline" if change.baseline_sha and now == change.baseline_sha
                   else "missing" if disk is None else "other")  # fmt: skip
        return {
            "change": change.to_dict(),
            "disk": {**self._shown(disk), "matches": matches},
            "snapshot": self._shown(self.journal.blob(change.snapshot_sha)),
            "baseline": self._baseline_view(change, baseline),
            "fingerprint": self._fingerprint(change, disk),
            "revertible": self._revert_block(change, disk, baseline) is None,
        }

    def _baseline_view(self, change: Change, baseline: bytes | None) -> dict[str, Any]:
        if change.kind == "create":
            return {"state": "none", "note": "the change created the file"}
        if baseline is None:
            return {"state": "missing", "note": change.baseline_note or "the saved copy is gone"}
        return self._shown(baseline)

    def _revert_block(
        self, change: Change, disk: bytes | None, baseline: bytes | None
    ) -> BrainError | None:
        if disk is not None and self._sha(disk) != change.snapshot_sha:
            return DestinationOccupied(
                f"{change.path} now holds other bytes than change {change.id} wrote (a later "
                "write or an editor); revert that first, or write the file you want with "
                "fs(action='write').",
                change_id=change.id,
                path=change.path,
            )
        if change.kind == "modify" and baseline is None:
            why = change.baseline_note or "its saved copy is missing from the journal"
            return BaselineMissing(
                f"change {change.id} cannot be reverted: the content it replaced was not "
                f"kept ({why}); write the old content yourself with fs(action='write'), or "
                "approve it.",
                change_id=change.id,
            )
        return None

    # ------------------------------------------------------------------ decide
    def _fresh(self, change: Change, fingerprint: str, disk: bytes | None) -> None:
        if change.status != PENDING:
            raise ChangeConflict(
                f"change {change.id} is already {change.status}; nothing is left to decide.",
                change_id=change.id,
                status=change.status,
            )
        if fingerprint != self._fingerprint(change, disk):
            raise ChangeConflict(
                f"change {change.id} moved on since its preview (the file or the change "
                "changed); preview it again (changes(action='preview')) and decide on what "
                "it shows now.",
                change_id=change.id,
            )

    def approve(self, change_id: str, fingerprint: str) -> dict[str, Any]:
        change = self._mine(change_id)
        loc = self._loc(change)
        self._fresh(change, fingerprint, self._disk(loc))
        done = self.journal.decide(change.id, APPROVED, self._now())
        return {"change": done.to_dict()}

    def revert(self, change_id: str, fingerprint: str) -> dict[str, Any]:
        change = self._mine(change_id)
        loc = self._loc(change)
        disk = self._disk(loc)
        self._fresh(change, fingerprint, disk)
        baseline = self.journal.blob(change.baseline_sha) if change.baseline_kept else None
        block = self._revert_block(change, disk, baseline)
        if block is not None:
            raise block
        if baseline is not None:
            self.fs.put_bytes(loc, baseline)
        elif disk is not None:  # a create: remove what it made
            with contextlib.suppress(FileNotFoundError):
                os.unlink(loc.full)
        done = self.journal.decide(change.id, REVERTED, self._now())
        return {"change": done.to_dict(), **self.fs.index_now(loc)}

    def _now(self) -> str:
        return iso(self.fs.clock.now())
