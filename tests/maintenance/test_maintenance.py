"""Maintenance: health check, migrations with backups, exact restore, export/import, weekly.

The commands run as an operator would: ``brain`` CLI in process and two ``tools/`` scripts in
subprocesses, on a store the fixture brain seeded and then closed (one process owns a store).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain.app import Brain
from brain.cli import main
from brain.clock import ManualClock
from brain.embedding.registry import REGISTRY, HashEmbedder
from brain.memory import RecallFilter
from brain.notes import point_id
from brain.vector_store import Match, Point
from config import load_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _offline_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")


def open_home(home: Path) -> Brain:
    s = load_settings(home=home)
    s.embedding.model = "offline/hash-384"
    return Brain(s, embedder=HashEmbedder(REGISTRY["offline/hash-384"]), clock=ManualClock()).open()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr().out
    return rc, (json.loads(out) if out.strip() else {})


def script(name: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / name), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )


def notes_by_id(brain: Brain) -> dict[str, dict]:
    return {pt.id: pt.payload for pt in brain.maintenance.note_points()}


def seed_drift(brain: Brain) -> dict[str, str]:
    m = brain.memory
    good = m.add("valid note about uvicorn reload", "shop").note["zk_id"]
    research = m.add("paper on LSM tree compaction", "shop").note["zk_id"]
    brain.store.set_payload([point_id(research)], {"memory_type": "research"})
    bogus = m.add("note with a made-up kind", "shop").note["zk_id"]
    brain.store.set_payload([point_id(bogus)], {"note_kind": "howto"})
    partial = dict(m.get_payload(good))
    partial.update(zk_id="ZK-0000BEEF", title="partial")
    for field in ("salience", "agent_id", "link_types", "enriched_by"):
        partial.pop(field)
    # As an older OpenCode Brain wrote it: no kind, no stamps, links without types.
    legacy = {
        "zk_id": "ZK-00C0FFEE",
        "title": "legacy",
        "content": "legacy note: qdrant listens on port 6333",
        "memory_type": "permanent",
        "note_kind": "general",
        "project": "shop",
        "created": "2025-06-01T00:00:00Z",
        "links": [good],
    }
    pts = []
    for p in (partial, legacy):
        vec = brain.embedder.embed_documents([p["content"]])[0].tolist()
        pts.append(Point(point_id(p["zk_id"]), p, vec, brain.bm25.document(p["content"])))
    brain.store.upsert(pts)
    brain.store.flush()
    return {
        "good": good,
        "research": research,
        "bogus": bogus,
        "partial": "ZK-0000BEEF",
        "legacy": "ZK-00C0FFEE",
    }


def test_drifted_store_health_migrations_backup_restore(
    brain: Brain, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = seed_drift(brain)
    original = notes_by_id(brain)
    brain.close()

    proc = script("check_schema_health.py", "--home", str(home))
    assert proc.returncode == 1, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["invalid"] == 4 and report["scanned"] == 5
    assert {"enum:memory_type", "enum:note_kind", "missing:salience", "missing:kind"} <= set(
        report["by_issue"]
    )

    rc, dry = cli(capsys, "migrate", "note-kind")
    assert rc == 0 and dry["apply"] is False and dry["changed"] == 1 and dry["backup"] is None
    assert not (home / "backups").exists()

    proc = script("migrate_memory_schema.py", "--apply", "--home", str(home))
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = json.loads(proc.stdout)
    assert first["changed"] == 2
    backup = Path(first["backup"])
    assert backup.parent == home / "backups" and backup.name.startswith("memory-pre-migration-")
    rc, nk = cli(capsys, "migrate", "note-kind", "--apply")
    assert rc == 0 and nk["changed"] == 1 and "notekind-pre-migration-" in nk["backup"]
    rc, mt = cli(capsys, "migrate", "memory-type", "--apply")
    assert rc == 0 and mt["changed"] == 1 and "memorytype-pre-migration-" in mt["backup"]
    rc, health = cli(capsys, "health")
    assert rc == 0 and health["ok"] is True and health["scanned"] == 5

    b = open_home(home)
    try:
        p = b.memory.get_payload(ids["research"])
        assert (p["memory_type"], p["note_kind"], p["legacy_memory_type"]) == (
            "permanent",
            "research",
            "research",
        )
        p = b.memory.get_payload(ids["bogus"])
        assert (p["note_kind"], p["legacy_note_kind"]) == ("general", "howto")
        p = b.memory.get_payload(ids["legacy"])  # now a proper note
        assert p["kind"] == "note" and p["link_types"] == {ids["good"]: "related"}
        assert p["created_ts"] > 0 and p["salience"] == 0.5
        hits = b.memory.search("qdrant port 6333", 5, RecallFilter(project="shop"), stamp=False)
        assert ids["legacy"] in [h["zk_id"] for h in hits]
        migrated = notes_by_id(b)
    finally:
        b.close()
    assert migrated != original

    rc, restored = cli(capsys, "restore-backup", str(backup))
    assert rc == 0 and restored["restored"] == 5 and restored["reembedded"] == 0
    b = open_home(home)
    try:
        assert notes_by_id(b) == original  # exactly, field for field
    finally:
        b.close()
    rc, health = cli(capsys, "health")
    assert rc == 1 and health["invalid"] == 4
    # Bad input: exit 1, nothing changed.
    bad = home / "not-a-backup.json"
    bad.write_text("{}")
    assert cli(capsys, "restore-backup", str(bad))[0] == 1


def seed_rich(brain: Brain) -> None:
    m = brain.memory
    a = m.add("postgres connection pool exhausted under load", "shop").note["zk_id"]
    b = m.add("pgbouncer transaction pooling settings", "shop").note["zk_id"]
    m.link(a, b, "supports")
    m.stamp_access([a, b])
    m.stamp_access([a])
    m.add("pinned deploy rule", "shop", pinned=True)
    fail = brain.mistakes.record_failure("pytest fails: fixture db not found", "shop", "pytest:db")
    brain.mistakes.record_failure("pytest fails again: fixture db", "shop", "pytest:db")
    brain.mistakes.record_resolution(fail["note"]["zk_id"], "add conftest db fixture", "shop")
    brain.sessions.close_session("shop", "stabilise tests", ["db fixture"], [], ["ci"])
    arch = m.add("old archived note", "shop").note["zk_id"]
    m.archive(arch)
    gone = m.add("note that gets reclaimed", "shop").note["zk_id"]
    m.forget(gone)
    brain.clock.advance(days=8)
    assert brain.decay.reclaim_forgotten()["retired"] == [gone]
    m.forget(m.add("forgotten, still in grace", "shop").note["zk_id"])
    m.add("fleeting inbox item", "api", memory_type="fleeting", tags=["later"])


def snapshot(brain: Brain) -> dict:
    retired = {p.id: p.payload for p in brain.store.scroll(brain_filter("retired"), limit=1000)[0]}
    vectors = {
        p.id: p.dense for p in brain.store.retrieve(list(notes_by_id(brain)), with_vectors=True)
    }
    stats = brain.memory.stats()
    return {
        "notes": notes_by_id(brain),
        "retired": retired,
        "edges": brain.graph.edges(),
        "stats": stats,
        "vectors": vectors,
    }


def brain_filter(kind: str):  # noqa: ANN201
    from brain.vector_store import Filter

    return Filter(must=(Match("kind", kind),))


def test_export_import_round_trip_is_exact(
    brain: Brain, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    brain.workers.stop()  # a decay tick between snapshot and export would change salience
    seed_rich(brain)
    before = snapshot(brain)
    assert len(before["notes"]) == 10 and len(before["retired"]) == 1
    brain.close()
    dump = tmp_path / "export.jsonl"
    rc, out = cli(capsys, "export", str(dump))
    assert rc == 0 and out["notes"] == 10 and out["retired"] == 1
    other = tmp_path / "other-home"
    rc, out = cli(capsys, "import", str(dump), "--home", str(other))
    assert rc == 0 and out["imported"] == 11
    b = open_home(other)
    try:
        after = snapshot(b)
        hits = b.memory.search("connection pool exhausted", 3, RecallFilter(project="shop"),
                               stamp=False)
    finally:
        b.close()
    assert after["notes"] == before["notes"]
    assert after["retired"] == before["retired"]
    assert after["edges"] == before["edges"]
    assert after["stats"] == before["stats"]
    assert after["vectors"].keys() == before["vectors"].keys()
    for pid, vec in before["vectors"].items():  # re-embedded from text by the same model
        assert after["vectors"][pid] == pytest.approx(vec, abs=1e-6)
    assert hits and hits[0]["title"].startswith("postgres connection pool")

    # Importing again clashes: refused before any write; skip imports nothing.
    rc, _ = cli(capsys, "import", str(dump), "--home", str(other))
    assert rc == 1
    rc, out = cli(capsys, "import", str(dump), "--home", str(other), "--on-conflict", "skip")
    assert rc == 0 and out["imported"] == 0 and out["skipped"] == 11
    broken = tmp_path / "broken.jsonl"
    broken.write_text(dump.read_text().splitlines()[0] + "\n{not json\n")
    empty = tmp_path / "third-home"
    assert cli(capsys, "import", str(broken), "--home", str(empty))[0] == 1
    b = open_home(empty)
    try:
        assert notes_by_id(b) == {}
    finally:
        b.close()


def test_weekly_maintenance(brain: Brain, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = brain.memory.add("note nobody reads", "shop").note["zk_id"]
    brain.memory.add("pinned note nobody reads", "shop", pinned=True)
    brain.close()
    # The CLI runs on the wall clock, months after the fixture clock's 2026-01-01.
    rc, report = cli(capsys, "maintenance")
    assert rc == 0 and report["ok"] is True and report["apply"] is False
    assert [n["zk_id"] for n in report["archive"]["notes"]] == [stale]
    assert report["archive"]["archived"] == 0
    rc, report = cli(capsys, "maintenance", "--apply")
    assert rc == 0 and report["archive"]["archived"] == 1
    assert report["stats"]["by_memory_type"]["archived"] == 1
    assert report["health"]["scanned"] == 2
