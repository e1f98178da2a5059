"""Vector health: the integrity scan finds damage made on purpose, GC removes exactly what its
dry run listed, runs never overlap, the GC schedule runs on the injected clock, hot files.

A brain on Qdrant Edge in a tmp dir with the offline hash embedder (the model does not
matter here)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from brain.app import Brain
from brain.errors import ActionInProgress
from brain.health.scan import FINDINGS
from brain.notes import point_id
from brain.sources.points import file_point_id
from brain.vector_store import Filter, Match, Point, scroll_all
from tests.timing import HANG_S


def _w(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _source(brain: Brain, root: Path, name: str = "src") -> str:
    _w(root, "a.md", "# Alpha\n\nalpha notes about the deployment pipeline\n")
    _w(root, "b.md", "# Beta\n\nbeta notes about the storage engine\n")
    rec = brain.sources.add(str(root), name=name, project="web", sync=False)["source"]
    job = brain.sources.sync(name, wait=True, timeout=60)
    assert job["status"] == "done", job
    return str(rec["id"])


def _note(brain: Brain, text: str) -> dict[str, Any]:
    return brain.memory.add(text, "p").note


def _rewrite(brain: Brain, zk: str, **change: Any) -> None:
    """Replace a note's point with a changed copy (payload keys set to None are dropped)."""
    p = brain.store.retrieve([point_id(zk)], with_vectors=True)[0]
    for key, value in change.items():
        if key in ("dense", "sparse"):
            setattr(p, key, value)
        elif value is None:
            p.payload.pop(key, None)
        else:
            p.payload[key] = value
    brain.store.upsert([p])


@pytest.fixture
def damaged(brain: Brain, tmp_path: Path) -> dict[str, Any]:
    """A store with one instance of every kind of damage the scan reports."""
    sid = _source(brain, tmp_path / "src")
    notes = [_note(brain, f"note {w} about caching layer number {i}")
             for i, w in enumerate(("links", "graph", "model", "dense", "bm25", "fields", "ok"))]
    z = {n: notes[i]["zk_id"] for i, n in enumerate(
        ("links", "graph", "model", "dense", "bm25", "fields", "ok"))}
    brain.memory.flush_stamps()
    _rewrite(brain, z["links"], links=["ZK-DEADBEEF"], link_types={"ZK-DEADBEEF": "related"})
    brain.graph.remove_node(z["graph"])
    _rewrite(brain, z["model"], embed_model="other/old-model")
    _rewrite(brain, z["dense"], dense=None)
    _rewrite(brain, z["bm25"], sparse=None)
    _rewrite(brain, z["fields"], title=None)
    # Sources: a.md leaves sources.db (its file point is an orphan); b.md loses its file
    # point (its chunks are orphans).
    brain.sources.registry.delete_states(sid, ["a.md"])
    brain.store.delete([file_point_id(sid, "b.md")])
    chunks_b = [p.id for p in scroll_all(brain.store, Filter(must=(  # a.md's go with it
        Match("kind", "chunk"), Match("source_id", sid))))]
    # A passage of an uploaded document the files table never heard of.
    doc = str(uuid.uuid4())
    vec = brain.embedder.embed_documents(["orphan passage"])[0]
    brain.store.upsert([Point(doc, {
        "kind": "doc_chunk", "file_id": "f-gone", "project": "p", "content": "orphan passage",
        "chunk_index": 0, "user_id": "default", "agent_id": "default", "visibility": "shared",
        "embed_model": brain.meta.model}, dense=[float(x) for x in vec],
        sparse=brain.bm25.document("orphan passage"))])
    brain.graph.upsert_node("ZK-0000AAAA")  # a graph node with no note
    return {"zk": z, "sid": sid, "file_a": file_point_id(sid, "a.md"), "chunks_b": chunks_b,
            "doc": doc}


