"""A crash never loses links silently (issue 50, finding 5): kill -9 during an import through
the server, restart, and the links come back with a warning naming the rebuild; a cache that
lost links at the store's own sequence number is caught by the start check that counts notes
with links against the graph's edges."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from brain.app import Brain
from brain.memory.bulk import bulk_add
from brain.process import owner as own
from config import Settings, load_settings
from tests.timing import HANG_S

ROOT = Path(__file__).resolve().parents[2]
N = 1500  # three import batches of 512: the owner is killed inside the third
# Loaded into the server before it starts: the third large upsert of the import completes in
# the store, then the process stops there (it is killed with SIGKILL while it waits), so the
# crash falls between the store's write and the graph cache's save.
HOOK = """
import os, time
from pathlib import Path
from brain.store import guarded

_upsert = guarded.GuardedStore.upsert
_big = [0]

def upsert(self, points):
    _upsert(self, points)
    if len(points) >= 100:
        _big[0] += 1
        if _big[0] == 3:
            (Path(os.environ["BRAIN__HOME"]) / "import_paused").write_text(str(os.getpid()))
            time.sleep(3600)

guarded.GuardedStore.upsert = upsert
"""
LAUNCH = "import crash_hook; import mcp_server; mcp_server.main([])"


def _env(home: Path, hook_dir: Path | None) -> dict[str, str]:
    return {
        **os.environ,
        "BRAIN__HOME": str(home),
        "BRAIN__EMBEDDING__MODEL": "offline/hash-384",
        "BRAIN__WORKERS__ENRICHMENT__ENABLED": "false",
        "PYTHONPATH": f"{hook_dir}:{ROOT}" if hook_dir else str(ROOT),
    }


def _server(home: Path, hook_dir: Path | None) -> Client:
    args = ["-c", LAUNCH] if hook_dir else ["-c", "import mcp_server; mcp_server.main([])"]
    return Client(StdioTransport(command=sys.executable, args=args, env=_env(home, hook_dir),
                                 cwd=str(ROOT), keep_alive=False), timeout=60)


def _offline(home: Path) -> Settings:
    s = load_settings(home=home)
    s.embedding.model = "offline/hash-384"
    return s


def _linked_export(tmp_path: Path) -> tuple[Path, list[str]]:
    """An export of N notes, each linked to the one before and the one after."""
    src = tmp_path / "exporting"
    with own.exclusive(src, "cli"), Brain(_offline(src)) as b:
        bulk_add(b.memory, [f"note {i} about the zephyrquill pipeline" for i in range(N)],
                 project="moved")
        path = Path(b.maintenance.export_jsonl(tmp_path / "raw.jsonl")["path"])
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    notes = [r for r in lines if r.get("type") == "note"]
    ids = [r["payload"]["zk_id"] for r in notes]
    for i, r in enumerate(notes):
        near = [ids[j] for j in (i - 1, i + 1) if 0 <= j < N]
        r["payload"]["links"] = near
        r["payload"]["link_types"] = {z: "related" for z in near}
    out = tmp_path / "linked.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return out, ids


def _import(home: Path, export: Path, on_conflict: str = "error") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "brain.cli", "import", str(export), "--on-conflict", on_conflict],
        env=_env(home, None), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


async def _related(client: Client, zk_id: str) -> set[str]:
    res = await client.call_tool("get_related", {"zk_id": zk_id})
    data: Any = res.structured_content
    return {r["zk_id"] for r in data["related"]}


async def test_a_kill_during_an_import_through_the_server_loses_no_links(
    home: Path, tmp_path: Path
) -> None:
    export, ids = _linked_export(tmp_path)
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "crash_hook.py").write_text(HOOK)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(_server(home, hook_dir))
        info = own.read_info(home)
        assert info is not None
        cli = _import(home, export)
        with anyio.fail_after(HANG_S * 4):
            while not (home / "import_paused").exists():
                await anyio.sleep(0.05)
        os.kill(info.pid, signal.SIGKILL)
        out, err = await anyio.to_thread.run_sync(cli.communicate)
        assert cli.returncode != 0  # the import was not acknowledged: it died with its server
    # Restart: the links of the notes the store holds are back, and the log says so.
    async with _server(home, None) as client:
        assert await _related(client, ids[5]) == {ids[4], ids[6]}
        assert await _related(client, ids[1100]) == {ids[1099], ids[1101]}  # third batch
        log = (home / "brain.log").read_text()
        assert "rebuilt the link graph from the store" in log, log[-3000:]
        # The import resumed (the notes already there skipped) ends with every link.
        again = _import(home, export, "skip")
        out, err = await anyio.to_thread.run_sync(again.communicate)
        assert again.returncode == 0, err[-2000:]
        assert await _related(client, ids[N - 1]) == {ids[N - 2]}
    with own.exclusive(home, "cli"), Brain(_offline(home)) as b:
        assert b.graph.stats()["edges"] == 2 * (N - 1)


def test_a_cache_that_lost_links_at_the_stores_own_number_is_rebuilt(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The start check reads every note's links (a small store) against the graph's edges: a
    cache current by its number but empty while notes have links is rebuilt, with a warning
    that names the cache and counts what it lacked."""
    with Brain(_offline(home)) as b:
        a = b.memory.add("the kestrelwing cache warms at boot", project="p").note["zk_id"]
        c = b.memory.add("kestrelwing warm-up runs twice", project="p").note["zk_id"]
        b.memory.link(a, c)
        seq, path = b.meta.graph_seq, b.graph.path
    data = json.loads(path.read_text())
    assert data["seq"] == seq and data["out"]
    path.write_text(json.dumps({**data, "out": {}}))  # same number, links gone
    with caplog.at_level(logging.WARNING), Brain(_offline(home)) as b:
        assert {n for n, _, _ in b.graph.neighbours(a)} == {c}
        assert b.memory.related(a)["related"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in m and "lacks the links of 2 of 2 notes" in m for m in warned), warned


