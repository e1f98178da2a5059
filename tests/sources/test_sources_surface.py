"""Source tools end to end through fastmcp.Client, the CLI, and the queue's rules."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from fastmcp.exceptions import ToolError

from brain.sources.queue import SyncQueue
from tests.timing import HANG_S


def _w(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for i in range(30):
        _w(root, f"src/m{i}.py", f"def handler_{i}(request):\n    return 'ok {i}'\n" * 20)
    _w(root, "README.md", "# Service\n\nHandles payment webhooks.\n")
    return root


async def test_source_tools_end_to_end(client, tree: Path) -> None:  # noqa: ANN001
    added = (
        await client.call_tool(
            "add_source", {"path": str(tree), "name": "proj", "trigger": "manual"}
        )
    ).data
    assert added["source"]["name"] == "proj" and added["job"]["job_id"]
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    done = (
        await client.call_tool(
            "sync_source", {"source": "proj", "wait": True}, progress_handler=on_progress
        )
    ).data
    assert done["status"] == "done"
    listed = (await client.call_tool("list_sources", {})).data
    assert listed["sources"][0]["snapshot"]["indexed"] == 31
    sem = (await client.call_tool("fs_search", {"query": "payment webhooks"})).data
    assert sem["results"][0]["path"] == "README.md"
    grep = (
        await client.call_tool(
            "fs_search", {"query": "handler_7\\(", "search_mode": "grep", "limit": 5}
        )
    ).data
    assert grep["results"][0]["path"] == "src/m7.py"
    flt = (
        await client.call_tool(
            "fs_search", {"query": "", "search_mode": "filter", "category": ["docs"]}
        )
    ).data
    assert [r["path"] for r in flt["results"]] == ["README.md"]
    status = (await client.call_tool("sync_status", {"source": "proj"})).data
    assert status["count"] >= 1
    assert progress  # progress notifications reached the client while it waited
    first = (await client.call_tool("sync_status", {"job_id": added["job"]["job_id"]})).data
    assert first["status"] == "done" and first["result"]["chunks_embedded"] >= 31
    upd = (
        await client.call_tool("update_source", {"source": "proj", "exclude": ["README.md"]})
    ).data
    assert upd["source"]["exclude"] == ["README.md"]
    rescan = (await client.call_tool("rescan_source", {"source": "proj"})).data
    assert rescan["job_id"]
    cancelled = (await client.call_tool("cancel_sync", {"source": "proj"})).data
    assert "cancelled" in cancelled
    reset = (await client.call_tool("reset_source_state", {"source": "proj"})).data
    assert reset["source"] == "proj"
    est = (await client.call_tool("reembed", {"source": "proj", "path": "src/m1.py"})).data
    assert est["confirm_required"] and len(est["estimate_s"]) == 2
    with pytest.raises(ToolError, match="PATH_OUTSIDE_SOURCE"):
        await client.call_tool("fs_search", {"query": "x", "folder": "/"})
    with pytest.raises(ToolError, match="INVALID_ARGUMENT"):
        await client.call_tool("fs_search", {"query": "a[", "search_mode": "grep"})
    removed = (await client.call_tool("remove_source", {"source": "proj"})).data
    assert removed["purged"] is False
    orphans = (await client.call_tool("repair_orphans", {})).data
    assert orphans["dry_run"] and orphans["orphan_points"] > 0
    with pytest.raises(ToolError, match="SOURCE_NOT_FOUND"):
        await client.call_tool("sync_source", {"source": "proj"})


def test_cli_source_commands(tree: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    from brain.cli import main

    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    assert main(["source", "add", str(tree), "--name", "proj", "--exclude", "*.md"]) == 0
    added = capsys.readouterr()
    assert json.loads(added.out)["exclude"] == ["*.md"]
    assert "index it now with: brain sync proj" in added.err  # nothing indexes it otherwise
    assert main(["sync", "proj", "--quiet"]) == 0
    job = json.loads(capsys.readouterr().out)
    assert job["status"] == "done" and job["result"]["files_indexed"] == 30
    (tree / "src" / "late.py").write_text("def late_arrival():\n    return 1\n")
    assert main(["sync", "proj"]) == 0  # off a terminal: the outcome is the last line
    shown = capsys.readouterr()
    assert shown.err.splitlines()[-1] == "sync: 31/31 files, 1 chunks (done)", shown.err
    assert main(["fs-search", "handler_3", "--mode", "grep", "--limit", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["path"] == "src/m3.py"
    assert main(["source", "list"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["snapshot"]["indexed"] == 31
    assert main(["source", "update", "proj", "--trigger", "interval", "--interval-s", "600"]) == 0
    capsys.readouterr()
    assert main(["source", "remove", "proj"]) == 0
    capsys.readouterr()
    assert main(["repair-orphans"]) == 0
    assert json.loads(capsys.readouterr().out)["orphan_points"] > 0
    assert main(["sync", "nope"]) == 1


def test_queue_folds_rotates_and_cancels() -> None:
    ran: list[tuple[str, str]] = []
    saw_cancel: list[str] = []
    gate = threading.Event()

    def runner(job):  # noqa: ANN001, ANN202
        gate.wait(HANG_S)
        ran.append((job.project, job.kind))
        if job.cancel.wait(2 * HANG_S if job.source_id == "s4" else 0.01):
            saw_cancel.append(job.source_id)
        return {"paths": sorted(job.paths or [])}

    q = SyncQueue(runner, concurrency=1)
    a1 = q.submit("s1", "A", "targeted", paths={"x"})
    a2 = q.submit("s1", "A", "targeted", paths={"y"})
    assert a1 is a2 and a1.paths == {"x", "y"}  # folded
    a3 = q.submit("s1", "A", "sync")
    assert a3 is a1 and a1.kind == "sync" and a1.paths is None  # a full sync absorbs it
    q.submit("s2", "A", "sync")
    b = q.submit("s3", "B", "sync")
    q.start()
    gate.set()
    assert b.done.wait(HANG_S)
    # project B ran second even though A queued two jobs first: fair rotation
    assert ran[:2] == [("A", "sync"), ("B", "sync")]
    long = q.submit("s4", "C", "sync")
    while long.status != "running":
        time.sleep(0.01)
    q.cancel(long.id)
    # The runner would hold C for a minute unless the cancel reaches it.
    assert long.done.wait(HANG_S) and long.status == "cancelled"
    assert saw_cancel == ["s4"]
    queued = q.submit("s5", "C", "sync")
    q.stop()
    assert queued.status in ("cancelled", "done")
