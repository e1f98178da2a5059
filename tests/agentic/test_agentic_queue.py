"""The durable enrichment queue: states, retries, recovery, and a SIGKILL mid-queue."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain.agentic.queue import JobQueue
from tests.agentic.test_enrichment import Responder, make_llm_brain
from tests.fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _hub_online(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[JobQueue]:
    q = JobQueue(tmp_path / "jobs.sqlite3")
    yield q
    q.close()


def test_one_pending_job_per_note(queue: JobQueue) -> None:
    assert queue.enqueue("ZK-00000001", "enrich") is True
    assert queue.enqueue("ZK-00000001", "enrich") is False  # collapses into the pending one
    assert queue.enqueue("ZK-00000002", "enrich") is True
    job = queue.claim()
    assert job is not None and job.zk_id == "ZK-00000001" and job.attempts == 1
    # While it runs, a new write gets a new pending job.
    assert queue.enqueue("ZK-00000001", "enrich") is True
    assert queue.counts() == {"pending": 2, "running": 1, "done": 0, "failed": 0}


def test_complete_is_once(queue: JobQueue) -> None:
    queue.enqueue("ZK-00000001", "enrich")
    job = queue.claim()
    assert job is not None
    assert queue.complete(job.id) is True
    assert queue.complete(job.id) is False
    assert queue.jobs()[0]["completions"] == 1
    assert queue.claim() is None


def test_retry_waits_for_its_backoff_then_fails(queue: JobQueue) -> None:
    queue.enqueue("ZK-00000001", "enrich")
    job = queue.claim()
    assert job is not None
    queue.retry(job.id, "junk", delay_s=0.3)
    assert queue.claim() is None  # not due yet
    assert 0 < (queue.next_due_in() or 0) <= 0.3
    time.sleep(0.35)
    again = queue.claim()
    assert again is not None and again.id == job.id and again.attempts == 2
    queue.fail(again.id, "junk again")
    assert queue.counts()["failed"] == 1
    assert queue.jobs()[0]["last_error"] == "junk again"


def test_retry_without_counting_keeps_attempts(queue: JobQueue) -> None:
    queue.enqueue("ZK-00000001", "enrich")
    job = queue.claim()
    assert job is not None
    queue.retry(job.id, "paused", 0.0, count_attempt=False)
    again = queue.claim()
    assert again is not None and again.attempts == 1


def test_recover_requeues_running_jobs_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    q = JobQueue(path)
    q.enqueue("ZK-00000001", "enrich")
    q.enqueue("ZK-00000002", "enrich")
    assert q.claim() is not None  # then the process "dies"
    q.close()
    q2 = JobQueue(path)
    try:
        assert q2.recover() == 1
        assert q2.counts() == {"pending": 2, "running": 0, "done": 0, "failed": 0}
        assert q2.open_or_failed(["ZK-00000001", "ZK-00000003"]) == {"ZK-00000001"}
    finally:
        q2.close()


def test_recover_drops_an_orphan_superseded_by_a_newer_job(queue: JobQueue) -> None:
    queue.enqueue("ZK-00000001", "enrich")
    job = queue.claim()
    assert job is not None
    queue.enqueue("ZK-00000001", "enrich")
    queue.recover()
    states = Counter(j["state"] for j in queue.jobs())
    assert states == {"done": 1, "pending": 1}


# -- a process killed with 50 queued jobs -----------------------------------------------------

CHILD = textwrap.dedent(
    """
    import sys, time
    from brain.app import Brain
    from brain.clock import ManualClock
    from brain.embedding.registry import REGISTRY, HashEmbedder
    from config import load_settings

    home, base_url = sys.argv[1], sys.argv[2]
    s = load_settings(home=home)
    s.embedding.model = "offline/hash-384"
    s.llm.base_url = base_url
    s.llm.max_retries = 0
    s.llm.evolve_threshold = 0.0
    s.memory.hype_questions = 0  # the enrichment jobs alone (HyPE: tests/agentic/test_hype.py)
    clock = ManualClock()
    b = Brain(s, embedder=HashEmbedder(REGISTRY["offline/hash-384"]), clock=clock).open()
    for i in range(50):
        clock.advance(seconds=1)
        b.memory.add(f"note number {i} about topic {i % 7} with detail {i * 13}", "kill")
    print("added", flush=True)
    time.sleep(600)
    """
)


def _job_states(db: Path) -> Counter[str]:
    con = sqlite3.connect(str(db), timeout=5)
    try:
        return Counter(dict(con.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state")))
    except sqlite3.OperationalError:
        return Counter()
    finally:
        con.close()


def test_sigkill_with_50_queued_jobs_resumes_exactly_once(home: Path, tmp_path: Path) -> None:
    responder = Responder(delay_s=0.05)
    with FakeLLM(responder) as server:
        script = tmp_path / "child.py"
        script.write_text(CHILD)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "0"}
        child = subprocess.Popen(
            [sys.executable, str(script), str(home), server.base_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=ROOT,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "added"
            db = home / "agentic" / "jobs.sqlite3"
            deadline = time.monotonic() + 60
            # Kill while a job is mid-flight (running), after a few have finished.
            while time.monotonic() < deadline:
                states = _job_states(db)
                if states["done"] >= 3 and states["running"] == 1:
                    break
                time.sleep(0.01)
            child.send_signal(signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
        at_kill = _job_states(db)
        assert 3 <= at_kill["done"] < 50 and at_kill["running"] == 1

        responder.delay_s = 0.0
        b = make_llm_brain(home, server.base_url)
        try:
            assert b.agentic.drain(120)
            jobs = b.agentic.queue.jobs()
            notes = list(b.memory.notes())
            edges = b.graph.edges()
            status = b.agentic.status()
        finally:
            b.close()

    assert len(jobs) == 50
    assert all(j["state"] == "done" and j["completions"] == 1 for j in jobs), jobs
    assert len({j["zk_id"] for j in jobs}) == 50
    assert len(notes) == 50 and len({n["zk_id"] for n in notes}) == 50
    assert all(n["enriched_by"].startswith("llm:") for n in notes)
    for n in notes:
        assert len(n["links"]) == len(set(n["links"])), n["zk_id"]
        assert len(n.get("evolved_by", [])) == len(set(n.get("evolved_by", [])))
        assert set(n["links"]) == set(n["link_types"])
    assert len(edges) == len(set(edges))
    assert any(rel == "supports" for _, _, rel in edges)
    assert status["queue"]["failed"] == 0
    assert any(j["attempts"] == 2 for j in jobs)  # the interrupted job ran again, once
    print(json.dumps({"at_kill": at_kill, "jobs": len(jobs), "edges": len(edges)}))
