"""Storage faults: a store that lost data refuses to serve, a full disk refuses writes (never a
SIGBUS), snapshots restore every acknowledged note, and every start failure is the documented
one-line error with exit code 2, also written to brain.log.

Real parts throughout: Qdrant Edge in temp dirs, real server subprocesses, and a real small
filesystem (a size-limited tmpfs, mounted per test; skipped where mounting is not allowed).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.errors import DiskFull, StoreDamaged
from brain.memory import RecallFilter
from config import Settings, load_settings
from tests.conftest import hash_embedder
from tests.timing import HANG_S

ROOT = Path(__file__).resolve().parents[2]
SERVE_COMMANDS = {
    "mcp_server": [sys.executable, str(ROOT / "mcp_server.py")],
    "brain_serve": [sys.executable, "-m", "brain.cli", "serve"],
}


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN__")}
    env.update({"BRAIN__HOME": str(home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
                "BRAIN__EMBEDDING__MODEL": "offline/hash-384", **extra})
    return env


def _open(settings: Settings) -> Brain:
    settings.embedding.model = "offline/hash-384"
    return Brain(settings, embedder=hash_embedder()).open()


def _build(settings: Settings, n: int) -> list[str]:
    """A brain with ``n`` permanent notes, closed cleanly; returns their ids."""
    b = _open(settings)
    try:
        ids = [b.memory.add(f"note {i}: service {i % 5} retries with backoff {i}",
                            project="ops").note["zk_id"] for i in range(n)]
    finally:
        b.close()
    return ids


def _shard(home: Path) -> Path:
    # The shard's directory; its sibling <shard>.lock file keeps a second process out.
    (shard,) = [p for p in (home / "store").iterdir() if p.is_dir()]
    return shard


def _id_tracker(home: Path) -> Path:
    (path,) = _shard(home).glob("segments/*/mutable_id_tracker.mappings")
    return path


def _assert_refused(settings: Settings, *words: str) -> StoreDamaged:
    with pytest.raises(StoreDamaged) as info:
        _open(settings)
    msg = str(info.value)
    assert msg.startswith("[STORE_DAMAGED]")
    for w in words:
        assert w in msg, msg
    return info.value


# ------------------------------------------------------------------------ damage at start
def test_truncated_id_tracker_refuses_to_serve(settings: Settings) -> None:
    _build(settings, 30)
    tracker = _id_tracker(settings.home)
    with tracker.open("r+b") as fh:
        fh.truncate(100)
    err = _assert_refused(settings, "brain restore", "brain snapshots")
    # The damage is named: how many points were expected and how many were found.
    assert err.details["expected"] >= 31 > err.details["found"]
    # Refused means refused: a second attempt still refuses (nothing re-baselined it).
    _assert_refused(settings)


def test_deleted_store_dir_is_damage_not_a_fresh_start(settings: Settings) -> None:
    _build(settings, 5)
    shutil.rmtree(settings.home / "store")
    _assert_refused(settings, "missing", "brain restore")
    # Also when the manifest is gone too: the graph cache shows a brain existed here.
    shutil.rmtree(settings.home / "store", ignore_errors=True)
    (settings.home / "store_manifest.json").unlink(missing_ok=True)
    _assert_refused(settings, "missing")


def test_new_data_dir_starts_and_reopens_cleanly(settings: Settings) -> None:
    _build(settings, 3)
    b = _open(settings)  # a clean reopen is no damage
    try:
        assert len(list(b.memory.notes())) == 3
    finally:
        b.close()


def test_graph_cache_holding_more_notes_than_the_store_is_damage(settings: Settings) -> None:
    """The issue's case: the graph cache knew 494 notes, the store served 3."""
    _build(settings, 12)
    # Lose notes behind the manifest's back: the record is re-baselined, the graph is not.
    manifest = settings.home / "store_manifest.json"
    with _id_tracker(settings.home).open("r+b") as fh:
        fh.truncate(100)
    data = json.loads(manifest.read_text())
    data["points"] = 0
    manifest.write_text(json.dumps(data))
    _assert_refused(settings, "graph")


