"""What of an upload is kept: its parsed text, redacted, page spans moved to match.

The raw bytes are a liability (an uploaded ``.env`` dump or a pasted key sits in them
verbatim), so by default the worker parses them once, keeps this redacted text and drops
them; reprocess re-chunks the text. See ``brain/files/store.py`` for the layout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brain.files.parsers import PageSpan, ParsedDocument
from brain.files.store import BlobStore, FileRecords, TextStore, sweep_temp_files
from brain.trust.redact import redact_mapped

__all__ = ["Keeper", "from_doc", "redact_parsed", "to_doc"]

log = logging.getLogger(__name__)


class Keeper:
    """Where an upload's raw bytes wait, and when they go."""

    def __init__(
        self,
        blobs: BlobStore,
        texts: TextStore,
        records: FileRecords,
        keep_raw: Callable[[], bool],
    ) -> None:
        self.blobs = blobs
        self.texts = texts
        self.records = records
        self.keep_raw = keep_raw

    def stash(self, file_id: str, sha: str, data: bytes) -> str:
        """Hold the raw bytes for the worker: kept content-addressed, or by record id."""
        if self.keep_raw():
            return self.blobs.put(sha, data)
        return self.blobs.put_incoming(file_id, data)

    def discard_stash(self, relpath: str) -> None:
        """An upload that lost a dedupe race: drop its own held bytes (never a shared blob)."""
        if not relpath.startswith("blobs/"):
            self.blobs.discard(relpath)

    def has_source(self, rec: dict[str, Any]) -> bool:
        """Whether the file can be indexed again: raw bytes or stored text."""
        return self.blobs.has(rec["storage_path"]) or self.texts.has(rec["id"])

    def drop_raw(self, rec: dict[str, Any]) -> None:
        """Delete a record's raw bytes unless the user keeps them (a shared blob of an
        older data dir only when no other record uses it)."""
        path = rec["storage_path"]
        if self.keep_raw() or not path:
            return
        if path.startswith("blobs/") and self.records.hash_users(rec["content_hash"]) > 1:
            return
        self.blobs.discard(path)
        self.records.update(rec["id"], storage_path="")

    def check_at_start(self, root: Path) -> None:
        """Sweep temp files of a killed run; say so when raw uploads of an older version stay
        (left in place: they are converted one by one by reprocess_file, or deleted)."""
        sweep_temp_files(root)
        kept = self.blobs.kept_count()
        if kept and not self.keep_raw():
            log.warning(
                "%d raw uploads kept by an older version remain in %s (files.keep_raw is "
                "false): reprocess_file converts one (keeps its redacted text, drops the "
                "bytes); delete_file removes it", kept, root / "blobs",
            )


def redact_parsed(parsed: ParsedDocument) -> tuple[ParsedDocument, int]:
    """The document redacted whole (a key block that crosses a page break is one secret, not
    two halves that each look like nothing), its page spans moved to the same places in the
    redacted text; and how many secrets went."""
    offsets = [o for _, start, end in parsed.pages for o in (start, end)]
    red, moved = redact_mapped(parsed.text, offsets)
    pages: list[PageSpan] = [
        (number, moved[2 * i], moved[2 * i + 1]) for i, (number, _, _) in enumerate(parsed.pages)
    ]
    return ParsedDocument(red.text, pages, parsed.format), red.count


def to_doc(parsed: ParsedDocument, redactions: int) -> dict[str, Any]:
    return {
        "text": parsed.text,
        "pages": [list(p) for p in parsed.pages],
        "format": parsed.format,
        "redactions": redactions,
    }


def from_doc(doc: dict[str, Any]) -> tuple[ParsedDocument, int]:
    pages = [(int(n), int(s), int(e)) for n, s, e in doc.get("pages", [])]
    parsed = ParsedDocument(str(doc.get("text", "")), pages, str(doc.get("format", "text")))
    return parsed, int(doc.get("redactions", 0))
