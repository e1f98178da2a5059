"""Every ``brain`` command that reads or changes a brain works while a server owns it (issue 51).

A real stdio server (``python -m brain.cli serve``, a subprocess on a temp data dir, the bundled
model) owns the brain; this test process is the second shell. The command list is read from
the argparse tree, so a new command fails :func:`test_every_command_is_walked` until it is
given an invocation here, or listed as one that must refuse, or as one that does not open a
brain. Each command then runs in this process (``brain.cli.main``): any that tried to open the
store itself would answer STORE_LOCKED, since the server holds it.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from brain.api import _start_server
from brain.api import open_brain as connect
from brain.cli import build_parser, main
from brain.process import owner as own
from tests.timing import HANG_S

ROOT = Path(__file__).resolve().parents[2]
Argv = list[str] | Callable[[dict[str, Any]], list[str]]

# Commands that never open a brain: they start the owner (serve, ui), write or remove a
# client's config (install, uninstall), run the benchmarks in their own process (bench), add a
# caller token (token add), list the snapshot folder (snapshots), or are a hook, which reaches
# the owner over its call channel as it always has (brain/hooks, tests/hooks).
NOT_A_BRAIN = {("serve",), ("ui",), ("bench",), ("token", "add"), ("snapshots",),
               ("uninstall",), ("hook",)}
# Need the store to themselves (docs/operations.md says why): they refuse, naming the server.
MUST_REFUSE = {("restore",): ["restore", "nosuchsnapshot"], ("accept-loss",): ["accept-loss"]}


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every runnable command of the tree: a parser without subcommands, or one whose
    subcommands are optional (``brain health`` alone is a command too)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {path}
    found = set() if subs[0].required else {path}
    for name, child in subs[0].choices.items():
        found |= leaves(child, (*path, name))
    return found


def _install_leaves() -> set[tuple[str, ...]]:
    return {p for p in leaves(build_parser()) if p[0] == "install"}


def walk(tmp: Path) -> list[tuple[tuple[str, ...], Argv]]:
    """Each command once, in an order where each finds what the ones before made."""
    proj, doc = tmp / "proj", tmp / "guide.md"
    seed = tmp / "seed.jsonl"
    return [
        (("seed",), ["seed", str(seed)]),
        (("source", "add"), ["source", "add", str(proj), "--name", "proj", "--project", "p"]),
        (("source", "list"), ["source", "list"]),
        (("source", "update"), ["source", "update", "proj", "--exclude", "*.tmp"]),
        (("sync",), ["sync", "proj", "--quiet"]),
        (("source", "jobs"), ["source", "jobs", "--source", "proj"]),
        (("source", "reembed"), ["source", "reembed", "proj"]),
        (("source", "cancel"), ["source", "cancel", "proj"]),
        (("fs-search",), ["fs-search", "retry with backoff", "--source", "proj"]),
        (("fs", "read"), ["fs", "read", "proj", "worker.py"]),
        (("fs", "list"), ["fs", "list", "proj"]),
        (("fs", "write"), ["fs", "write", "proj", "notes.txt", "--content", "first words"]),
        (("changes", "list"), ["changes", "list"]),
        (("changes", "preview"), lambda s: ["changes", "preview", s["change"]]),
        (("changes", "approve"), lambda s: ["changes", "approve", s["change"], s["fp"]]),
        (("changes", "revert"), lambda s: ["changes", "revert", s["change"], s["fp"]]),
        (("notes", "verify"), lambda s: ["notes", "verify", s["zk"]]),
        (("notes", "changed-since"), ["notes", "changed-since", "HEAD"]),
        (("ingest",), ["ingest", str(doc), "--project", "p"]),
        (("files", "list"), ["files", "list"]),
        (("files", "show"), lambda s: ["files", "show", s["file"]]),
        (("files", "search"), ["files", "search", "deployment checklist"]),
        (("files", "reprocess"), lambda s: ["files", "reprocess", s["file"]]),
        (("files", "delete"), lambda s: ["files", "delete", s["file"]]),
        (("stats",), ["stats"]),
        (("capabilities",), ["capabilities"]),
        (("status",), ["status"]),
        (("health",), ["health"]),
        (("health", "stats"), ["health", "stats"]),
        (("health", "scan"), ["health", "scan"]),
        (("health", "duplicates"), ["health", "duplicates"]),
        (("health", "hot-files"), ["health", "hot-files"]),
        (("health", "gc"), ["health", "gc"]),
        (("health", "repair"), ["health", "repair"]),
        (("health", "collection"), ["health", "collection"]),
        (("health", "rebuild-indexes"), ["health", "rebuild-indexes"]),
        (("health", "quantization"), ["health", "quantization"]),
        (("migrate",), ["migrate", "memory-schema", "--apply"]),
        (("restore-backup",), ["restore-backup", str(tmp / "backup.json")]),
        (("export",), ["export", str(tmp / "export.jsonl")]),
        (("import",), ["import", str(tmp / "export.jsonl"), "--on-conflict", "skip"]),
        (("maintenance",), ["maintenance"]),
        (("repair-orphans",), ["repair-orphans"]),
        (("snapshot",), ["snapshot"]),
        (("model",), ["model", "status"]),
        (("source", "reset"), ["source", "reset", "proj"]),
        (("source", "remove"), ["source", "remove", "proj"]),
    ]


def _learn(state: dict[str, Any], cmd: tuple[str, ...], out: Any,
           cli: Callable[[list[str]], Any]) -> None:
    """Remember the ids later commands name (a change, a document, a note, a backup)."""
    if cmd == ("fs", "write"):
        state["change"] = out["change"]["id"]
    elif cmd == ("changes", "preview"):
        state["fp"] = out["fingerprint"]
    elif cmd == ("changes", "approve"):  # an approved change is done with: a second to revert
        written = cli(["fs", "write", "proj", "notes.txt", "--content", "second words"])
        state["change"] = written["change"]["id"]
        state["fp"] = cli(["changes", "preview", state["change"]])["fingerprint"]
    elif cmd == ("seed",):
        state["zk"] = out["ids"][0]
    elif cmd == ("ingest",):
        state["file"] = out[0]["id"]


def _project(tmp: Path) -> None:
    proj = tmp / "proj"
    proj.mkdir()
    (proj / "worker.py").write_text("def retry_with_backoff(call, tries=5):\n"
                                    "    '''retry a flaky call with exponential backoff'''\n")
    (proj / "README.md").write_text("# proj\nA worker that retries.\n")
    (tmp / "guide.md").write_text("# Deployment checklist\n\nWarm the cache, then switch.\n")
    (tmp / "backup.json").write_text(json.dumps({"format": "opencode-brain-backup",
                                                 "version": 1, "points": []}))
    (tmp / "seed.jsonl").write_text(json.dumps({"content": "deploys need a warm cache",
                                                "project": "p"}) + "\n")


@pytest.fixture
def server(home: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real stdio server owning ``home`` (the bundled model), stopped at the end."""
    proc = _start_server(home, {}, 120.0)
    try:
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(timeout=HANG_S)


