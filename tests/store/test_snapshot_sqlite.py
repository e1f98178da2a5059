"""A snapshot's SQLite records (sources.db, files/files.db) are checked on the way in and on
the way out: a page damaged while the brain ran is refused when the snapshot is taken (a
backup copies pages as they are, so the damage would sit in the snapshot unseen), and a
snapshot whose copy was damaged since is refused by `brain restore` before anything is
replaced. Real parts: Qdrant Edge in a temp dir, real SQLite files damaged on disk, the real
``brain`` command line."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from brain.errors import StoreDamaged
from brain.store.snapshot_catalog import list_snapshots, snapshots_dir
from config import Settings
from tests.damage import open_offline, zero_block


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    for j in range(12):
        (folder / f"f{j}.md").write_text(f"file {j}: the deploy runbook, step {j}\n" * 30)
    return folder


def test_a_snapshot_of_a_records_file_damaged_while_running_is_refused(
        settings: Settings, tmp_path: Path) -> None:
    b = open_offline(settings)
    try:
        b.sources.add(str(_folder(tmp_path)), name="proj", sync=True)
        b.memory.add("the deploy runbook lives in proj", project="ops")
        db = settings.home / "sources.db"
        with contextlib.closing(sqlite3.connect(db)) as con:  # SQLite's own checkpoint, so
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the page read is the file's
        zero_block(db, 1)  # after the start's check passed
        with pytest.raises(StoreDamaged) as info:
            b.snapshots.take()
        assert info.value.details["path"] == str(db)
    finally:
        b.close()
    assert list_snapshots(settings.home) == []  # nothing kept, not even a partial copy
    assert not [p for p in snapshots_dir(settings.home).iterdir() if p.name.endswith(".partial")]


def test_restore_refuses_a_snapshot_whose_records_copy_is_damaged(
        settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    b = open_offline(settings)
    try:
        b.sources.add(str(_folder(tmp_path)), name="proj", sync=True)
        snap = b.snapshots.take()
        b.memory.add("written after the snapshot", project="ops")
    finally:
        b.close()
    assert "sources.db" in snap["sqlite"]
    zero_block(Path(snap["path"]) / "sqlite" / "sources.db", 1)
    current = (settings.home / "sources.db").read_bytes()
    store = sorted(p.name for p in (settings.home / "store").iterdir())
    from brain.cli import main

    capsys.readouterr()
    rc = main(["restore", snap["name"]])
    err = capsys.readouterr().err
    assert rc != 0 and "[STORE_DAMAGED]" in err, err
    assert snap["name"] in err and "sources.db" in err and "Traceback" not in err
    # Nothing replaced: the records, the store and what was written after the snapshot.
    assert (settings.home / "sources.db").read_bytes() == current
    assert sorted(p.name for p in (settings.home / "store").iterdir()) == store
    assert not [p for p in settings.home.iterdir() if p.name.startswith("store.damaged-")]
    b = open_offline(settings)
    try:
        assert [n["content"] for n in b.memory.notes()] == ["written after the snapshot"]
        assert [s["name"] for s in b.sources.list()] == ["proj"]
    finally:
        b.close()
