"""``brain install --env KEY=VALUE`` (repeatable): settings the server entry carries, such as
the allowed roots; a malformed pair, a secret or a value the settings refuse is one clear
error and writes nothing. The real command, with HOME in a temp dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli(user: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(user), "XDG_CONFIG_HOME": str(user / ".config"),
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "brain.cli", *args], capture_output=True,
                          text=True, env=env, cwd=str(ROOT), timeout=120)


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_env_pairs_go_into_the_server_entry_of_either_client(tmp_path: Path, home: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    pairs = ["--env", f"BRAIN__PATHS__ALLOWED_ROOTS=/srv/code{os.pathsep}/data",
             "--env", "HF_HUB_OFFLINE=1"]
    out = _cli(user, "install", "claude-code", *pairs)
    assert out.returncode == 0, out.stderr
    entry = json.loads((user / ".claude.json").read_text())["mcpServers"]["brain"]
    assert entry["env"] == {"BRAIN__HOME": str(home.resolve()), "HF_HUB_OFFLINE": "1",
                            "BRAIN__PATHS__ALLOWED_ROOTS": f"/srv/code{os.pathsep}/data"}
    out = _cli(user, "install", "opencode", *pairs)
    assert out.returncode == 0, out.stderr
    cfg = json.loads((user / ".config" / "opencode" / "opencode.json").read_text())
    assert cfg["mcp"]["brain"]["environment"]["BRAIN__PATHS__ALLOWED_ROOTS"] == (
        f"/srv/code{os.pathsep}/data")


@pytest.mark.parametrize(("pair", "says"), [
    ("NOEQUALS", "is not KEY=VALUE"),
    ("BRAIN__PATHS__ALLOWED_ROOTS=srv/code", "not an absolute path"),
    ("OPENAI_API_KEY=sk-abc123", "secrets are not written"),
    ("BRAIN__HOME=/elsewhere", "writes the data dir itself"),
])
def test_a_bad_env_pair_is_one_clear_error_and_writes_nothing(
    tmp_path: Path, home: Path, pair: str, says: str
) -> None:
    user = tmp_path / "user"
    user.mkdir()
    before = _files(user)
    out = _cli(user, "install", "claude-code", "--env", pair)
    assert out.returncode != 0 and says in out.stderr, out.stderr
    assert "INVALID_ARGUMENT" in out.stderr and "Traceback" not in out.stderr
    assert "sk-abc123" not in out.stderr + out.stdout
    assert _files(user) == before
