"""Damaged files are detected, named and refused (issue 50, finding 6): a truncated Edge payload
tracker, a corrupt snapshot given to ``brain restore``, a damaged stored document text
before a reprocess. Real Qdrant Edge shards in temp dirs,
damaged on disk as a crash or a bad disk would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from brain.errors import StoreDamaged
from brain.memory.bulk import bulk_add
from brain.vector_store import Point
from config import Settings
from tests.security.test_storage_faults import ROOT, _env, _one_line_refusal, _open, _serve


def _build(settings: Settings, n: int) -> list[str]:
    b = _open(settings)
    try:
        return bulk_add(b.memory, [f"note {i}: the heronvale queue retries {i}"
                                   for i in range(n)], project="ops").zk_ids
    finally:
        b.close()


def _truncate_tracker(root: Path) -> Path:
    """Cut the tracker that maps each point to its payload, under ``root`` (a data dir's store
    or a snapshot); its journal, replayed at open, emptied too: the bytes a bad disk loses."""
    (tracker,) = root.glob("**/segments/*/payload_storage/tracker.dat")
    with tracker.open("r+b") as fh:
        fh.truncate(1000)
    (tracker.parent / "tracker_journal.dat").write_bytes(b"")
    return tracker


def test_a_truncated_payload_tracker_is_refused_and_named(settings: Settings) -> None:
    _build(settings, 300)
    tracker = _truncate_tracker(settings.home / "store")
    with pytest.raises(StoreDamaged) as err:
        _open(settings)
    msg = str(err.value)
    assert msg.startswith("[STORE_DAMAGED]") and "answers no payload" in msg
    assert str(tracker) in msg and "brain restore" in msg and "brain snapshots" in msg
    # A real server refuses the same way: one line, exit code 2, no traceback.
    line = _one_line_refusal(_serve("brain_serve", settings.home), settings.home,
                             "STORE_DAMAGED")
    assert "tracker.dat" in line


def test_restore_of_a_corrupt_snapshot_fails_and_keeps_the_store(settings: Settings) -> None:
    ids = _build(settings, 300)
    b = _open(settings)
    try:
        snap = b.snapshots.take()
    finally:
        b.close()
    _truncate_tracker(Path(snap["path"]) / "shard")  # the snapshot rotted on disk
    before = sorted(p.name for p in settings.home.iterdir() if p.name != "owner.lock")
    files_before = sorted(str(p) for p in (settings.home / "store").rglob("*"))
    proc = subprocess.run([sys.executable, "-m", "brain.cli", "restore", snap["name"]],
                          cwd=str(ROOT), env=_env(settings.home), capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode != 0, proc.stdout
    assert "[STORE_DAMAGED] snapshot " + snap["name"] + " is damaged" in proc.stderr, proc.stderr
    assert "answers no payload" in proc.stderr and "Nothing was restored" in proc.stderr
    assert "Traceback" not in proc.stderr
    after = sorted(p.name for p in settings.home.iterdir() if p.name != "owner.lock")
    assert after == before  # nothing moved aside, no half-restored copy left
    assert sorted(str(p) for p in (settings.home / "store").rglob("*")) == files_before
    b = _open(settings)  # the current store was left as it was, and serves
    try:
        assert sorted(n["zk_id"] for n in b.memory.notes()) == sorted(ids)
    finally:
        b.close()


def _ready_document(brain: Any, tmp_path: Path) -> dict[str, Any]:
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\n" + "\n\n".join(
        f"Step {i}: the osprelyne failover drains queue {i} before the cutover."
        for i in range(60)))
    rec = brain.files.ingest(doc)
    done = brain.files.wait(rec["id"], 30)
    assert done["status"] == "ready" and done["chunks_count"] > 1, done
    stored = brain.files.records.get(rec["id"])
    assert not brain.files.blobs.has(stored["storage_path"])  # the default: only its text kept
    return dict(done)


def _damage_text(path: Path, how: str) -> None:
    raw = path.read_bytes()
    if how == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    else:  # one word changed inside the text: still valid JSON, silently different
        path.write_bytes(raw.replace(b"osprelyne failover drains queue 7 ",
                                     b"osprelyne failover skips  queue 7 ", 1))


@pytest.mark.parametrize("how", ["truncated", "flipped"])
def test_reprocess_of_a_damaged_text_keeps_the_chunks(
    brain: Any, tmp_path: Path, how: str
) -> None:
    rec = _ready_document(brain, tmp_path)
    svc = brain.files
    chunks = svc.count_points(rec["id"])
    assert chunks == rec["chunks_count"]
    text_path = svc.texts.root / f"{rec['id']}.json"
    _damage_text(text_path, how)
    with pytest.raises(StoreDamaged) as err:
        svc.reprocess(rec["id"])
    msg = str(err.value)
    assert str(text_path) in msg and "chunks were kept" in msg and "upload the file again" in msg
    # Nothing changed: the record, its chunks, and search over them.
    assert svc.get(rec["id"])["status"] == "ready"
    assert svc.count_points(rec["id"]) == chunks
    hits = svc.search("osprelyne failover cutover", limit=5, threshold=-1)
    assert any(h["file_id"] == rec["id"] for h in hits), hits


def test_reprocess_of_a_sound_text_still_works(brain: Any, tmp_path: Path) -> None:
    rec = _ready_document(brain, tmp_path)
    brain.files.reprocess(rec["id"])
    again = brain.files.wait(rec["id"], 30)
    assert again["status"] == "ready" and again["chunks_count"] == rec["chunks_count"]


def test_a_point_read_without_its_payload_is_named_damage(brain: Any) -> None:
    """What a damaged payload tracker answers at a read the start sample missed: the point,
    its vectors, and no payload. Any read of it through the store stack is STORE_DAMAGED
    naming the tracker, never an untyped KeyError 'zk_id' or a NOTE_NOT_FOUND."""
    from brain.notes import point_id
    from brain.vector_store.forwarding import backend_of

    zk = brain.memory.add("the larkspur queue drains at noon", project="p").note["zk_id"]
    (stored,) = brain.store.retrieve([point_id(zk)], with_vectors=True)
    backend_of(brain.store).upsert([Point(stored.id, {}, stored.dense, stored.sparse)])
    with pytest.raises(StoreDamaged) as err:
        brain.memory.get(zk)
    msg = str(err.value)
    assert "answers no payload" in msg and "payload_storage/tracker.dat" in msg
    assert "brain restore" in msg
    with pytest.raises(StoreDamaged):  # a scan over it (an export, a health scan) too
        brain.store.scroll(None, limit=1000)
