"""Export / import round trip of everything a brain holds: notes, sources, uploaded documents
(record, text, kept bytes) and pending sync jobs (brain/maintenance/portable.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from brain.app import Brain
from brain.clock import ManualClock
from brain.errors import Conflict
from config import load_settings
from tests.conftest import hash_embedder


def _brain(home: Path, **sections: dict[str, object]) -> Brain:
    settings = load_settings(home=home, **sections)
    settings.embedding.model = "offline/hash-384"
    return Brain(settings, embedder=hash_embedder(), clock=ManualClock())


def _until(check, timeout: float = 120.0):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return got


def test_export_import_round_trip(tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("def pay():\n    return 'zebra-kettle'\n")
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nWhen the payment queue backs up, drain it with the replay "
                   "worker and page the on-call.\n")
    export = tmp_path / "brain.jsonl"
    with _brain(tmp_path / "a", files={"keep_raw": True}) as a:
        note = a.memory.add("rate limits live in redis", None).note["zk_id"]
        src = a.sources.add(str(folder), name="proj")["source"]
        _until(lambda: a.sources.registry.count_states(src["id"]) == 1)
        up = a.files.ingest(doc)
        assert a.files.wait(up["id"])["status"] == "ready"
        a.sources.registry.save_job({  # a sync job still queued when the export was taken
            "job_id": "job-pending001", "source_id": src["id"], "project": src["project"],
            "kind": "rescan", "paths": None, "scope": None, "reason": "manual",
            "status": "queued", "progress": {}, "result": {}, "error": None,
            "created": time.time(), "started": None, "finished": None})
        out = a.maintenance.export_jsonl(export)
    assert (out["notes"], out["sources"], out["documents"], out["jobs"]) == (1, 1, 1, 1)
    kinds = [json.loads(line)["type"] for line in export.read_text().splitlines()]
    assert kinds.count("document") == 1 and kinds.count("source") == 1

    with _brain(tmp_path / "b") as b:
        res = b.maintenance.import_jsonl(export)
        assert (res["imported"], res["sources"], res["documents"], res["jobs"]) == (1, 1, 1, 1)
        assert b.memory.get(note)["content"] == "rate limits live in redis"
        rec = b.sources.registry.find("proj")
        assert rec is not None and rec.id == src["id"] and rec.root == str(folder)
        _until(lambda: b.sources.job("job-pending001")["status"] == "done")
        assert b.sources.registry.count_states(rec.id) == 1  # the folder was read again
        hits = b.sources.search("zebra-kettle", search_mode="grep")["results"]
        assert hits and hits[0]["path"] == "src/app.py"
        assert b.files.wait(up["id"])["status"] == "ready"
        found = b.files.search("payment queue replay worker on-call", threshold=0.0)
        assert up["id"] in {h["file_id"] for h in found}  # indexed again in this home
        with pytest.raises(Conflict):  # a second import meets its own ids
            b.maintenance.import_jsonl(export)
        again = b.maintenance.import_jsonl(export, on_conflict="skip")
        assert again["skipped"] == 1 and again["sources"] == again["documents"] == 0
        assert again["extras_skipped"] == 3  # the source, the document, the done job


def test_a_malformed_extra_line_imports_nothing(tmp_path: Path) -> None:
    export = tmp_path / "brain.jsonl"
    with _brain(tmp_path / "a") as a:
        a.memory.add("kept note", None)
        a.maintenance.export_jsonl(export)
    export.write_text(export.read_text() + json.dumps({"type": "source", "record": {}}) + "\n")
    with _brain(tmp_path / "b") as b:
        with pytest.raises(Exception, match="not a valid source record"):
            b.maintenance.import_jsonl(export)
        assert b.memory.stats()["notes"] == 0


def test_imported_document_text_is_redacted_again(tmp_path: Path) -> None:
    """An export from an older brain (or edited by hand) may hold a secret in a document's
    text: the import keeps it redacted, and keeps no raw bytes unless this home keeps them."""
    import base64

    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    rec = {"id": "f-imported01", "user_id": "default", "agent_id": "default",
           "visibility": "shared", "dedupe_scope": "", "file_name": "notes.md",
           "file_size": 40, "content_hash": "c" * 64, "storage_path": "", "project": "general",
           "status": "ready", "generation": 1, "created_at": "2026-12-01T00:00:00Z",
           "updated_at": "2026-12-01T00:00:00Z"}
    with _brain(tmp_path / "b") as b:
        assert b.files.restore(rec, {"text": f"deploy token {secret} here", "pages": []},
                               base64.b64decode(base64.b64encode(b"raw " + secret.encode())))
        kept = json.dumps(b.files.texts.get("f-imported01"))
        assert secret not in kept and "deploy token" in kept
        assert not b.files.blobs.has(b.files.records.get("f-imported01")["storage_path"])