def test_every_command_is_walked(tmp_path: Path) -> None:
    """A new subcommand fails here until it is walked, refused on purpose, or no brain's."""
    walked = {cmd for cmd, _ in walk(tmp_path)}
    assert len(walked) == len(walk(tmp_path))  # each once
    known = walked | set(MUST_REFUSE) | NOT_A_BRAIN | _install_leaves()
    assert leaves(build_parser()) == known
    assert not walked & (set(MUST_REFUSE) | NOT_A_BRAIN)


def test_every_command_goes_through_the_running_server(
    server: subprocess.Popen[bytes], home: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _project(tmp_path)
    pid = own.read_info(home).pid
    state: dict[str, Any] = {}

    def cli(args: list[str]) -> Any:
        capsys.readouterr()
        rc = main(args)
        out, err = capsys.readouterr()
        assert "STORE_LOCKED" not in err, (args, err)
        assert rc == 0, (args, err[-1500:])
        return json.loads(out)

    for cmd, argv in walk(tmp_path):
        _learn(state, cmd, cli(argv(state) if callable(argv) else argv), cli)
    assert own.read_info(home).pid == pid == server.pid  # one owner all along
    # What the commands did is the server's: the source is gone, the seeded note is there.
    with connect(home) as brain:
        assert not brain.started_server
        note = brain.get_note(zk_id=state["zk"])["note"]
    assert note["content"] == "deploys need a warm cache"

    for cmd, args in MUST_REFUSE.items():
        capsys.readouterr()
        assert main(args) == 1, cmd
        err = capsys.readouterr().err
        assert "[STORE_LOCKED]" in err and f"pid {pid}" in err and "stop the server" in err


def _read_until(proc: subprocess.Popen[bytes], needle: bytes, seen: bytearray) -> None:
    """Read ``proc``'s stderr into ``seen`` until ``needle`` shows (or a hang)."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    deadline = time.monotonic() + HANG_S * 4
    while needle not in seen:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk or proc.poll() is None, seen.decode(errors="replace")
            seen += chunk


def _big_folder(tmp: Path) -> Path:
    """A folder whose sync takes a while on the bundled model (600 files, 24,000 lines)."""
    big = tmp / "big"
    big.mkdir()
    for i in range(600):
        (big / f"mod_{i:04d}.py").write_text(
            "\n".join(f"def handler_{i}_{j}(event):\n    return route(event, {j})  # step {j}"
                      for j in range(40)))
    return big


def _interrupted_sync() -> tuple[subprocess.Popen[bytes], str, str]:
    """``brain sync big`` in its own process, sent SIGINT once it shows its progress line:
    (the process, its stdout, its stderr)."""
    cli = subprocess.Popen([sys.executable, "-m", "brain.cli", "sync", "big"], cwd=ROOT,
                           env=dict(os.environ), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        seen = bytearray()
        _read_until(cli, b" files, ", seen)  # it follows the job: one progress line
        cli.send_signal(signal.SIGINT)
        out, rest = cli.communicate(timeout=HANG_S)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    return cli, out.decode(), (bytes(seen) + rest).decode()


def test_ctrl_c_detaches_from_a_sync_in_the_server(
    server: subprocess.Popen[bytes], home: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    big = _big_folder(tmp_path)
    assert main(["source", "add", str(big), "--name", "big"]) == 0
    capsys.readouterr()
    cli, out, err = _interrupted_sync()
    assert cli.returncode == 130, err
    job = json.loads(out)
    assert job["detached"] is True
    assert f"sync job {job['job_id']} continues in the server (pid {server.pid})" in err
    assert "`brain source cancel big` cancels it" in err
    assert "Traceback" not in err

    # The job was not cancelled by the detach, and tool calls answer meanwhile.
    capsys.readouterr()
    assert main(["source", "jobs", "--job", job["job_id"]]) == 0
    assert json.loads(capsys.readouterr().out)["status"] in ("queued", "running", "done")
    with connect(home) as brain:
        found = brain.search_memory(query="anything at all")
    assert "results" in found

    # `brain source cancel NAME` stops it (unless it finished meanwhile).
    assert main(["source", "cancel", "big"]) == 0
    capsys.readouterr()
    deadline = time.monotonic() + HANG_S
    while True:
        assert main(["source", "jobs", "--job", job["job_id"]]) == 0
        status = json.loads(capsys.readouterr().out)["status"]
        if status in ("cancelled", "done"):
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


def _post(home: Path, body: Any, token: str | None = None) -> tuple[int, dict[str, Any]]:
    import httpx

    info = own.read_info(home)
    token = own.read_owner_token(home) if token is None else token
    with httpx.Client(transport=httpx.HTTPTransport(uds=info.address), timeout=HANG_S) as http:
        res = http.post("http://localhost/command", json=body,
                        headers={"Authorization": f"Bearer {token}"})
    return res.status_code, res.json()


def test_the_command_route_checks_its_caller(
    server: subprocess.Popen[bytes], home: Path, tmp_path: Path,
) -> None:
    me = {"user_id": "default", "agent_id": "default"}
    assert _post(home, {"command": "stats", "args": {}, "caller": me}, token="wrong")[0] == 401
    code, data = _post(home, {"command": "stats", "args": {}})
    assert code == 401 and data["error"] == "UNAUTHORIZED" and "name its caller" in data["message"]
    code, data = _post(home, {"command": "stats", "args": [], "caller": me})
    assert code == 400 and data["error"] == "INVALID_ARGUMENT"
    code, data = _post(home, {"command": "drop-everything", "args": {}, "caller": me})
    assert code == 409 and data["error"] == "INVALID_ARGUMENT"
    assert "no brain command 'drop-everything'" in data["message"]
    code, data = _post(home, {"command": "stats", "args": {}, "caller": me})
    assert code == 200 and not any(data["result"]["by_memory_type"].values())  # none written

    # A background command is followed by the caller that started it, and by no other.
    export = tmp_path / "empty.jsonl"
    code, data = _post(home, {"command": "export", "args": {"path": str(export)}, "caller": me})
    assert code == 200
    code, job = _post(home, {"command": "import", "args": {"path": str(export),
                                                           "on_conflict": "skip"}, "caller": me})
    assert code == 200 and job["result"]["status"] in ("running", "done")
    ask = {"command": "job.status", "args": {"job": job["result"]["job_id"]}}
    other = {"user_id": "mallory", "agent_id": "default"}
    code, data = _post(home, {**ask, "caller": other})
    assert code == 409 and "no command job" in data["message"]
    deadline = time.monotonic() + HANG_S
    while (data := _post(home, {**ask, "caller": me})[1]["result"])["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert data["status"] == "done" and data["result"]["imported"] == 0


def test_a_refusal_reads_the_same_through_either_door(
    home: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The same command, refused by a Brain of its own and by the running server: the same
    one line, code and message, and nothing else on the terminal (a Brain of its own logs
    its start to brain.log only)."""
    argv = ["notes", "verify", "ZK-00000000"]
    assert main(argv) == 1
    alone = capsys.readouterr()
    proc = _start_server(home, {}, 120.0)
    try:
        assert main(argv) == 1
        served = capsys.readouterr()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=HANG_S)
    said = alone.err.splitlines()
    assert len(said) == 1 and said[0].startswith("brain: [NOTE_NOT_FOUND] no note ZK-00000000")
    assert served.err.splitlines() == said and served.out == alone.out == ""
    assert " INFO brain." in (home / "brain.log").read_text(encoding="utf-8")


def test_ctrl_c_cancels_a_sync_run_by_the_command_itself(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Without a server the command holds the brain, which closes with it: Ctrl-C cancels the
    job (docs/operations.md), and says so; the next command finds it cancelled."""
    _big_folder(tmp_path)
    assert main(["source", "add", str(tmp_path / "big"), "--name", "big"]) == 0
    capsys.readouterr()
    cli, out, err = _interrupted_sync()
    assert "cancelling sync job" in err and "Traceback" not in err, err
    job = json.loads(out)
    assert cli.returncode == 1 and job["status"] == "cancelled"
    assert main(["source", "jobs", "--job", job["job_id"]]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "cancelled"
