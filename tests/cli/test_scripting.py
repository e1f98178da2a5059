"""The scripting API (brain/api.py) and `brain seed`: seed 003's recipes, run as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from brain import open_brain
from brain.api import ToolCallError
from brain.cli.seed import SeedError, read_entries

ROOT = Path(__file__).resolve().parents[2]
FAST = {"embedding": {"model": "offline/hash-384"}}  # no model load in the started server


@pytest.fixture
def fast_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    return dict(os.environ)


def _recipe(name: str) -> str:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    m = re.search(rf"<!-- recipe: {name} -->\n```python\n(.*?)```", text, re.S)
    assert m, f"docs/operations.md has no '{name}' recipe"
    return m.group(1)


def _run(code: str, env: dict[str, str], cwd: Path) -> str:
    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                         text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_readme_recipes_run_as_written(fast_env: dict[str, str], tmp_path: Path,
                                       home: Path) -> None:
    seeded = _run(_recipe("seed"), fast_env, tmp_path)
    ids = re.findall(r"^(ZK-[0-9A-F]{8}) ", seeded, re.M)
    assert len(ids) == 2
    weekly = _run(_recipe("weekly"), fast_env, tmp_path)
    assert weekly.startswith("0 stale notes: []")
    with open_brain(home) as brain:  # a fresh server: what the recipes wrote is there
        stats = brain.brain_stats()
        assert stats["by_memory_type"]["permanent"] == 2
        found = brain.search_memory(query="QdrantClient ResourceWarning", project="rag-chatbot")
        assert found["results"][0]["zk_id"] == ids[0]


def test_a_script_goes_through_the_running_owner(home: Path) -> None:
    with open_brain(home, **FAST) as first:
        assert first.started_server
        server = first._server
        assert server is not None
        with open_brain(home, **FAST) as second:  # the data dir is owned: no second store
            assert not second.started_server
            z = second.add_memory(content="rate limits live in redis", project="api")
            zk = z["note"]["zk_id"]
        assert first.get_note(zk_id=zk)["note"]["content"] == "rate limits live in redis"
        with pytest.raises(ToolCallError) as err:
            first.get_note(zk_id="ZK-00000000")
        assert err.value.code == "NOTE_NOT_FOUND"
        with pytest.raises(ToolCallError) as bad:
            first.add_memory(content="")
        assert bad.value.code == "INVALID_ARGUMENT"
    assert server.poll() is not None  # the server it started is gone with the block


def test_seed_checks_the_whole_file_first(tmp_path: Path) -> None:
    good = tmp_path / "notes.jsonl"
    good.write_text('{"content": "a"}\n\n{"content": "b", "project": "p", "tags": ["x"]}\n')
    assert [e["content"] for e in read_entries(good)] == ["a", "b"]
    cases = {
        '[{"content": "a"}, {"content": "b", "colour": "red"}]': "entry 2 has unknown fields",
        '[{"content": "a"}, "just text"]': "entry 2 is not an object",
        '{"content": "a"}\n{"content": ""}\n': "line 2 needs a non-empty",
        '{"content": "a"}\n{oops\n': "line 2 is not valid JSON",
        "[]": "holds no notes",
    }
    for text, message in cases.items():
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(SeedError, match=message):
            read_entries(bad)


def test_seed_command(fast_env: dict[str, str], tmp_path: Path, home: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"content": "fine"}, {"content": "x", "colour": "red"}]))
    cmd = [sys.executable, "-m", "brain.cli", "seed"]
    res = subprocess.run([*cmd, str(bad)], env=fast_env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and "entry 2 has unknown fields" in res.stderr
    assert not (home / "owner.json").exists()  # refused before any server started
    notes = tmp_path / "notes.jsonl"
    notes.write_text("\n".join(json.dumps({"content": f"seeded fact {i}", "project": "seed"})
                               for i in range(2)) + '\n{"content": "seeded fact 2"}\n')
    res = subprocess.run([*cmd, str(notes), "--project", "x" * 200], env=fast_env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--project is refused: [INVALID_ARGUMENT]" in res.stderr
    res = subprocess.run([*cmd, str(notes), "--project", "shop"], env=fast_env,
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["added"] == 3 and len(set(out["ids"])) == 3
    assert "seed: 3/3 notes added" in res.stderr
    with open_brain(home, **FAST) as brain:  # an entry's own project wins over --project
        assert [brain.get_note(zk_id=z)["note"]["project"] for z in out["ids"]] == [
            "seed", "seed", "shop"]


def _stderr_on_a_terminal(cmd: list[str], env: dict[str, str]) -> tuple[str, str]:
    """Run ``cmd`` with its stderr on a pseudo-terminal: (stdout, what the terminal got)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    # 24 x 80: a new pty is 0 x 0, where tqdm draws a bar of no width
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=follower, text=True,
                             timeout=240)
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert res.returncode == 0, seen[-2000:]
    return res.stdout, seen.decode(errors="replace")


def test_progress_bars_draw_on_a_terminal_and_stay_out_of_logs(
        fast_env: dict[str, str], home: Path) -> None:
    """A weekly job (`brain maintenance` from cron, its stderr in a log) gets its JSON and no
    carriage-return redraws; the same command at a terminal still draws its bars."""
    with open_brain(home, **FAST) as brain:
        for i in range(3):
            brain.add_memory(content=f"maintained fact {i}", project="shop")
    for args in (["maintenance"], ["health", "scan"]):
        cmd = [sys.executable, "-m", "brain.cli", *args]
        res = subprocess.run(cmd, env=fast_env, capture_output=True, text=True, timeout=240)
        assert res.returncode == 0, res.stderr[-2000:]
        json.loads(res.stdout)
        assert "\r" not in res.stderr and "pt/s" not in res.stderr, (args, res.stderr)
        out, tty = _stderr_on_a_terminal(cmd, fast_env)
        json.loads(out)
        assert "pt/s" in tty and "\r" in tty, (args, tty)  # the bar, redrawn in place


def test_a_command_loads_no_model_it_does_not_use(home: Path) -> None:
    """A server loads its embedding model at open (its first search should not wait); a CLI
    command that embeds nothing does not, since its close waited for the load (`brain
    status` on a fresh data dir took 9 s: the model's graph is written on first load)."""
    from brain.app import Brain
    from brain.cli.common import open_brain as cli_brain
    from config import load_settings

    with cli_brain(**FAST) as b:
        assert "embedder-warmup" not in [t.name for t in b._threads]
    served = Brain(load_settings(home=home, **FAST)).open()
    try:
        assert "embedder-warmup" in [t.name for t in served._threads]
    finally:
        served.close()
