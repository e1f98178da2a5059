"""The peer's installation for bench/peer.py: mcp-memory-service, pinned, in its own
virtualenv, and our bundled all-MiniLM-L6-v2 laid out where its ONNX embedder reads it.

- The virtualenv lives at ``~/.cache/opencode-brain/bench/peer-venv`` (``$XDG_CACHE_HOME``
  honoured), created once and reused; ``peer-stamp.json`` in it names the installed spec,
  so a change of :data:`PEER_SPEC` reinstalls. The ``[sqlite]`` extra is the peer's
  lightest local setup with real embeddings (sqlite-vec storage, onnxruntime + tokenizers;
  no torch). A constraint pins torch to 2.13.0 should any dependency ask for it, so pip
  takes the CPU wheel this machine holds and never a CUDA build.
- The peer's ONNX embedder (``mcp_memory_service/embeddings/onnx_embeddings.py``) reads
  ``~/.cache/mcp_memory/onnx_models/all-MiniLM-L6-v2/onnx/{model.onnx,tokenizer.json}``
  (Chroma's archive layout; output 0 = last_hidden_state, mean-pooled and L2-normalised in
  numpy) and downloads that archive when it is missing. The bench gives it a plain fp32
  export of the same bundled model (brain/embedding/onnx.py, unfused as that archive is;
  ``bench.peer --peer-model ours`` gives it our fused file) in that layout under
  ``peer-model/``, and runs the peer with ``HOME`` set to a temp dir whose ``.cache``
  links there, with downloads off (``MCP_MEMORY_ONNX_ALLOW_DOWNLOAD=0``): no network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PEER_VERSION = "12.4.0"
PEER_SPEC = f"mcp-memory-service[sqlite]=={PEER_VERSION}"
TORCH_PIN = "torch==2.13.0"  # the CPU wheel on this machine's disk (never a CUDA build)
MODEL_NAME = "all-MiniLM-L6-v2"
# sentence-transformers' max_seq_length for this model, which our embedder also truncates at.
MAX_TOKENS = 256
INSTALL_TIMEOUT_S = 1800


class PeerUnavailable(RuntimeError):
    """The peer cannot be installed or started here; the message says why and what to do."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opencode-brain" / "bench"


def venv_dir() -> Path:
    return cache_root() / "peer-venv"


def venv_python(venv_path: Path) -> Path:
    return venv_path / "bin" / "python"


def stamp_matches(stamp_file: Path, spec: str) -> bool:
    """Whether the virtualenv's stamp says ``spec`` was installed (a missing or unreadable
    stamp means: install)."""
    try:
        return bool(json.loads(stamp_file.read_text(encoding="utf-8")).get("spec") == spec)
    except (OSError, ValueError, AttributeError):
        return False


_SQLITE_EXT = ("import sqlite3, sys; c = sqlite3.connect(':memory:'); "
               "sys.exit(0 if hasattr(c, 'enable_load_extension') else 1)")


def loads_sqlite_extensions(python: str) -> bool:
    """Whether ``python``'s sqlite3 can load extensions (sqlite-vec needs it; a Python built
    without --enable-loadable-sqlite-extensions, such as pyenv's default build, cannot)."""
    try:
        return subprocess.run([python, "-c", _SQLITE_EXT], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def venv_base() -> str:
    """A Python 3.11 that can load SQLite extensions, to make the peer's venv from: ours
    (its base interpreter), else the system's."""
    for cand in (str(getattr(sys, "_base_executable", sys.executable)), "/usr/bin/python3.11",
                 "/usr/bin/python3", shutil.which("python3.11") or ""):
        if cand and Path(cand).is_file() and loads_sqlite_extensions(cand):
            return cand
    raise PeerUnavailable(
        "no Python here can load SQLite extensions, which the peer's sqlite-vec backend needs "
        "(pyenv builds cannot by default); install Debian's: apt-get install python3 "
        "python3-venv")


def ensure_venv(log: Callable[[str], None] = print, path: Path | None = None) -> Path:
    """The peer's virtualenv with :data:`PEER_SPEC` installed (from PyPI, once); its python.
    Raises PeerUnavailable with pip's last lines when the install fails (offline, say)."""
    path = path or venv_dir()
    stamp = path / "peer-stamp.json"
    py = venv_python(path)
    if py.is_file() and stamp_matches(stamp, PEER_SPEC) and loads_sqlite_extensions(str(py)):
        return py
    log(f"peer: installing {PEER_SPEC} into {path} (once; needs PyPI) ...")
    if not (py.is_file() and loads_sqlite_extensions(str(py))):
        base = venv_base()
        if path.exists():
            shutil.rmtree(path)
        made = subprocess.run([base, "-m", "venv", str(path)], capture_output=True, text=True,
                              timeout=300)
        if made.returncode != 0:
            raise PeerUnavailable(f"{base} -m venv {path} failed: {made.stderr.strip()[-300:]}"
                                  " (apt-get install python3-venv)")
    constraints = path / "peer-constraints.txt"
    constraints.write_text(TORCH_PIN + "\n", encoding="ascii")
    cmd = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q",
           "-c", str(constraints), PEER_SPEC]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise PeerUnavailable(
            f"installing {PEER_SPEC} took over {INSTALL_TIMEOUT_S} s (is PyPI reachable?); "
            f"rerun when it is, or delete {path} and retry") from exc
    if proc.returncode != 0:
        tail = " / ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])
        raise PeerUnavailable(
            f"could not install {PEER_SPEC} from PyPI into {path} (pip exited "
            f"{proc.returncode}: {tail}). The peer bench needs PyPI once; the rest of "
            "`python -m bench` does not.")
    torch = _installed_version(py, "torch")
    if torch and not torch.startswith(TORCH_PIN.split("==")[1]):
        raise PeerUnavailable(f"the peer's venv got torch {torch}, not {TORCH_PIN}; "
                              f"delete {path} and retry")
    stamp.write_text(json.dumps({"spec": PEER_SPEC, "torch": torch or None}) + "\n",
                     encoding="utf-8")
    return py