def test_a_clean_restart_warns_of_nothing(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Brain(_offline(home)) as b:
        a = b.memory.add("the ospreyfold index is sharded", project="p").note["zk_id"]
        c = b.memory.add("ospreyfold shards rebalance nightly", project="p").note["zk_id"]
        b.memory.link(a, c)
    with caplog.at_level(logging.INFO), Brain(_offline(home)) as b:
        assert {n for n, _, _ in b.graph.neighbours(a)} == {c}
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("graph cache loaded") for m in messages), messages
    assert not [m for m in messages if "rebuilt the link graph" in m]


def test_the_cache_is_never_saved_between_a_link_write_and_its_graph_change(
    home: Path
) -> None:
    """A write bumps the graph's number, writes the store, then changes the graph, all under
    the notes' write lock; the saver takes the cache under the same lock, so a cache stamped
    with the new number always holds the new link (else a crash loads it as current)."""
    import threading

    from brain.notes import point_id

    with Brain(_offline(home)) as b:
        a = b.memory.add("the grebemoor cache", project="p", autolink=False).note["zk_id"]
        c = b.memory.add("grebemoor warm-up", project="p", autolink=False).note["zk_id"]
        b.save_graph()
        mid_write, saved = threading.Event(), threading.Event()

        def writer() -> None:  # a link write, held open between its store write and graph
            with b.memory._write_lock:
                b.meta.mark_graph_dirty()
                b.store.set_payload([point_id(a)], {"links": [c], "link_types": {c: "related"}})
                mid_write.set()
                saved.wait(timeout=1.0)  # a saver that does not wait for the lock saves now
                b.graph.set_links(a, [c], {c: "related"})

        def saver() -> None:
            mid_write.wait()
            b.save_graph()
            saved.set()

        threads = [threading.Thread(target=writer), threading.Thread(target=saver)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        data = json.loads(b.graph.path.read_text())
        assert data["seq"] == b.meta.graph_seq
        assert [c, "related"] in data["out"][a]
