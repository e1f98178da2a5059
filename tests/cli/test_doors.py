"""Every door fails in one clear line (issue 51, item 6).

Each case runs the real ``brain`` command (``python -m brain.cli``) or the server it starts in
a subprocess, on a temp data dir, and asserts the one line, its stable code (brain/errors.py)
and the exit code, and that no traceback reaches the terminal:

- a misspelled section or key in brain.toml, a ``BRAIN__`` variable no setting has (from the
  environment or .env): refused with a did-you-mean and where it came from;
- a read-only data dir (the CLI and the server); a full one (a small tmpfs when this runs as
  root and may mount, else the free-space floor set above the disk's free space);
- ``brain serve --http`` on a busy port: names ``--port``, prints no token, starts nothing;
- Ctrl-C on a CLI command and on the server: one line, exit code 130;
- ``brain`` alone: a short usage naming the five commands people start with.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain.process import owner as own
from tests.timing import HANG_S

ROOT = Path(__file__).resolve().parents[2]
FAST = {"BRAIN__EMBEDDING__MODEL": "offline/hash-384", "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT)}


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **FAST, **extra}


def brain(*argv: str, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "brain.cli", *argv], env=env or _env(),
                          cwd=cwd, capture_output=True, text=True, timeout=HANG_S * 8,
                          stdin=subprocess.DEVNULL)


def one_line(res: subprocess.CompletedProcess[str], code: str, most: int | None = 2) -> str:
    """The refusal: its last stderr line carries ``[code]``, stderr holds no traceback and
    at most one other line (a warning the line explains); ``most=None`` for a door that
    logs its start before it meets the failure."""
    err = res.stderr.strip().splitlines()
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert err and f"[{code}]" in err[-1], res.stderr[-3000:]
    assert most is None or len(err) <= most, res.stderr
    return err[-1]


# ------------------------------------------------------------------ settings no one has
def test_a_misspelled_section_in_brain_toml_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "brain.toml").write_text("[memroy]\ndefault_project = \"x\"\n")
    res = brain("stats", cwd=tmp_path)
    line = one_line(res, "CONFIG_INVALID")
    assert res.returncode == 2
    assert "[memroy]" in line and "did you mean [memory]?" in line
    assert str((tmp_path / "brain.toml").resolve()) in line


def test_a_misspelled_key_of_a_known_section_is_refused(tmp_path: Path, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "brain.toml").write_text("[memory]\nmax_contnt_chars = 10\n")
    line = one_line(brain("stats", cwd=tmp_path), "CONFIG_INVALID")
    assert "'max_contnt_chars' in [memory]" in line
    assert "did you mean 'max_content_chars'?" in line and str(home / "brain.toml") in line


@pytest.mark.parametrize(("name", "meant"), [
    ("BRAIN__MEMROY__X", "BRAIN__MEMORY__X"),
    ("BRAIN__MEMORY__MAX_CONTNT_CHARS", "BRAIN__MEMORY__MAX_CONTENT_CHARS"),
    ("BRAIN__HOEM", "BRAIN__HOME"),
])
def test_an_unknown_brain_variable_is_refused_with_the_one_it_meant(
        tmp_path: Path, name: str, meant: str) -> None:
    res = brain("stats", env=_env(**{name: "sk-do-not-echo-1"}), cwd=tmp_path)
    line = one_line(res, "CONFIG_INVALID")
    assert res.returncode == 2
    assert f"in {name} (environment)" in line and f"did you mean {meant}?" in line
    assert "sk-do-not-echo-1" not in res.stderr + res.stdout  # a value may be a secret


def test_an_unknown_variable_in_dot_env_names_the_file(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("BRAIN__RERANK__ENABLD=true\n")
    line = one_line(brain("stats", cwd=tmp_path), "CONFIG_INVALID")
    assert str((tmp_path / ".env").resolve()) in line
    assert "did you mean BRAIN__RERANK__ENABLED?" in line


def test_the_server_refuses_a_misspelled_section_in_its_one_line(tmp_path: Path) -> None:
    (tmp_path / "brain.toml").write_text("[retreival]\ndense_weight = 0.5\n")
    res = brain("serve", cwd=tmp_path)
    line = one_line(res, "CONFIG_INVALID")
    assert res.returncode == 2 and line.startswith("opencode-brain: ")
    assert "did you mean [retrieval]?" in line


# --------------------------------------------------------------------- the data dir's disk
@contextlib.contextmanager
def tmpfs(path: Path, *options: str) -> Iterator[None]:
    """A tmpfs mounted at ``path`` (root only); skips the test where it cannot mount."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def read_only(home: Path) -> Iterator[None]:
    """``home`` read-only: a read-only mount as root (root writes through a mode), else the
    mode of a folder that is not ours to write."""
    home.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        with tmpfs(home, "size=4m", "mode=0755"):
            subprocess.run(["mount", "-o", "remount,ro", str(home)], check=True)
            yield
        return
    home.chmod(0o555)
    try:
        yield
    finally:
        home.chmod(0o755)


