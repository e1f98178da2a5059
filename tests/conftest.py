"""Shared fixtures: isolated homes, brains on the offline or the real embedder, MCP clients."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from brain.app import Brain  # noqa: E402
from brain.clock import ManualClock  # noqa: E402
from brain.embedding.registry import REGISTRY, HashEmbedder, build_embedder  # noqa: E402
from config import Settings, load_settings  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data dir and no stray configuration from the machine."""
    home = tmp_path / "home"
    monkeypatch.setenv("BRAIN__HOME", str(home))
    for name in list(os.environ):
        if name.startswith("BRAIN__") and name != "BRAIN__HOME":
            monkeypatch.delenv(name, raising=False)
    for legacy in ("QDRANT_HOST", "QDRANT_PORT", "HUGGINGFACE_API_KEY", "EMBEDDING_MODEL"):
        monkeypatch.delenv(legacy, raising=False)
    # Tests keep their files in tmp_path, outside the user's home (the default allowed root).
    monkeypatch.setenv("BRAIN__PATHS__ALLOWED_ROOTS", json.dumps([str(tmp_path)]))
    # No server a test starts (many in the repository's own git work tree) indexes its
    # workspace unasked; tests/sources/test_workspace.py turns it on.
    monkeypatch.setenv("BRAIN__SOURCES__WORKSPACE", "off")
    monkeypatch.chdir(tmp_path)
    return home


@pytest.fixture
def home(_isolated_home: Path) -> Path:
    return _isolated_home


@pytest.fixture
def settings(home: Path) -> Settings:
    return load_settings(home=home)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def hash_embedder() -> HashEmbedder:
    return HashEmbedder(REGISTRY["offline/hash-384"])


@pytest.fixture(scope="session")
def _empty_shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty 384-d Edge shard with every payload index, built once per test session.

    Creating the ~25 indexes costs about a second per store; copying this template into each
    test's home keeps the per-test store real (same code, same files) without that cost."""
    from brain.vector_store.edge import EdgeStore
    from config import IndexSettings

    path = tmp_path_factory.mktemp("template") / "shard"
    store = EdgeStore(path, quantization=IndexSettings().quantization)  # as a new store is
    store.open(384)
    store.close()
    return path


def _seed_store(settings: Settings, template: Path) -> None:
    import subprocess

    target = Path(settings.home) / "store" / f"{settings.qdrant.collection}_g1"
    if not target.exists():
        # Edge's mmap files are sparse (~300 MB apparent, ~200 KB on disk); a plain copy
        # would write every zero, about 300 MB per test.
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-r", "--sparse=always", str(template), str(target)], check=True)


@pytest.fixture
def brain(settings: Settings, clock: ManualClock, _empty_shard: Path) -> Iterator[Brain]:
    """A brain on Qdrant Edge in a temp dir with the deterministic offline embedder."""
    settings.embedding.model = "offline/hash-384"
    _seed_store(settings, _empty_shard)
    b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="session")
def st_embedder():  # noqa: ANN201 - SentenceTransformerEmbedder
    """The bundled all-MiniLM-L6-v2, loaded once per test session."""
    emb = build_embedder(REGISTRY["sentence-transformers/all-MiniLM-L6-v2"])
    emb.embed_query("warm up")
    return emb


@pytest.fixture
def real_brain(
    settings: Settings, clock: ManualClock, st_embedder, _empty_shard: Path  # noqa: ANN001
) -> Iterator[Brain]:
    _seed_store(settings, _empty_shard)
    b = Brain(settings, embedder=st_embedder, clock=clock).open()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
async def client(brain: Brain):  # noqa: ANN201
    """An in-process MCP client on a fresh server over the offline brain."""
    from fastmcp import Client

    from mcp_server import create_server

    async with Client(create_server(profile="full", brain=brain)) as c:
        yield c


@pytest.fixture
async def real_client(real_brain: Brain):  # noqa: ANN201
    from fastmcp import Client

    from mcp_server import create_server

    async with Client(create_server(profile="full", brain=real_brain)) as c:
        yield c


@pytest.fixture(autouse=True)
def _drop_cli_log_handlers() -> Iterator[None]:
    """The CLI run in this process (``main([...])``) calls setup_logging, which gives the root
    logger a handler on the sys.stderr of that moment: pytest's capture, closed after the test.
    Left there, a later test's background log line hit "I/O operation on closed file". Drop
    setup_logging's handlers (and its level) after each test."""
    from brain.process.logs import RedactingFormatter

    root = logging.getLogger()
    level = root.level
    yield
    for h in list(root.handlers):
        if isinstance(h.formatter, RedactingFormatter):
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


@pytest.fixture
def cli_json(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, dict[str, Any]]]:
    """Run the ``brain`` command line in this process: (exit code, its JSON output)."""
    from brain.cli import main

    def run(*argv: str) -> tuple[int, dict[str, Any]]:
        capsys.readouterr()
        rc = main(list(argv))
        return rc, json.loads(capsys.readouterr().out)

    return run
