"""Shared by the damaged-file tests (tests/sources/test_damaged_files.py,
tests/files/test_damaged_records.py): a brain on the offline embedder, and a block of a real
file zeroed on disk, as a failing disk or a scribbling process leaves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brain.app import Brain
from config import Settings
from tests.conftest import hash_embedder


def open_offline(settings: Settings) -> Brain:
    settings.embedding.model = "offline/hash-384"
    return Brain(settings, embedder=hash_embedder()).open()


def zero_block(path: Path, block: int, size: int = 4096) -> None:
    with path.open("r+b") as fh:
        fh.seek(block * size)
        fh.write(b"\0" * size)


def refused_then_restored(settings: Settings, db: Path, *says: str) -> None:
    """Zero a block of ``db``: two starts in a row are STORE_DAMAGED naming it (and saying each
    of ``says``) and leave its bytes as they were; then put back what `brain restore` would."""
    import pytest

    from brain.errors import StoreDamaged

    good = db.read_bytes()
    zero_block(db, 1)
    damaged = db.read_bytes()
    for _ in range(2):  # refused means refused: a second start refuses the same way
        with pytest.raises(StoreDamaged) as info:
            open_offline(settings)
        assert info.value.details["path"] == str(db)
        for words in ("brain restore", "mv ", *says):
            assert words in str(info.value), (words, str(info.value))
    assert db.read_bytes() == damaged  # the refusal wrote nothing into the file
    db.write_bytes(good)  # what `brain restore` puts back


def health_scan_refuses(capsys: Any, db: Path) -> None:
    """``db`` damaged (one zeroed block): `brain health scan` through the real command line
    fails typed, naming the file, with no traceback."""
    from brain.cli import main

    zero_block(db, 1)
    capsys.readouterr()
    rc = main(["health", "scan"])
    err = capsys.readouterr().err
    assert rc != 0
    assert "[STORE_DAMAGED]" in err and db.name in err
    assert "Traceback" not in err