def test_scan_finds_each_kind_of_damage(brain: Brain, damaged: dict[str, Any]) -> None:
    z = damaged["zk"]
    before = brain.store.count()
    rep = brain.health.scan(everyone=True)
    f = rep["findings"]
    assert set(f) == set(FINDINGS)
    assert z["links"] + " -> ZK-DEADBEEF" in f["dangling_links"]["sample"]
    assert f["notes_missing_from_graph"]["sample"] == [z["graph"]]
    assert f["graph_nodes_missing_from_store"]["sample"] == ["ZK-0000AAAA"]
    assert f["other_model"]["sample"] == [z["model"]]
    assert f["missing_dense"]["sample"] == [z["dense"]]
    assert f["missing_bm25"]["sample"] == [z["bm25"]]
    assert f["missing_fields"]["sample"] == [f"{z['fields']}: title"]
    assert f["orphan_files"]["sample"] == [damaged["file_a"]]
    assert sorted(f["orphan_chunks"]["sample"]) == sorted(damaged["chunks_b"])
    assert f["orphan_doc_chunks"]["sample"] == [damaged["doc"]]
    assert not rep["ok"] and rep["by_kind"]["note"] == 7
    assert z["ok"] not in str(f)
    assert brain.store.count() == before  # read-only
    # The caller's own scan sees the same (every point here is the settings identity's),
    # except graph nodes, which carry no owner.
    mine = brain.health.scan()["findings"]
    assert mine["missing_bm25"]["count"] == 1
    assert mine["graph_nodes_missing_from_store"]["count"] == 0
    # Another user's scan sees none of it.
    from brain.trust.identity import Identity, acting_as

    with acting_as(Identity("bob", "b1")):
        other = brain.health.scan()
    assert other["ok"] and other["points"] == 0


def test_gc_dry_run_changes_nothing_then_removes_exactly_its_list(
    brain: Brain, damaged: dict[str, Any]
) -> None:
    ids_before = {p.id for p in scroll_all(brain.store, None)}
    dry = brain.health.gc(dry_run=True)
    listed = set(dry["ids"])
    assert listed == {damaged["file_a"], damaged["doc"], *damaged["chunks_b"]}
    assert {p.id for p in scroll_all(brain.store, None)} == ids_before
    # An orphan made after the dry run is not on its list, so it stays.
    late = str(uuid.uuid4())
    brain.store.upsert([Point(late, {"kind": "doc_chunk", "file_id": "f-late", "user_id":
                                     "default", "content": "late"}, dense=[1.0] + [0.0] * 383)])
    done = brain.health.gc(dry_run=False, expect=sorted(listed))
    assert set(done["ids"]) == listed and done["deleted"] == len(listed)
    assert {p.id for p in scroll_all(brain.store, None)} == (ids_before - listed) | {late}
    assert brain.health.scan()["findings"]["orphan_doc_chunks"]["sample"] == [late]


def test_repair_fixes_links_graph_and_vectors(brain: Brain, damaged: dict[str, Any]) -> None:
    z = damaged["zk"]
    dry = brain.health.repair(dry_run=True)
    assert dry["dangling_links"] == {"notes": 1, "links": 1} and dry["missing_bm25"] == 1
    assert brain.health.scan()["findings"]["missing_bm25"]["count"] == 1  # dry: unchanged
    done = brain.health.repair(dry_run=False, everyone=True)
    assert done["remaining"] == 0 and done["graph_nodes_missing_from_store"] == 1
    f = brain.health.scan(everyone=True)["findings"]
    for k in ("dangling_links", "notes_missing_from_graph", "missing_bm25", "missing_dense",
              "other_model", "graph_nodes_missing_from_store"):
        assert f[k]["count"] == 0, (k, f[k])
    assert z["graph"] in brain.graph
    assert f["missing_fields"]["count"] == 1 and "missing_fields" in done["not_repaired"]