def test_the_cli_on_a_read_only_data_dir_says_so_in_one_line(home: Path) -> None:
    with read_only(home):
        res = brain("stats")
    line = one_line(res, "DATA_DIR_UNWRITABLE")
    assert res.returncode == 1 and str(home) in line and "BRAIN__HOME" in line


def test_the_server_on_a_read_only_data_dir_sends_no_one_to_its_log(home: Path) -> None:
    with read_only(home):
        res = brain("serve")
    line = one_line(res, "DATA_DIR_UNWRITABLE")
    assert res.returncode == 2 and line.startswith("opencode-brain: ")
    assert "details in brain.log" not in res.stderr and "details are in brain.log" not in \
        res.stderr
    assert "BRAIN__HOME" in line


@pytest.mark.parametrize("door", ["stats", "serve"])
def test_a_full_data_dir_is_refused_in_one_line(home: Path, door: str) -> None:
    """A 2 MB tmpfs is below the free space the brain keeps ([storage] min_free_mb)."""
    with tmpfs(home, "size=2m", "mode=0700"):
        res = brain(door)
    line = one_line(res, "DISK_FULL")
    assert res.returncode == (2 if door == "serve" else 1)
    assert "BRAIN__STORAGE__MIN_FREE_MB" in line


def test_a_data_dir_that_fills_up_says_disk_full(home: Path) -> None:
    """No margin kept and not one byte free: the write that fails says DISK_FULL."""
    with tmpfs(home, "size=1m", "mode=0700"):
        with contextlib.suppress(OSError), open(home / "filler", "wb") as fh:
            fh.write(b"\0" * 2_000_000)
        res = brain("stats", env=_env(BRAIN__STORAGE__MIN_FREE_MB="0"))
    line = one_line(res, "DISK_FULL")
    assert res.returncode in (1, 2) and str(home) in line


