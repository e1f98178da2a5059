"""Damaged bookkeeping files of the sources side (issue 50): a zeroed block in sources.db, a
byte flip or a truncation in the change journal. Each is detected at open, named (file and,
for the journal, the byte offset) and refused with a typed code or repaired, saying what was
lost. Real parts: Qdrant Edge in a temp dir, real SQLite files damaged on disk, the real
``brain`` command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.errors import StoreDamaged
from config import Settings
from tests.damage import health_scan_refuses, open_offline, refused_then_restored, zero_block


def _brain_with_sources(settings: Settings, tmp_path: Path, n: int = 3) -> list[str]:
    names = []
    b = open_offline(settings)
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


def test_zeroed_block_in_sources_db_is_refused_naming_the_file(settings: Settings,
                                                               tmp_path: Path) -> None:
    _brain_with_sources(settings, tmp_path)
    db = settings.home / "sources.db"
    zero_block(db, 1)
    with pytest.raises(StoreDamaged) as info:
        open_offline(settings)
    msg = str(info.value)
    assert str(db) in msg and "brain restore" in msg


def test_damaged_sources_db_changes_nothing_and_a_restore_brings_it_back(
        settings: Settings, tmp_path: Path) -> None:
    names = _brain_with_sources(settings, tmp_path)
    refused_then_restored(settings, settings.home / "sources.db", "brain source add")
    b = open_offline(settings)
    try:
        assert sorted(r["name"] for r in b.sources.list()) == sorted(names)
    finally:
        b.close()


def test_health_scan_on_a_damaged_sources_db_is_typed(
        settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    _brain_with_sources(settings, tmp_path, n=1)
    health_scan_refuses(capsys, settings.home / "sources.db")


# ------------------------------------------------------------------------ the change journal
def _journal_with_writes(settings: Settings, tmp_path: Path,
                         monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str], list[int]]:
    """Three journalled fs writes; returns the journal, their change ids and line offsets."""
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    folder = tmp_path / "proj"
    folder.mkdir()
    b = open_offline(settings)
    try:
        b.sources.add(str(folder), name="proj", sync=True)
        ids = [b.fs.write("proj", f"n{i}.md", f"note {i}\n")["change"]["id"] for i in range(3)]
    finally:
        b.close()
    journal = settings.home / "changes" / "journal.jsonl"
    raw = journal.read_bytes()
    offsets = [0] + [i + 1 for i, c in enumerate(raw) if c == 0x0A][:-1]
    return journal, ids, offsets


def _flip(path: Path, offset: int, value: int) -> None:
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(bytes([value]))


def _changes_list(cli_json) -> dict:  # noqa: ANN001
    rc, out = cli_json("changes", "list", "--status", "all")
    assert rc == 0
    return out


def test_a_byte_flip_in_the_journal_is_named_and_the_good_records_kept(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_json) -> None:  # noqa: ANN001
    journal, ids, offsets = _journal_with_writes(settings, tmp_path, monkeypatch)
    # A byte that is no UTF-8 at all, inside the second record (was: an untyped utf-8 error).
    _flip(journal, offsets[1] + 200, 0xFF)
    out = _changes_list(cli_json)
    assert sorted(c["id"] for c in out["changes"]) == sorted([ids[0], ids[2]])
    (d,) = out["journal_damage"]
    assert d["path"] == str(journal) and d["offset"] == offsets[1]
    assert "UTF-8" in d["reason"]
    assert d["change_id"] == ids[1] and ids[1] in d["lost"]
    assert str(journal) in out["warning"]


def test_a_flip_that_stays_valid_json_is_caught_by_the_line_digest(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_json) -> None:  # noqa: ANN001
    journal, ids, offsets = _journal_with_writes(settings, tmp_path, monkeypatch)
    raw = journal.read_bytes()
    at = raw.index(b'"snapshot_sha": "', offsets[2]) + len(b'"snapshot_sha": "')
    _flip(journal, at, ord("0") if raw[at] != ord("0") else ord("1"))
    out = _changes_list(cli_json)
    assert sorted(c["id"] for c in out["changes"]) == sorted(ids[:2])
    (d,) = out["journal_damage"]
    assert d["offset"] == offsets[2] and "digest" in d["reason"] and d["change_id"] == ids[2]


def test_a_truncated_journal_says_which_change_was_lost(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_json) -> None:  # noqa: ANN001
    journal, ids, offsets = _journal_with_writes(settings, tmp_path, monkeypatch)
    with journal.open("r+b") as fh:
        fh.truncate(offsets[2] + 150)  # the last record cut after 150 bytes
    out = _changes_list(cli_json)
    assert sorted(c["id"] for c in out["changes"]) == sorted(ids[:2])
    (d,) = out["journal_damage"]
    assert d["offset"] == offsets[2] and d["length"] == 150
    assert "cut short" in d["reason"]
    assert d["event"] == "write" and d["change_id"] == ids[2]
    assert d["lost"] == f"the record of a change of {ids[2]}"


def test_another_users_lost_change_is_not_named(settings: Settings, tmp_path: Path) -> None:
    from brain.trust.identity import Identity, acting_as

    bob = Identity("bob", "b1")
    folder = tmp_path / "bobs"
    folder.mkdir()
    b = open_offline(settings)
    try:
        with acting_as(bob):
            b.sources.add(str(folder), name="bobs", sync=True)
            cid = b.fs.write("bobs", "x.md", "bob's\n")["change"]["id"]
    finally:
        b.close()
    journal = settings.home / "changes" / "journal.jsonl"
    raw = journal.read_bytes()
    journal.write_bytes(raw[:-5] + b"\xff" + raw[-4:])  # bob's record, damaged
    b = open_offline(settings)
    try:
        mine = b.changes.list(status="all")  # the settings identity, not bob
        (d,) = mine["journal_damage"]
        assert d["change_id"] is None and cid not in str(mine)
        assert "owner" not in d
        with acting_as(bob):
            (d,) = b.changes.list(status="all")["journal_damage"]
        assert d["change_id"] == cid
    finally:
        b.close()
