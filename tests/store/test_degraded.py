"""Degraded mode: an unreachable Qdrant server at start, the embedded stand-in, the write
journal and its replay into the server (qdrant-client local mode stands in for one)."""

from __future__ import annotations

import json
import logging
import shutil
import socket
from pathlib import Path

import pytest

from brain.app import Brain
from brain.clock import ManualClock
from brain.vector_store import Match
from brain.vector_store.base import Filter
from brain.vector_store.journal import JOURNAL, Probe, WriteJournal, replay
from brain.vector_store.qdrant import QdrantClientStore
from config import Settings, load_settings
from tests.conftest import hash_embedder

NOTES = Filter(must=(Match("kind", "note"),))


def _refused_url() -> str:
    """A loopback port nothing listens on: connecting is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _settings(home: Path, **qdrant: str) -> Settings:
    s = load_settings(home=home, qdrant=qdrant)
    s.embedding.model = "offline/hash-384"
    return s


def _open(settings: Settings) -> Brain:
    return Brain(settings, embedder=hash_embedder(), clock=ManualClock())  # `with` opens it


def test_unreachable_server_serves_degraded_and_journals(home: Path) -> None:
    url = _refused_url()
    with _open(_settings(home, url=url)) as b:
        stats = b.stats()
        assert stats["backend_state"]["degraded"] is True
        assert stats["backend_state"]["qdrant_reachable"] is False
        assert stats["backend_state"]["last_checked_at"]
        caps = b.capabilities()
        assert caps["storage"]["degraded"] is True and caps["storage"]["qdrant_reachable"] is False
        assert any(d["part"] == "storage" for d in caps["degraded"])
        z = b.memory.add("the payment queue is drained by the replay worker", None).note["zk_id"]
        hits = b.memory.search("payment queue replay worker", 5)
        assert [h["zk_id"] for h in hits] == [z]
        b.memory.forget(z)
        assert b.probe is not None and b.probe.run_once() is False  # still down
    ops = [e["op"] for e in WriteJournal(home / JOURNAL).entries()]
    assert "upsert" in ops and "set_payload" in ops


def test_journaled_writes_arrive_exactly_once_after_recovery(home: Path, tmp_path: Path) -> None:
    with _open(_settings(home, url=_refused_url())) as b:
        kept = [b.memory.add(f"degraded fact number {i} about caching", None).note["zk_id"]
                for i in range(5)]
        gone = b.memory.add("a note removed while degraded", None).note["zk_id"]
        b.memory.forget(gone)
    journal = home / JOURNAL
    copy = tmp_path / "journal.copy"
    shutil.copy(journal, copy)
    server = tmp_path / "server"
    # The server is back: the next start replays the journal into it (local mode here).
    with _open(_settings(home, local_path=str(server))) as b:
        assert not journal.exists()  # retired once applied
        notes = {p.payload["zk_id"]: p.payload for p in b.store.scroll(NOTES, limit=100)[0]}
        assert set(kept) <= set(notes)
        assert notes[gone].get("forgotten") is True
        hits = b.memory.search("degraded fact caching", 10)
        assert {h["zk_id"] for h in hits} == set(kept)
        count = b.store.count(NOTES)
        stats = b.stats()
        assert stats["backend_state"]["degraded"] is False
    # A replay cut short by a crash runs again whole at the next start: the same writes
    # again change nothing (idempotent by id), so none is duplicated.
    target = QdrantClientStore("opencode_brain_g1", local_path=str(server))
    target.open(384)
    assert replay(WriteJournal(copy), target) > 0
    assert target.count(NOTES) == count
    target.close()


def test_a_torn_last_line_is_not_replayed(tmp_path: Path) -> None:
    journal = WriteJournal(tmp_path / JOURNAL)
    journal.append({"op": "delete", "ids": ["00000000-0000-4000-8000-000000000001"]})
    with journal.path.open("ab") as fh:
        fh.write(b'{"op": "delete", "ids": ["00000000')  # a crash mid-append: never acknowledged
    assert [e["op"] for e in journal.entries()] == ["delete"]


def test_probe_logs_loss_and_recovery(caplog: pytest.LogCaptureFixture) -> None:
    up = {"ok": True}

    def check() -> None:
        if not up["ok"]:
            raise ConnectionRefusedError("refused")

    probe = Probe("http://127.0.0.1:1", check, degraded=True)
    caplog.set_level(logging.WARNING, logger="brain.degraded")
    assert probe.run_once() is True
    up["ok"] = False
    assert probe.run_once() is False
    assert probe.run_once() is False  # logged once, not on every check
    up["ok"] = True
    assert probe.run_once() is True
    messages = [r.getMessage() for r in caplog.records]
    assert sum("unreachable" in m for m in messages) == 1
    assert sum("reachable again" in m for m in messages) == 1
    assert json.dumps(probe.state("qdrant"))  # what brain_stats shows
