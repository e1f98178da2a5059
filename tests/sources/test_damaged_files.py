"""Damaged bookkeeping files of the sources side (issue 50): a zeroed block in sources.db, a
byte flip or a truncation in the change journal. Each is detected at open, named (file and,
for the journal, the byte offset) and refused with a typed code or repaired, saying what was
lost. Real parts: Qdrant Edge in a temp dir, real SQLite files damaged on disk, the real
``brain`` command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.app import Brain
from brain.errors import StoreDamaged
from config import Settings
from tests.conftest import hash_embedder


def _open(settings: Settings) -> Brain:
    settings.embedding.model = "offline/hash-384"
    return Brain(settings, embedder=hash_embedder()).open()


def _brain_with_sources(settings: Settings, tmp_path: Path, n: int = 3) -> list[str]:
    names = []
    b = _open(settings)
    try:
        for i in range(n):
            folder = tmp_path / f"proj{i}"
            folder.mkdir()
            for j in range(20):
                (folder / f"f{j}.md").write_text(f"file {j} of project {i}\n" * 30)
            names.append(b.sources.add(str(folder), sync=True)["source"]["name"])
    finally:
        b.close()
    return names


def _zero_block(path: Path, block: int, size: int = 4096) -> None:
    with path.open("r+b") as fh:
        fh.seek(block * size)
        fh.write(b"\0" * size)


def test_zeroed_block_in_sources_db_is_refused_naming_the_file(settings: Settings,
                                                               tmp_path: Path) -> None:
    _brain_with_sources(settings, tmp_path)
    db = settings.home / "sources.db"
    _zero_block(db, 1)
    with pytest.raises(StoreDamaged) as info:
        _open(settings)
    msg = str(info.value)
    assert str(db) in msg and "brain restore" in msg


def test_damaged_sources_db_changes_nothing_and_a_restore_brings_it_back(
        settings: Settings, tmp_path: Path) -> None:
    names = _brain_with_sources(settings, tmp_path)
    db = settings.home / "sources.db"
    good = db.read_bytes()
    _zero_block(db, 1)
    damaged = db.read_bytes()
    for _ in range(2):  # refused means refused: a second start refuses the same way
        with pytest.raises(StoreDamaged) as info:
            _open(settings)
        assert info.value.details["path"] == str(db)
        assert "brain restore" in str(info.value) and "mv " in str(info.value)
    assert db.read_bytes() == damaged  # the refusal wrote nothing into the file
    db.write_bytes(good)  # what `brain restore` puts back
    b = _open(settings)
    try:
        assert sorted(r["name"] for r in b.sources.list()) == sorted(names)
    finally:
        b.close()


def test_health_scan_on_a_damaged_sources_db_is_typed(
        settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    _brain_with_sources(settings, tmp_path, n=1)
    _zero_block(settings.home / "sources.db", 1)
    from brain.cli import main

    capsys.readouterr()
    rc = main(["health", "scan"])
    err = capsys.readouterr().err
    assert rc != 0
    assert "[STORE_DAMAGED]" in err and "sources.db" in err
    assert "Traceback" not in err
