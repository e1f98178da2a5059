"""Sync job ids outlive the process: sync_status answers after a restart, and a job a killed
process left queued or running is resumed under its id."""

from __future__ import annotations

import time
from pathlib import Path

from brain.app import Brain
from brain.clock import ManualClock
from config import Settings
from tests.conftest import hash_embedder


def _open(settings: Settings) -> Brain:
    settings.embedding.model = "offline/hash-384"
    return Brain(settings, embedder=hash_embedder(), clock=ManualClock())


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    for i in range(5):
        (root / "src" / f"m{i}.py").write_text(f"def handler_{i}():\n    return {i}\n")
    return root


def test_a_finished_job_answers_after_a_restart(settings: Settings, tmp_path: Path) -> None:
    root = _tree(tmp_path)
    with _open(settings) as b:
        b.sources.add(str(root), name="proj")
        job = b.sources.sync("proj", wait=True, timeout=120)
        assert job["status"] == "done"
    with _open(settings) as b:
        again = b.sources.job(job["job_id"])
        assert again["status"] == "done" and again["job_id"] == job["job_id"]
        assert again["result"] == job["result"]


def test_a_job_left_unfinished_is_resumed_under_its_id(settings: Settings,
                                                       tmp_path: Path) -> None:
    root = _tree(tmp_path)
    with _open(settings) as b:
        rec = b.sources.add(str(root), name="proj")["source"]
        # What a process killed with the job still queued leaves in sources.db.
        b.sources.registry.save_job({
            "job_id": "job-killed0001", "source_id": rec["id"], "project": rec["project"],
            "kind": "targeted", "paths": ["src/m1.py"], "scope": None, "reason": "watch",
            "status": "queued", "progress": {}, "result": {}, "error": None,
            "created": time.time(), "started": None, "finished": None,
        })
    with _open(settings) as b:
        deadline = time.monotonic() + 120
        while (job := b.sources.job("job-killed0001"))["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, job
            time.sleep(0.1)
        assert job["status"] == "done" and job["reason"] == "resumed"
        assert job["result"]["files_walked"] == 5  # resumed as a full sync, not 1 path
        assert b.sources.registry.count_states(rec["id"]) == 5
        assert b.sources.registry.unfinished_jobs() == []