def test_scribbled_vectors_are_detected(settings: Settings) -> None:
    _build(settings, 20)
    (chunk,) = _shard(settings.home).glob("segments/*/vector_storage-dense/vectors/chunk_0.mmap")
    rnd = random.Random(13)
    with chunk.open("r+b") as fh:  # 21 points x 384 float32: scribble every vector
        fh.write(bytes(rnd.getrandbits(8) for _ in range(21 * 384 * 4)))
    _assert_refused(settings, "vector")


@pytest.mark.parametrize("target", ["segments/*/payload_storage/page_0.dat",
                                    "segments/*/mutable_id_tracker.mappings",
                                    "segments/*/vector_storage-bm25/store/page_0.dat"])
def test_scribbled_store_files_are_detected(settings: Settings, target: str) -> None:
    """Payloads that no longer decode, or files Edge cannot load: damage, not a traceback."""
    _build(settings, 20)
    (path,) = _shard(settings.home).glob(target)
    rnd = random.Random(5)
    with path.open("r+b") as fh:
        fh.write(bytes(rnd.getrandbits(8) for _ in range(4096)))
    _assert_refused(settings, "brain restore")


def test_accept_loss_rebaselines_after_a_decision(settings: Settings) -> None:
    _build(settings, 10)
    with _id_tracker(settings.home).open("r+b") as fh:
        fh.truncate(100)
    _assert_refused(settings)
    proc = subprocess.run([sys.executable, "-m", "brain.cli", "accept-loss"], cwd=str(ROOT),
                          env=_env(settings.home), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    _open(settings).close()


# ------------------------------------------------------------------------ snapshots
def test_snapshot_restore_round_trip_brings_back_every_note(settings: Settings) -> None:
    b = _open(settings)
    try:
        ids = [b.memory.add(f"decision {i}: use postgres {i} for the ledger",
                            project="ops").note["zk_id"] for i in range(15)]
        edges = b.graph.edges()
        snap = b.snapshots.take()
    finally:
        b.close()
    assert snap["points"] >= 16
    with _id_tracker(settings.home).open("r+b") as fh:
        fh.truncate(100)
    _assert_refused(settings, snap["name"])  # the message names the newest snapshot

    listed = subprocess.run([sys.executable, "-m", "brain.cli", "snapshots"], cwd=str(ROOT),
                            env=_env(settings.home), capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and snap["name"] in listed.stdout, listed.stderr
    proc = subprocess.run([sys.executable, "-m", "brain.cli", "restore", snap["name"]],
                          cwd=str(ROOT), env=_env(settings.home), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr

    b = _open(settings)
    try:
        assert sorted(n["zk_id"] for n in b.memory.notes()) == sorted(ids)
        assert b.graph.edges() == edges
        assert b.memory.search("postgres ledger decision", 3, RecallFilter(project="ops"))
        b.memory.add("written after the restore", project="ops")  # serves normally again
    finally:
        b.close()
    _open(settings).close()  # and the restored store passes its check on the next start
    # The damaged store was kept aside, never deleted.
    assert any(p.name.startswith("store.damaged-") for p in settings.home.iterdir())


def test_snapshots_keep_the_last_n(settings: Settings) -> None:
    from brain.store import snapshots

    settings.storage.snapshots_keep = 2
    b = _open(settings)
    try:
        names = []
        for i in range(3):
            b.memory.add(f"fact {i}")
            names.append(b.snapshots.take()["name"])
    finally:
        b.close()
    assert [s["name"] for s in snapshots.list_snapshots(settings.home)] == names[1:]


def test_snapshot_worker_takes_one_when_something_changed(settings: Settings) -> None:
    from brain.store.snapshots import list_snapshots

    b = _open(settings)
    try:
        assert "snapshot" in b.workers.names()
        b.memory.add("the worker should snapshot this")
        first = b.workers.run_now("snapshot")
        assert first["snapshot"] and first["points"] >= 2
        assert "skipped" in b.workers.run_now("snapshot")  # nothing written since
        b.memory.add("and this too")
        assert b.workers.run_now("snapshot")["snapshot"] != first["snapshot"]
    finally:
        b.close()
    assert len(list_snapshots(settings.home)) == 2


# ------------------------------------------------------------------------ kill -9
def _rpc(i: int, method: str, params: dict) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
            + "\n").encode()


def _kill_during_writes(home: Path, rnd: random.Random) -> list[str]:
    """Pipeline add_memory calls into a stdio server, SIGKILL it mid-stream; returns the
    note ids it acknowledged."""
    proc = subprocess.Popen(SERVE_COMMANDS["mcp_server"], cwd=str(ROOT), env=_env(home),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}
    proc.stdin.write(_rpc(0, "initialize", init))
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    for i in range(1, 200):
        proc.stdin.write(_rpc(i, "tools/call", {"name": "add_memory", "arguments": {
            "content": f"crash test note {rnd.random()} about queue {i}", "project": "k"}}))
    proc.stdin.flush()
    acked: list[str] = []
    kill_after = rnd.randint(3, 40)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            msg = json.loads(line)
            sc = (msg.get("result") or {}).get("structuredContent") or {}
            if "note" in sc:
                acked.append(sc["note"]["zk_id"])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while len(acked) < kill_after and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    time.sleep(rnd.random() * 0.05)
    n_acked = len(acked)  # acknowledged before the kill was sent
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return acked[:n_acked]


def test_kill9_during_writes_never_raises_a_false_alarm(settings: Settings) -> None:
    rnd = random.Random(7)
    acked: list[str] = []
    for _ in range(4):
        acked += _kill_during_writes(settings.home, rnd)
        b = _open(settings)  # raises StoreDamaged on a false alarm
        try:
            have = {n["zk_id"] for n in b.memory.notes()}
        finally:
            b.close()
        assert set(acked) <= have
    print(f"{len(acked)} notes acknowledged across the kills")
    assert acked


# ------------------------------------------------------------------------ start failures
def _one_line_refusal(proc: subprocess.CompletedProcess[str], home: Path, code: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("opencode-brain: [")]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"opencode-brain: [{code}]"), lines
    assert proc.stdout == ""
    log = (home / "brain.log").read_text(encoding="utf-8", errors="replace")
    assert lines[0] in log
    assert "Traceback" not in log
    return lines[0]


def _serve(cmd: str, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(SERVE_COMMANDS[cmd] + list(args), input="", capture_output=True,
                          text=True, timeout=180, env=_env(home, **env), cwd=str(ROOT))


@pytest.mark.parametrize("cmd", sorted(SERVE_COMMANDS))
def test_damaged_store_start_is_one_line_exit_2(cmd: str, settings: Settings) -> None:
    _build(settings, 8)
    with _id_tracker(settings.home).open("r+b") as fh:
        fh.truncate(100)
    line = _one_line_refusal(_serve(cmd, settings.home), settings.home, "STORE_DAMAGED")
    assert "brain restore" in line


def test_damaged_store_http_start_is_one_line_exit_2(settings: Settings) -> None:
    _build(settings, 4)
    shutil.rmtree(settings.home / "store")
    _one_line_refusal(_serve("brain_serve", settings.home, "--http", "--port", "0"),
                      settings.home, "STORE_DAMAGED")


def test_store_locked_start_is_one_line_exit_2(settings: Settings) -> None:
    """Another process holds the shard itself (not the data dir's owner lock)."""
    _build(settings, 2)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, qdrant_edge as qe; s = qe.EdgeShard.load(sys.argv[1]);"
         " print('held', flush=True); sys.stdin.read()", str(_shard(settings.home))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        _one_line_refusal(_serve("mcp_server", settings.home), settings.home, "STORE_LOCKED")
    finally:
        holder.kill()
        holder.wait(timeout=30)


@pytest.mark.parametrize("cmd", sorted(SERVE_COMMANDS))
def test_model_unavailable_start_is_one_line_exit_2(cmd: str, home: Path) -> None:
    proc = _serve(cmd, home, BRAIN__EMBEDDING__MODEL="nobody/no-such-model")
    _one_line_refusal(proc, home, "MODEL_UNAVAILABLE")


@pytest.mark.parametrize("cmd", sorted(SERVE_COMMANDS))
def test_bad_config_start_is_one_line_exit_2(cmd: str, home: Path) -> None:
    home.mkdir(parents=True)
    line = _one_line_refusal(_serve(cmd, home, BRAIN__DECAY__STALE_DAYS="soon"), home,
                             "CONFIG_INVALID")
    assert "BRAIN__DECAY__STALE_DAYS" in line


async def test_takeover_of_a_damaged_store_answers_store_damaged(settings: Settings) -> None:
    """A proxy that takes over from a dead owner and finds the store damaged answers every
    call with the reason at once (not a 30 s wait for an owner that will never come)."""
    from brain.process import owner as own

    _build(settings, 6)
    home = settings.home
    env = _env(home, BRAIN__WORKERS__ENRICHMENT__ENABLED="false")
    owner = subprocess.Popen(SERVE_COMMANDS["mcp_server"], cwd=str(ROOT), env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while (info := own.read_info(home)) is None or info.pid != owner.pid:
            assert time.monotonic() < deadline and owner.poll() is None
            time.sleep(0.05)
        transport = StdioTransport(command=sys.executable, args=[str(ROOT / "mcp_server.py")],
                                   env=env, cwd=str(ROOT), keep_alive=False)
        async with Client(transport, timeout=60) as proxy:
            res = await proxy.call_tool("search_memory", {"query": "service retries backoff",
                                                          "project": "ops"})
            assert res.structured_content["count"] >= 1  # forwarded to the healthy owner
            os.kill(owner.pid, signal.SIGSTOP)  # damage the store while nobody can write
            with _id_tracker(home).open("r+b") as fh:
                fh.truncate(100)
            os.kill(owner.pid, signal.SIGKILL)
            owner.wait(timeout=30)
            t0 = time.monotonic()
            with pytest.raises(ToolError) as err:
                await proxy.call_tool("search_memory", {"query": "service", "project": "ops"})
            assert "STORE_DAMAGED" in str(err.value) and "brain restore" in str(err.value)
            assert time.monotonic() - t0 < HANG_S  # the proxy noticed, not its 60 s timeout
    finally:
        owner.kill()
        owner.wait(timeout=30)
    assert "[STORE_DAMAGED]" in (home / "brain.log").read_text(encoding="utf-8")


# ------------------------------------------------------------------------ full disk
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 160 MB filesystem (tmpfs allocates every page Edge preallocates: a new store
    takes ~52 MB here): writes past its end fail the way a full disk does."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """Take all but ``leave`` bytes of the filesystem."""
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    filler = disk / f"filler-{time.monotonic_ns()}"
    with filler.open("wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, max(free - leave, 4096))
    return filler


MARGIN = {"BRAIN__STORAGE__MIN_FREE_MB": "4"}


@pytest.mark.parametrize("cmd", sorted(SERVE_COMMANDS))
def test_full_disk_at_start_is_disk_full_not_sigbus(cmd: str, small_disk: Path) -> None:
    home = small_disk / "home"
    home.mkdir()
    _fill(small_disk, 1 << 20)
    proc = _serve(cmd, home, **MARGIN)
    assert proc.returncode != -signal.SIGBUS and proc.returncode != 128 + signal.SIGBUS
    line = _one_line_refusal(proc, home, "DISK_FULL")
    assert "MB" in line


def test_full_disk_at_start_of_an_existing_brain(small_disk: Path) -> None:
    home = small_disk / "home"
    settings = load_settings(home=home)
    settings.storage.min_free_mb = 4
    _build(settings, 5)
    _fill(small_disk, 1 << 20)
    with pytest.raises(DiskFull):
        _open(settings)


async def test_disk_filling_while_running_refuses_writes_serves_reads(small_disk: Path) -> None:
    home = small_disk / "home"
    transport = StdioTransport(command=sys.executable, args=[str(ROOT / "mcp_server.py")],
                               env=_env(home, **MARGIN), cwd=str(ROOT))
    async with Client(transport) as client:
        for i in range(3):
            await client.call_tool("add_memory", {"content": f"kafka topic {i} has 12 "
                                                  "partitions", "project": "d"})
        filler = _fill(small_disk, 1 << 20)
        with pytest.raises(ToolError) as info:
            await client.call_tool("add_memory", {"content": "one too many", "project": "d"})
        assert "DISK_FULL" in str(info.value)
        res = await client.call_tool("search_memory", {"query": "kafka partitions",
                                                       "project": "d", "top_k": 10})
        assert res.structured_content["count"] == 3  # reads go on; nothing half-written
        filler.unlink()
        await client.call_tool("add_memory", {"content": "space is back", "project": "d"})
        res = await client.call_tool("brain_stats", {})
        assert res.structured_content is not None


_CHURN = """
import sys, uuid
sys.path.insert(0, {root!r})
from brain.app import Brain
from brain.vector_store import Match, Point, match_all
from config import load_settings
from tests.conftest import hash_embedder
s = load_settings()
b = Brain(s, embedder=hash_embedder()).open()
print("ready", flush=True)
i = 0
while True:  # deletes and upserts of scratch points, until killed
    i += 1
    b.store.upsert([Point(str(uuid.uuid4()), {{"kind": "scratch", "n": i}}) for _ in range(5)])
    b.store.delete_by_filter(match_all(kind="scratch"))
    b.store.upsert([Point(str(uuid.uuid4()), {{"kind": "scratch", "n": i}})])
"""


def test_the_manifest_follows_writes_by_the_ids_they_add(settings: Settings) -> None:
    """A write raises the manifest's record by the ids it adds, found by id (counting the
    store after every write read all of it): not by ids it rewrites, nor twice for an id
    written twice in one batch. Deletes lower it; the record matches the store throughout."""
    from brain.vector_store import Filter, Match, Point

    _build(settings, 3)
    b = _open(settings)
    try:
        g = b._guarded
        manifest = settings.home / "store_manifest.json"

        def recorded() -> int:
            # The file may lag a growth by up to LAZY_S (it stays a lower bound), never lead.
            assert json.loads(manifest.read_text())["points"] <= int(g.manifest.points or 0)
            return int(g.manifest.points or 0)

        assert recorded() == g.inner.count(None)
        zk = b.memory.add("a new note about retries", project="ops").note["zk_id"]
        assert recorded() == g.inner.count(None)
        b.memory.update(zk, "a new note about retries with jitter")  # rewrites, adds nothing
        assert recorded() == g.inner.count(None)
        old = g.inner.scroll(None, limit=1, with_vectors=True)[0][0]
        vec = old.dense
        fresh = [Point(f"00000000-0000-4000-8000-00000000000{i}", {"kind": "bulk"}, vec)
                 for i in range(3)]
        before = recorded()
        g.upsert([*fresh, fresh[0], old])  # 3 new ids, one twice, one existing point
        assert recorded() == before + 3 == g.inner.count(None)
        g.delete([fresh[0].id])
        assert recorded() == before + 2 == g.inner.count(None)
        absent = "00000000-0000-4000-8000-0000000000ff"
        g.delete([fresh[1].id, absent, fresh[1].id])  # lowered by the one id it removes
        assert recorded() == before + 1 == g.inner.count(None)
        g.upsert([fresh[0]])
        g.delete_by_filter(Filter(must=(Match("kind", "bulk"),)))  # by the points it matches
        assert recorded() == before == g.inner.count(None)
        # A delete is on file before the store drops anything.
        assert json.loads(manifest.read_text())["points"] == before
        b.memory.add("a note whose count may wait for the next rewrite", project="ops")
        assert recorded() == before + 1
    finally:
        b.close()
    assert json.loads(manifest.read_text())["points"] == before + 1  # written at close
    # A record below the store (a crash between a write and its record) is no alarm; writes
    # from the next open move it from what is there, not from the old record.
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "points": data["points"] - 2}))
    b = _open(settings)
    try:
        b.memory.add("one more note after the reopen", project="ops")
        count = b._guarded.inner.count(None)
    finally:
        b.close()
    assert json.loads(manifest.read_text())["points"] == count


def test_kill9_during_deletes_never_raises_a_false_alarm(settings: Settings) -> None:
    """A delete lowers the record before the store: a kill at any instant leaves it low."""
    _build(settings, 5)
    rnd = random.Random(11)
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-c", _CHURN.format(root=str(ROOT))],
                                cwd=str(ROOT), env=_env(settings.home), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.05 + rnd.random() * 0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        b = _open(settings)  # raises StoreDamaged on a false alarm
        try:
            assert len(list(b.memory.notes())) == 5
        finally:
            b.close()