# --------------------------------------------------------------------------- a busy port
@contextlib.contextmanager
def _taken_port() -> Iterator[int]:
    """A loopback port some other socket listens on, for as long as the block runs."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        yield taken.getsockname()[1]


def test_serve_http_on_a_busy_port_names_the_flag_and_prints_no_token(home: Path) -> None:
    with _taken_port() as port:
        res = brain("serve", "--http", "--port", str(port))
    line = one_line(res, "PORT_IN_USE")
    assert res.returncode == 1 and f"port {port}" in line and "--port" in line
    assert "token" not in res.stderr.lower() and "Starting" not in res.stderr + res.stdout
    assert not (home / "http.token").exists() and not (home / own.INFO_FILE).exists()


def test_the_server_run_directly_on_a_busy_port_prints_no_token(home: Path) -> None:
    """``python mcp_server.py --http`` (an agent config's command) meets the same check."""
    with _taken_port() as port:
        res = subprocess.run([sys.executable, str(ROOT / "mcp_server.py"), "--http", "--port",
                              str(port)], env=_env(), capture_output=True, text=True,
                             timeout=HANG_S * 8, stdin=subprocess.DEVNULL)
    line = one_line(res, "PORT_IN_USE")
    assert res.returncode != 0 and f"port {port}" in line
    assert "token" not in res.stderr.lower() and "Starting" not in res.stderr + res.stdout
    assert not (home / "http.token").exists() and not (home / own.INFO_FILE).exists()


def test_ui_on_a_busy_port_names_the_flag_and_the_setting(home: Path) -> None:
    with _taken_port() as port:
        res = brain("ui", "--port", str(port))
    line = one_line(res, "UI_PORT_IN_USE", most=None)  # the owner it starts logs its start
    assert res.returncode == 2 and f"port {port}" in line
    assert "brain ui --port N" in line and "BRAIN__UI__PORT" in line


# ---------------------------------------------------------------------------------- Ctrl-C
def _wait_for(proc: subprocess.Popen[str], ready: object, what: str) -> None:
    import time

    deadline = time.monotonic() + HANG_S * 8
    while not ready():  # type: ignore[operator]
        assert proc.poll() is None, f"{what} ended early: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"{what} never got ready"
        time.sleep(0.1)


def _interrupt(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=HANG_S * 4)
    return proc.returncode, err


def _reading_stdin(pid: int) -> bool:
    """The process sits in read(2) on fd 0 (Linux: /proc/PID/syscall is "0 0x0 ...")."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return fields[:2] == ["0", "0x0"]


def test_ctrl_c_on_a_cli_command_exits_130_in_one_line(tmp_path: Path, home: Path) -> None:
    """``brain fs write`` waits on stdin (read before it goes to the brain, whether through a
    running server or by opening it); Ctrl-C there ends it cleanly."""
    proc = subprocess.Popen([sys.executable, "-m", "brain.cli", "fs", "write", "nosrc", "a.txt"],
                            env=_env(), cwd=tmp_path, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(proc, lambda: _reading_stdin(proc.pid), "brain fs write")
        code, err = _interrupt(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    res = subprocess.CompletedProcess(proc.args, code, "", err)
    line = one_line(res, "INTERRUPTED")
    assert code == 130 and line.startswith("brain: ")


@pytest.mark.parametrize("argv", [["serve"], ["serve", "--http", "--port", "0"]],
                         ids=["stdio", "http"])
def test_ctrl_c_on_the_server_exits_130_in_one_line(tmp_path: Path, home: Path,
                                                    argv: list[str]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "brain.cli", *argv], env=_env(),
                            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(proc, lambda: (info := own.read_info(home)) is not None and info.alive,
                  "brain serve")
        code, err = _interrupt(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in err, err[-3000:]
    assert code == 130, err[-3000:]
    assert "[INTERRUPTED]" in err.strip().splitlines()[-1], err[-3000:]
    assert own.read_info(home) is None or not own.read_info(home).alive  # type: ignore[union-attr]


# ------------------------------------------------------------------------------ brain alone
def test_brain_alone_prints_a_short_usage_of_the_commands_to_start_with() -> None:
    res = brain()
    assert res.returncode == 2 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) <= 12, res.stderr
    starts = [ln.split()[1] for ln in lines if ln.startswith("  brain ")]
    assert starts == ["install", "serve", "source", "ui", "stats"], lines
    from tests.surface.test_agents_md import command_problem

    for ln in lines:
        if ln.startswith("  brain "):
            words = ln.split("   ")[0].split()[1:]
            assert command_problem([w for w in words if w.islower()]) is None, ln


def test_an_unexpected_start_failure_does_not_point_to_a_log_it_cannot_write(
        home: Path) -> None:
    """START_FAILED sends the reader to brain.log only when brain.log can be written."""
    from brain.process import startup

    home.mkdir(parents=True, exist_ok=True)
    assert "details are in brain.log" in str(startup.as_brain_error(RuntimeError("boom"), home))
    with read_only(home):
        err = startup.as_brain_error(RuntimeError("boom"), home)
    assert err.code == "START_FAILED" and "brain.log" in str(err)
    assert "details are in brain.log" not in str(err) and "cannot be written" in str(err)