def test_overlapping_runs_get_action_in_progress(brain: Brain, damaged: dict[str, Any],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    svc = brain.health
    with svc._exclusive("gc", "p", "test"):
        for call in (lambda: svc.gc(project="p"), lambda: svc.repair(project="p"),
                     lambda: svc.gc()):
            with pytest.raises(ActionInProgress) as err:
                call()
            assert err.value.code == "ACTION_IN_PROGRESS"
        assert svc.gc(project="other")["count"] == 0  # another project runs
        with caplog.at_level(logging.INFO, logger="brain.health.service"):
            skipped = svc.scheduled_gc()  # the automatic run skips to its next tick
        assert skipped["skipped"] and skipped["retry_next_tick"]
        assert "scheduled gc skipped" in caplog.text
    assert brain.health.gc(dry_run=True)["count"] > 0  # free again


def test_gc_schedule_runs_on_the_injected_clock(brain: Brain, damaged: dict[str, Any],
                                                caplog: pytest.LogCaptureFixture) -> None:
    interval = brain.settings.health.gc_interval_s
    assert interval == 86_400
    [st] = [w for w in brain.workers.status() if w["name"] == "health_gc"]
    start = brain.clock.now().timestamp()
    assert st["runs"] == 0 and st["next_ts"] >= start + interval - 5  # never at boot
    assert "health_gc" not in brain.workers.tick()
    brain.clock.advance(seconds=interval - 60)  # type: ignore[attr-defined]
    assert "health_gc" not in brain.workers.tick()
    assert brain.health.scan()["findings"]["orphan_files"]["count"] == 1
    with brain.health._exclusive("gc", "web", "a manual run"):
        brain.clock.advance(seconds=120)  # type: ignore[attr-defined]
        for _ in range(2):  # due: it tries, meets the manual run, skips, stays due
            assert "health_gc" not in brain.workers.tick()
            [st] = [w for w in brain.workers.status() if w["name"] == "health_gc"]
            assert st["runs"] >= 1 and st["last_error"] is None
            assert st["next_ts"] <= brain.clock.now().timestamp()
    assert brain.health.scan()["findings"]["orphan_files"]["count"] == 1  # skipped
    with caplog.at_level(logging.INFO, logger="brain.health.service"):  # the next tick runs
        deadline = time.monotonic() + HANG_S  # the scheduler thread may take the tick first
        while time.monotonic() < deadline and "started by schedule" not in caplog.text:
            brain.workers.tick()
            time.sleep(0.1)
    [st] = [w for w in brain.workers.status() if w["name"] == "health_gc"]
    assert st["last_error"] is None and "started by schedule" in caplog.text
    assert st["next_ts"] >= brain.clock.now().timestamp() + interval - 1  # then a day on
    left = brain.health.scan()["findings"]
    assert sum(v["count"] for k, v in left.items()
               if k.startswith("orphan")) == 0, left


def test_a_file_rewritten_often_is_a_hot_file(brain: Brain, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    hot = brain.hot_files
    hot.threshold = 3
    root = tmp_path / "gen"
    _w(root, "out.log", "line 0\n")
    _w(root, "calm.md", "# calm\n\nnever changes\n")
    brain.sources.add(str(root), name="gen", project="web", sync=False)
    with caplog.at_level(logging.WARNING, logger="brain.health.hot_files"):
        for i in range(3):
            _w(root, "out.log", "".join(f"line {j} of run {i}\n" for j in range(i + 2)))
            assert brain.sources.sync("gen", wait=True, timeout=60)["status"] == "done"
    rep = brain.health.hot_files()
    assert [r["path"] for r in rep["hot_files"]] == ["out.log"]
    assert rep["hot_files"][0]["writes"] == 3 and rep["tracked"] == 2
    assert "hot file: out.log" in caplog.text
    from brain.trust.identity import Identity, acting_as

    with acting_as(Identity("bob", "b1")):  # another user's source is not listed
        assert brain.health.hot_files()["count"] == 0
    brain.clock.advance(hours=2)  # type: ignore[attr-defined]
    assert brain.health.hot_files()["count"] == 0  # the window rolled past


def test_stats_and_duplicates(brain: Brain) -> None:
    a = _note(brain, "the cache is flushed every night at two")
    b = brain.memory.add("the cache is flushed every night at two", "p", autolink=False).note
    _note(brain, "completely unrelated deployment of the payment service")
    st = brain.health.stats()
    assert st["by_kind"]["note"] == 3 and st["model"]["active"] == brain.meta.model
    assert set(st["queues"]) == {"enrichment", "sync", "files_processing"}
    dup = brain.health.duplicates(project="p")
    assert dup["removes_nothing"]
    [group] = dup["groups"]
    assert sorted(group["ids"]) == sorted([a["zk_id"], b["zk_id"]])
    assert "consolidate_clusters" in group["hint"]
    assert brain.store.count(Filter(must=(Match("kind", "note"),))) == 3


def test_cli_scan_then_gc_with_the_dry_runs_list(
    brain: Brain, damaged: dict[str, Any], tmp_path: Path,
    cli_json: Callable[..., tuple[int, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    brain.close()  # one process owns a store: the CLI opens it now
    cli = cli_json

    rc, rep = cli("health", "scan")
    assert rc == 1 and rep["findings"]["orphan_doc_chunks"]["sample"] == [damaged["doc"]]
    rc, dry = cli("health", "gc")
    assert rc == 0 and dry["dry_run"] and dry["started_by"] == "cli" and dry["count"] > 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(dry))
    rc, done = cli("health", "gc", "--apply", "--expect", str(plan))
    assert rc == 0 and done["ids"] == dry["ids"] and done["deleted"] == dry["count"]
    rc, after = cli("health", "scan")
    assert after["findings"]["orphan_chunks"]["count"] == 0
    rc, st = cli("health", "stats")
    assert rc == 0 and st["by_kind"]["note"] == 7


CHILD = """
import sys, time
from brain.app import Brain
from config import load_settings
s = load_settings(home=sys.argv[1])
b = Brain(s).open()
def step(n):
    print("batch", n, flush=True)
    time.sleep(0.3)
b.health.repair(dry_run=False, everyone=True, progress=step)
print("done", flush=True)
b.close()
"""


def test_bm25_backfill_resumes_after_a_kill(brain: Brain, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store whose notes lost their BM25 vectors (as one written before BM25 existed):
    repair backfills them in batches; killed mid-way it keeps what it wrote, and the next
    run finishes the rest."""
    import os
    import signal
    import subprocess
    import sys

    from brain.memory.bulk import bulk_add
    from brain.memory.core import keyword_text

    ids = bulk_add(brain.memory, [f"note {i} on the parser cache and queue {i * 7}"
                                  for i in range(500)], project="p", batch=250).zk_ids
    pts = brain.store.retrieve([point_id(z) for z in ids], with_vectors=True)
    for p in pts:
        p.sparse = None
    brain.store.upsert(pts)
    assert brain.health.scan()["findings"]["missing_bm25"]["count"] == 500
    home = str(brain.home)
    brain.close()
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, home], stdout=subprocess.PIPE,
                             text=True, env=env)
    assert child.stdout is not None
    seen = 0
    for line in child.stdout:
        seen += line.startswith("batch")
        if seen == 3:
            child.send_signal(signal.SIGKILL)
            break
    child.wait(30)
    assert child.returncode == -signal.SIGKILL
    again = Brain(brain.settings, embedder=brain.embedder, clock=brain.clock).open()
    try:
        left = again.health.scan()["findings"]["missing_bm25"]["count"]
        assert 0 < left <= 500 - 2 * 64, left  # the batches written before the kill stay
        done = again.health.repair(dry_run=False)
        assert done["missing_bm25"] == left and done["remaining"] == 0
        assert again.health.scan()["findings"]["missing_bm25"]["count"] == 0
        for p in again.store.retrieve([point_id(z) for z in ids], with_vectors=True):
            assert p.sparse == again.bm25.document(keyword_text(p.payload))
    finally:
        again.close()


async def test_mcp_gc_overlap_is_a_typed_error_and_dry_run_is_the_default(
    client: Any, brain: Brain
) -> None:
    with brain.health._exclusive("repair", None, "test"):
        res = await client.call_tool("health_gc", {}, raise_on_error=False)
        assert res.is_error and "[ACTION_IN_PROGRESS]" in res.content[0].text
        assert res.structured_content["error"]["code"] == "ACTION_IN_PROGRESS"
    brain.store.upsert([Point(str(uuid.uuid4()), {"kind": "doc_chunk", "file_id": "gone",
                              "user_id": "default", "content": "x"}, dense=[1.0] + [0.0] * 383)])
    dry = (await client.call_tool("health_gc", {})).structured_content
    assert dry["dry_run"] and dry["count"] == 1 and dry["deleted"] == 0
    scan = (await client.call_tool("health_scan", {})).structured_content
    assert scan["findings"]["orphan_doc_chunks"]["sample"] == dry["ids"]


def test_a_reset_source_has_no_orphans_until_its_next_sync(brain: Brain, tmp_path: Path) -> None:
    """reset_state forgets what the last sync saw and "deletes no vector": the scan must not
    call the source's points orphans meanwhile, or GC (the janitor too) would delete them."""
    _source(brain, tmp_path / "src")
    assert brain.health.scan(None)["ok"]
    brain.sources.reset_state("src")
    report = brain.health.scan(None)
    assert report["ok"], report["findings"]
    assert brain.health.gc(True, None)["count"] == 0
    # a file really removed from the source is still found once the next sync completes
    (tmp_path / "src" / "b.md").unlink()
    job = brain.sources.sync("src", wait=True, timeout=60)
    assert job["status"] == "done" and brain.health.scan(None)["ok"]
