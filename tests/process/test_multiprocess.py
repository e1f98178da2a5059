"""Several stdio servers on one data dir: one owner, the rest forward; failover on SIGKILL.

Real processes (``python mcp_server.py`` over stdio, as an agent launches it), real Qdrant
Edge, the offline hash embedder. A hook module wrapped around ``Brain._start_background``
counts how often the Brain's background work and the source watcher start per data dir, and in
which process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.process import owner as own
from config import load_settings
from tests.timing import HANG_S

ROOT = Path(__file__).resolve().parents[2]
# Notes per client: the done-when scale, 3 x 200 (~45 s for the first test on a busy 2-core
# box; BRAIN_MP_N=60 for a quick run).
N_EACH = int(os.environ.get("BRAIN_MP_N", "200"))
# Survivors answer again after the owner's SIGKILL. The done-when figure (within 2 s) is a
# measurement: BRAIN_MP_FAILOVER_S=2 asks for it on a quiet box; by default the test only
# catches a failover that hangs, so it passes on a loaded one (issue 49).
FAILOVER_BUDGET_S = float(os.environ.get("BRAIN_MP_FAILOVER_S", str(HANG_S)))
IN_FLIGHT = 8  # calls each client keeps in flight in the failover run
# Counts, per process, Brain hook starts and the source watcher's starts and watch runs (a
# watch run is the watcher actually watching a set of source roots).
HOOK = """
import os
from pathlib import Path
from brain.sources import watcher as w

def _note(name, line):
    with open(Path(os.environ["BRAIN__HOME"]) / name, "a") as fh:
        fh.write(line + "\\n")

_start, _watch = w.SourceWatcher.start, w.SourceWatcher._watch
def _counted_start(self):
    _note("watcher_starts.txt", str(os.getpid()))
    return _start(self)
def _counted_watch(self, watched):
    _note("watch_runs.txt", f"{os.getpid()} {len(watched)}")
    return _watch(self, watched)
w.SourceWatcher.start, w.SourceWatcher._watch = _counted_start, _counted_watch

def start(brain):
    _note("hook_starts.txt", str(os.getpid()))
def stop(brain):
    pass
