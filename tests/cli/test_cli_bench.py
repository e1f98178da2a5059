"""``brain bench`` runs the top-level bench/ package in a child process (issue 19): the
product imports nothing from it, and the command still works from any folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import brain.cli.bench as cli_bench
from brain.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_brain_bench_runs_python_m_bench(monkeypatch: Any, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def call(cmd: list[str], env: dict[str, str]) -> int:
        seen.update(cmd=cmd, env=env)
        return 7

    monkeypatch.setattr(cli_bench.subprocess, "call", call)
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["bench", "--quick", "--data", "data", "--only", "cosqa"])
    assert args.func(args) == 7  # the suite's exit code is the command's
    assert seen["cmd"] == [
        sys.executable, "-m", "bench", "--quick", "--data", str(tmp_path / "data"),
        "--only", "cosqa",
    ]
    assert seen["env"]["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)


def test_python_m_bench_help_from_another_folder(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--help"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "--quick" in out.stdout and "--only" in out.stdout
