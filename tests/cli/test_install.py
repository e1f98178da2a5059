"""``brain install|uninstall claude-code|opencode``: idempotent, dry-run writes nothing, and
uninstall takes out exactly what install put in (a user's own hooks, servers and settings
stay, and a "brain" server of theirs that install replaced comes back).

Runs the real command (``python -m brain.cli``) with HOME and XDG_CONFIG_HOME in a temp dir.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER_HOOK = {"matcher": "Write", "hooks": [{"type": "command", "command": "prettier --write"}]}


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    h = tmp_path / "user"
    h.mkdir()
    return h


def brain_cli(user_home: Path, *args: str) -> str:
    env = {**os.environ, "HOME": str(user_home), "XDG_CONFIG_HOME": str(user_home / ".config"),
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "brain.cli", *args], capture_output=True,
                         text=True, env=env, cwd=str(ROOT), timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file()}


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def test_claude_user_wide_install_is_idempotent_and_uninstall_keeps_the_users(
    user_home: Path, home: Path
) -> None:
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"model": "opus", "hooks": {"PostToolUse": [USER_HOOK]}}
    settings.write_text(json.dumps(mine))
    state = user_home / ".claude.json"
    users_state = {"numStartups": 3, "mcpServers": {"other": {"command": "x", "args": []}}}
    state.write_text(json.dumps(users_state))
    before = snapshot(user_home)

    dry = brain_cli(user_home, "install", "claude-code", "--dry-run")
    assert snapshot(user_home) == before  # dry run: nothing written
    assert "+++ " in dry and "SessionStart" in dry and "would change" in dry

    brain_cli(user_home, "install", "claude-code")
    data = read(settings)
    assert data["model"] == "opus"
    assert data["hooks"]["PostToolUse"][0] == USER_HOOK  # the user's hook, first, untouched
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure",
                  "PreCompact", "SessionEnd"):
        cmds = [h["command"] for g in data["hooks"][event] for h in g["hooks"]]
        assert any("brain/hooks/run.py" in c and str(home) in c for c in cmds), event
    ours = data["hooks"]["PostToolUse"][1]["matcher"]  # shell commands and the file tools
    assert {"Bash", "Read", "Edit", "Write"} <= set(ours.split("|"))
    servers = read(state)["mcpServers"]
    assert servers["other"] == users_state["mcpServers"]["other"]
    assert servers["brain"]["args"] == [str(ROOT / "mcp_server.py")]
    assert servers["brain"]["env"] == {"BRAIN__HOME": str(home)}

    installed = snapshot(user_home)
    assert "nothing to change" in brain_cli(user_home, "install", "claude-code")
    assert snapshot(user_home) == installed  # twice = no change

    assert "would change" in brain_cli(user_home, "uninstall", "claude-code", "--dry-run")
    assert snapshot(user_home) == installed
    brain_cli(user_home, "uninstall", "claude-code")
    assert read(settings) == mine
    assert read(state) == users_state
    assert not (user_home / ".claude" / "opencode-brain.install.json").exists()
    assert "nothing to change" in brain_cli(user_home, "uninstall", "claude-code")


def test_claude_project_install_replaces_and_restores_a_users_brain_server(
    user_home: Path, tmp_path: Path
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    theirs = {"mcpServers": {"brain": {"command": "their-brain", "args": ["--x"]}}}
    (proj / ".mcp.json").write_text(json.dumps(theirs))
    brain_cli(user_home, "install", "claude-code", "--project", str(proj))
    assert read(proj / ".mcp.json")["mcpServers"]["brain"]["command"] == sys.executable
    assert (proj / ".claude" / "settings.json").exists()
    assert not (user_home / ".claude").exists()  # project mode touches nothing user-wide
    brain_cli(user_home, "install", "claude-code", "--project", str(proj))
    brain_cli(user_home, "uninstall", "claude-code", "--project", str(proj))
    assert read(proj / ".mcp.json") == theirs
    assert not (proj / ".claude" / "settings.json").exists()  # it made the file: it goes


def test_opencode_install_writes_a_plugin_and_uninstall_removes_only_it(
    user_home: Path, home: Path
) -> None:
    cfg_dir = user_home / ".config" / "opencode"
    (cfg_dir / "plugins").mkdir(parents=True)
    other_plugin = cfg_dir / "plugins" / "theirs.js"
    other_plugin.write_text("export const Theirs = async () => ({})\n")
    mine = {"$schema": "https://opencode.ai/config.json", "theme": "dark"}
    (cfg_dir / "opencode.json").write_text(json.dumps(mine))

    brain_cli(user_home, "install", "opencode")
    cfg = read(cfg_dir / "opencode.json")
    assert cfg["theme"] == "dark"
    assert cfg["mcp"]["brain"]["command"] == [sys.executable, str(ROOT / "mcp_server.py")]
    assert cfg["mcp"]["brain"]["environment"] == {"BRAIN__HOME": str(home)}
    plugin = (cfg_dir / "plugins" / "opencode-brain.js").read_text()
    assert "@PYTHON@" not in plugin and str(home) in plugin and "run.py" in plugin
    installed = snapshot(user_home)
    brain_cli(user_home, "install", "opencode")
    assert snapshot(user_home) == installed

    brain_cli(user_home, "uninstall", "opencode")
    assert read(cfg_dir / "opencode.json") == mine
    assert not (cfg_dir / "plugins" / "opencode-brain.js").exists()
    assert other_plugin.exists()


def test_install_refuses_a_config_it_cannot_parse(user_home: Path) -> None:
    cfg = user_home / ".config" / "opencode" / "opencode.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('{ // a comment\n "theme": "dark" }')
    env = {**os.environ, "HOME": str(user_home), "XDG_CONFIG_HOME": str(user_home / ".config"),
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "brain.cli", "install", "opencode"],
                         capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=120)
    assert out.returncode == 1 and "not plain JSON" in out.stderr
    assert cfg.read_text() == '{ // a comment\n "theme": "dark" }'
    assert not (cfg.parent / "plugins").exists()


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_the_plugin_is_valid_javascript(user_home: Path, tmp_path: Path) -> None:
    brain_cli(user_home, "install", "opencode", "--project", str(tmp_path))
    plugin = tmp_path / ".opencode" / "plugins" / "opencode-brain.js"
    mjs = tmp_path / "plugin.mjs"
    mjs.write_text(plugin.read_text())
    subprocess.run(["node", "--check", str(mjs)], check=True, timeout=60)


NODE_DRIVER = """
const [plugin, dir] = process.argv.slice(2)
const { OpencodeBrain } = await import(plugin)
const hooks = await OpencodeBrain({ directory: dir, worktree: dir })
const t0 = Date.now()
await hooks.event({ event: { type: "session.created", properties: { info: { id: "ses_1" } } } })
const out = { system: ["base"] }
await hooks["experimental.chat.system.transform"]({ sessionID: "ses_1" }, out)
console.log(JSON.stringify({ ms: Date.now() - t0, system: out.system }))
"""
FAKE_PYTHON = """#!/bin/sh
echo $$ > "$FAKE_PID"
cat > "$FAKE_STDIN"
[ "$FAKE_MODE" = hang ] && exec sleep 60
echo "briefing for $4"
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
@pytest.mark.parametrize("mode", ["answer", "hang"])
def test_plugin_injects_the_hook_output_and_kills_a_late_hook(
    tmp_path: Path, home: Path, mode: str
) -> None:
    """The plugin as OpenCode calls it: session.created runs the session-start hook and its
    output goes into the system prompt; a hook that hangs is killed at the deadline and
    nothing is injected (no process left behind)."""
    from brain.cli.install import Options, render_plugin

    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    plugin = tmp_path / "plugin.mjs"
    plugin.write_text(render_plugin(Options(home, "u", "a", python=str(fake))))
    (tmp_path / "driver.mjs").write_text(NODE_DRIVER)
    env = {**os.environ, "FAKE_PID": str(tmp_path / "pid"), "FAKE_MODE": mode,
           "FAKE_STDIN": str(tmp_path / "stdin.json")}
    out = subprocess.run(["node", str(tmp_path / "driver.mjs"), str(plugin), str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=60, check=True)
    res = json.loads(out.stdout)
    sent = json.loads((tmp_path / "stdin.json").read_text())
    assert sent["hook_event_name"] == "SessionStart" and sent["session_id"] == "ses_1"
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    if mode == "answer":
        assert res["system"] == ["base", "briefing for session-start"]
    else:
        assert res["system"] == ["base"]
        assert 4000 <= res["ms"] < 15000  # the plugin's deadline (5 s), not the hook's 60 s