"""
LAUNCH = (
    "import mp_count_hook; import brain.app as a; "
    "_bg = a.Brain._start_background; "
    "a.Brain._start_background = lambda b: (mp_count_hook.start(b), _bg(b))[1]; "
    "import mcp_server; mcp_server.main([])"
)


def _transport(home: Path, hook_dir: Path, agent: str) -> StdioTransport:
    env = {
        **os.environ,
        "BRAIN__HOME": str(home),
        "BRAIN__EMBEDDING__MODEL": "offline/hash-384",
        "BRAIN__IDENTITY__AGENT_ID": agent,
        "PYTHONPATH": f"{hook_dir}:{ROOT}",
        "BRAIN__WORKERS__ENRICHMENT__ENABLED": "false",
        "BRAIN__MCP__TOOLS": "full",  # the shared-brain test adds a source (an admin tool)
    }
    return StdioTransport(
        command=sys.executable, args=["-c", LAUNCH], env=env, cwd=str(ROOT), keep_alive=False
    )


@pytest.fixture
def hook_dir(tmp_path: Path) -> Path:
    d = tmp_path / "hooks"
    d.mkdir()
    (d / "mp_count_hook.py").write_text(HOOK)
    return d


async def _start(stack: AsyncExitStack, home: Path, hook_dir: Path, n: int) -> list[Client]:
    clients = [Client(_transport(home, hook_dir, f"agent{i}"), timeout=60) for i in range(n)]
    # The first one becomes the owner; start it first so the others meet a ready owner.
    await stack.enter_async_context(clients[0])
    async with anyio.create_task_group() as tg:
        for c in clients[1:]:
            tg.start_soon(stack.enter_async_context, c)
    return clients


def _word(c: int, i: int) -> str:
    return f"zq{c}x{i:03d}w"


def _stored_notes(home: Path) -> list[dict[str, Any]]:
    settings = load_settings(home=home)
    settings.embedding.model = "offline/hash-384"
    with own.exclusive(home, "cli"), Brain(settings) as b:
        return list(b.memory.notes())


async def _wait_found(client: Client, query: str, name: str, timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        while True:
            res = await client.call_tool(
                "fs_search", {"query": query, "search_mode": "filter", "source": "watched"}
            )
            if name in json.dumps(res.structured_content):
                return
            await anyio.sleep(0.2)


async def _auto_source_watched_once(clients: list[Client], home: Path, src: Path) -> None:
    """An auto source added through a proxy: its files are indexed once, by the owner's one
    watcher, and found from every server."""
    src.mkdir()
    (src / "first.py").write_text("def kettlewhistle():\n    return 1\n")
    await clients[1].call_tool(
        "add_source", {"path": str(src), "name": "watched", "trigger": "auto"}
    )
    await _wait_found(clients[2], "kettlewhistle", "first.py")
    (src / "second.py").write_text("def zebraquokka():\n    return 2\n")  # watcher's job
    await _wait_found(clients[0], "zebraquokka", "second.py")
    owner = own.read_info(home).pid
    starts = (home / "watcher_starts.txt").read_text().split()
    runs = [line.split() for line in (home / "watch_runs.txt").read_text().splitlines()]
    assert starts == [str(owner)]  # one watcher for the data dir, however many servers
    assert {pid for pid, _ in runs} == {str(owner)}
    assert any(n == "1" for _, n in runs)


async def test_three_servers_share_one_brain(home: Path, hook_dir: Path, tmp_path: Path) -> None:
    n_each = N_EACH
    errors: list[str] = []
    ids: dict[tuple[int, int], str] = {}
    async with AsyncExitStack() as stack:
        clients = await _start(stack, home, hook_dir, 3)

        async def one(c: int, i: int) -> None:
            try:
                res = await clients[c].call_tool(
                    "add_memory",
                    {"content": f"note {_word(c, i)} written by client {c}", "project": "mp"},
                )
                ids[(c, i)] = res.structured_content["note"]["zk_id"]
                await clients[c].call_tool("search_memory", {"query": _word(c, i), "project": "mp"})
            except Exception as exc:  # noqa: BLE001 - counted and asserted below
                errors.append(f"{c}/{i}: {exc}")

        async with anyio.create_task_group() as tg:
            for i in range(n_each):
                for c in range(3):
                    tg.start_soon(one, c, i)
        assert errors == []

        missing: list[str] = []
        limiter = anyio.Semaphore(30)

        async def found_by_others(c: int, i: int) -> None:
            async with limiter:
                for other in {0, 1, 2} - {c}:
                    res = await clients[other].call_tool(
                        "search_memory", {"query": _word(c, i), "project": "mp", "top_k": 3}
                    )
                    got = [h["zk_id"] for h in res.structured_content["results"]]
                    if ids[(c, i)] not in got:
                        missing.append(f"{ids[(c, i)]} not found by client {other}")

        async with anyio.create_task_group() as tg:
            for c, i in list(ids):
                tg.start_soon(found_by_others, c, i)
        assert missing == []
        info = own.read_info(home)
        assert info is not None and info.alive and Path(info.address).exists()
        await _auto_source_watched_once(clients, home, tmp_path / "src")
        # A failing call through a proxy fails the same way as on the owner, and the proxy
        # keeps serving.
        for c in clients:
            with pytest.raises(ToolError, match=r"\[NOTE_NOT_FOUND\]"):
                await c.call_tool("get_related", {"zk_id": "ZK-00000000"})
            with pytest.raises(ToolError, match="depth"):
                await c.call_tool("get_related", {"zk_id": ids[(0, 0)], "depth": 9})
        res = await clients[2].call_tool("get_related", {"zk_id": ids[(0, 0)]})
        assert res.structured_content["note"]["zk_id"] == ids[(0, 0)]

    notes = _stored_notes(home)
    contents = Counter(n["content"] for n in notes)
    assert len(notes) == 3 * n_each
    assert max(contents.values()) == 1  # no duplicates
    assert {n["agent_id"] for n in notes} == {"agent0", "agent1", "agent2"}
    # Background work (hooks) started once for the data dir, by the one owner.
    assert len((home / "hook_starts.txt").read_text().split()) == 1
    assert len((home / own.HISTORY_FILE).read_text().splitlines()) == 1
    assert own.read_info(home) is None  # the owner cleaned up on exit


async def test_owner_killed_mid_run(home: Path, hook_dir: Path) -> None:
    n_each = N_EACH
    acked: dict[str, str] = {}  # content -> zk_id
    errors: dict[int, list[str]] = {0: [], 1: [], 2: []}
    killed_at: list[float] = []
    served_after_kill: dict[int, float] = {}  # survivor -> s from kill to its first answer
    async with AsyncExitStack() as stack:
        clients = await _start(stack, home, hook_dir, 3)
        info = own.read_info(home)
        assert info is not None
        owner_pid = info.pid
        # Each agent keeps a few calls in flight, as a busy agent session does.
        inflight = {c: anyio.Semaphore(IN_FLIGHT) for c in range(3)}

        async def one(c: int, i: int) -> None:
            content = f"note {_word(c, i)} written by client {c}"
            async with inflight[c]:
                try:
                    res = await clients[c].call_tool(
                        "add_memory", {"content": content, "project": "mp"}
                    )
                    acked[content] = res.structured_content["note"]["zk_id"]
                    await clients[c].call_tool(
                        "search_memory", {"query": _word(c, i), "project": "mp"}
                    )
                except Exception as exc:  # noqa: BLE001
                    errors[c].append(str(exc))

        async def probe(c: int) -> None:
            """Calls sent after the kill can only be answered by a new owner: time the
            first answer (a probe every 0.2 s, so none is stuck behind another)."""
            done = anyio.Event()

            async def once() -> None:
                try:
                    await clients[c].call_tool("search_memory", {"query": "probe", "project": "mp"})
                except Exception as exc:  # noqa: BLE001
                    errors[c].append(f"probe: {exc}")
                    return
                if not done.is_set():
                    served_after_kill[c] = time.monotonic() - killed_at[0]
                    done.set()

            async with anyio.create_task_group() as probes:
                while not done.is_set() and time.monotonic() - killed_at[0] < 2 * HANG_S:
                    probes.start_soon(once)
                    with anyio.move_on_after(0.2):
                        await done.wait()

        async def killer(tg: anyio.abc.TaskGroup) -> None:
            while len(acked) < n_each * 3 // 2:
                await anyio.sleep(0.005)
            os.kill(owner_pid, signal.SIGKILL)
            killed_at.append(time.monotonic())
            for c in (1, 2):
                tg.start_soon(probe, c)

        async with anyio.create_task_group() as tg:
            tg.start_soon(killer, tg)
            for i in range(n_each):
                for c in range(3):
                    tg.start_soon(one, c, i)
        # Survivors never failed, and answered again within the budget after the kill.
        assert errors[1] == [] and errors[2] == []
        print(f"served again after the kill: {served_after_kill} s")
        assert set(served_after_kill) == {1, 2}
        assert max(served_after_kill.values()) < FAILOVER_BUDGET_S, served_after_kill
        new = own.read_info(home)
        assert new is not None and new.pid != owner_pid and new.alive
        new_pid = new.pid
        # The new owner serves a search for a note acknowledged before the kill.
        res = await clients[1].call_tool(
            "search_memory", {"query": _word(2, 0), "project": "mp", "top_k": 3}
        )
        assert acked[f"note {_word(2, 0)} written by client 2"] in [
            h["zk_id"] for h in res.structured_content["results"]
        ]
        with anyio.move_on_after(5):
            await clients[0].close()

    notes = _stored_notes(home)
    by_content = Counter(n["content"] for n in notes)
    assert max(by_content.values()) == 1  # no duplicates, retried writes included
    stored = {n["content"]: n["zk_id"] for n in notes}
    lost = {c: z for c, z in acked.items() if stored.get(c) != z}
    assert lost == {}
    assert len(acked) >= 2 * n_each  # both survivors' writes all acknowledged
    history = [json.loads(x) for x in (home / own.HISTORY_FILE).read_text().splitlines()]
    # First owner, then the survivor that took over (a third line: the last survivor took
    # over again when the test closed the new owner's client).
    assert history[0]["pid"] == owner_pid and history[1]["pid"] == new_pid


def _export_of(tmp_path: Path, contents: list[str]) -> Path:
    """An export of a brain in its own home holding ``contents`` (one note each)."""
    from brain.memory.bulk import bulk_add

    src = tmp_path / "exporting"
    settings = load_settings(home=src)
    settings.embedding.model = "offline/hash-384"
    with own.exclusive(src, "cli"), Brain(settings) as b:
        bulk_add(b.memory, contents, project="moved")
        return Path(b.maintenance.export_jsonl(tmp_path / "notes.jsonl")["path"])


async def test_import_runs_in_the_server_that_owns_the_dir(
    home: Path, hook_dir: Path, tmp_path: Path
) -> None:
    export = _export_of(tmp_path, ["the quokkabridge deploy needs a warm cache",
                                   "zebrafinch tokens rotate every Monday"])
    cmd = [sys.executable, "-m", "brain.cli", "import", str(export)]
    env = {**os.environ, "BRAIN__HOME": str(home)}

    def run() -> Any:
        return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=120)

    async with AsyncExitStack() as stack:
        (client,) = await _start(stack, home, hook_dir, 1)
        done = await anyio.to_thread.run_sync(run)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "through the running server" in done.stderr
        assert json.loads(done.stdout)["imported"] == 2
        res = await client.call_tool("search_memory", {"query": "quokkabridge deploy",
                                                       "project": "moved"})
        hits = res.structured_content["results"]
        assert "quokkabridge" in json.dumps(hits[0])
        # The same export again: its ids are there now, and the owner refuses by default.
        again = await anyio.to_thread.run_sync(run)
        assert again.returncode == 1 and "[CONFLICT]" in again.stderr


async def test_cli_refuses_while_a_server_owns_the_dir(home: Path, hook_dir: Path) -> None:
    from brain.cli import open_brain
    from brain.errors import StoreLocked

    async with AsyncExitStack() as stack:
        await _start(stack, home, hook_dir, 1)
        pid = own.read_info(home).pid
        with pytest.raises(StoreLocked) as err, open_brain():
            pass
        assert f"served by pid {pid}" in str(err.value)
        assert "stop it or retry" in str(err.value)

        from brain.cli.owner import _ask_owner

        report = await anyio.to_thread.run_sync(
            lambda: _ask_owner(own.read_info(home), own.read_owner_token(home))
        )
        assert report["owner"]["pid"] == pid
        assert report["store"]["ok"] is True
        assert report["connected_clients"] == 1
