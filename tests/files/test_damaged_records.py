"""A damaged files.db (the records of uploaded documents) is refused by name at open, like
sources.db (issue 50): STORE_DAMAGED saying what the file holds and the two ways back, the
file left as it was; a restore brings the documents back, and moving it aside (what the
message offers) starts with none, their passages then orphans that `brain health gc` drops.
Real parts: Qdrant Edge in a temp dir, a real SQLite file damaged on disk, the real ``brain``
command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.errors import StoreDamaged
from config import Settings
from tests.damage import health_scan_refuses, open_offline, refused_then_restored, zero_block
from tests.timing import HANG_S


def _brain_with_documents(settings: Settings, tmp_path: Path, n: int = 12) -> list[str]:
    ids = []
    b = open_offline(settings)
    try:
        for i in range(n):
            doc = tmp_path / f"doc{i}.md"
            doc.write_text(f"# Runbook {i}\n\n" + f"Step {i}: roll back the deploy first. " * 40)
            ids.append(b.files.ingest(str(doc))["id"])
        for file_id in ids:
            assert b.files.wait(file_id, timeout=HANG_S)["status"] == "ready"
    finally:
        b.close()
    return ids


def test_a_damaged_files_db_is_refused_by_name_and_a_restore_brings_it_back(
        settings: Settings, tmp_path: Path) -> None:
    ids = _brain_with_documents(settings, tmp_path)
    refused_then_restored(settings, settings.home / "files" / "files.db",
                          "uploaded documents", "brain ingest")
    b = open_offline(settings)
    try:
        assert sorted(f["id"] for f in b.files.list()) == sorted(ids)
    finally:
        b.close()


def test_moved_aside_it_starts_with_no_documents_and_gc_drops_their_passages(
        settings: Settings, tmp_path: Path) -> None:
    _brain_with_documents(settings, tmp_path, n=2)
    db = settings.home / "files" / "files.db"
    zero_block(db, 1)
    with pytest.raises(StoreDamaged):
        open_offline(settings)
    db.rename(db.with_name("files.db.damaged"))  # the message's second way back
    b = open_offline(settings)
    try:
        assert b.files.list() == []
        orphans = b.health.scan(everyone=True)["findings"]["orphan_doc_chunks"]["count"]
        assert orphans > 0  # the old documents' passages, no record left to own them
        b.health.gc(dry_run=False, everyone=True)
        assert b.health.scan(everyone=True)["findings"]["orphan_doc_chunks"]["count"] == 0
    finally:
        b.close()


def test_health_scan_on_a_damaged_files_db_is_typed(
        settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    _brain_with_documents(settings, tmp_path, n=12)
    health_scan_refuses(capsys, settings.home / "files" / "files.db")