def _installed_version(py: Path, dist: str) -> str:
    code = ("import importlib.metadata as m, sys\n"
            "try: print(m.version(sys.argv[1]))\n"
            "except m.PackageNotFoundError: pass\n")
    proc = subprocess.run([str(py), "-c", code, dist], capture_output=True, text=True,
                          timeout=60)
    return proc.stdout.strip()


def peer_tokenizer(bundled: dict[str, Any], max_tokens: int = MAX_TOKENS) -> dict[str, Any]:
    """The bundled tokenizer.json as the peer should read it: truncation at ``max_tokens``
    (what sentence-transformers and our embedder use) and no fixed padding (the bundled file
    pads every text to 128 tokens; the peer pads a batch to its longest text itself, as its
    code expects), so both servers run the model on the same token ids."""
    out = dict(bundled)
    trunc = dict(bundled.get("truncation") or {"strategy": "LongestFirst", "stride": 0})
    trunc["max_length"] = max_tokens
    trunc.setdefault("direction", "Right")
    out["truncation"] = trunc
    out["padding"] = None
    return out


def model_layout(onnx_file: Path, bundled_dir: Path, root: Path | None = None) -> Path:
    """``root/all-MiniLM-L6-v2/onnx`` holding ``model.onnx`` (a link to our export) and the
    peer's tokenizer.json; the folder that stands for the peer's ``onnx_models``."""
    root = root or cache_root() / "peer-model"
    onnx_dir = root / MODEL_NAME / "onnx"
    onnx_dir.mkdir(parents=True, exist_ok=True)
    link = onnx_dir / "model.onnx"
    target = onnx_file.resolve()
    if (link.is_symlink() or link.exists()) and link.resolve() != target:
        link.unlink()
    if not link.is_symlink():
        link.symlink_to(target)
    tok = json.loads((bundled_dir / "tokenizer.json").read_text(encoding="utf-8"))
    (onnx_dir / "tokenizer.json").write_text(json.dumps(peer_tokenizer(tok)), encoding="utf-8")
    for name in ("config.json", "vocab.txt", "special_tokens_map.json", "tokenizer_config.json"):
        src = bundled_dir / name
        if src.is_file():
            (onnx_dir / name).write_bytes(src.read_bytes())
    return root


def peer_env(home: Path, models: Path) -> dict[str, str]:
    """The environment the peer runs in: its own HOME (a temp dir; its ``.cache/mcp_memory/
    onnx_models`` links to ``models``), sqlite-vec storage in ``home/data``, ONNX embeddings
    with downloads off, nothing read from the caller's own settings."""
    cache = home / ".cache" / "mcp_memory"
    cache.mkdir(parents=True, exist_ok=True)
    link = cache / "onnx_models"
    if not link.exists():
        link.symlink_to(models.resolve())
    data = home / "data"
    data.mkdir(parents=True, exist_ok=True)
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        MCP_MEMORY_STORAGE_BACKEND="sqlite_vec",
        MCP_MEMORY_BASE_DIR=str(data),
        MCP_MEMORY_SQLITE_PATH=str(data / "sqlite_vec.db"),
        MCP_MEMORY_USE_ONNX="1",
        MCP_MEMORY_ONNX_ALLOW_DOWNLOAD="0",
        MCP_MEMORY_ONNX_PROVIDERS="CPUExecutionProvider",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
    )
    return env
