"""The Obsidian mirror: a vault folder, and the Local REST API against a loopback server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from brain.agentic.obsidian import render
from brain.app import Brain
from brain.clock import ManualClock
from config import Settings
from tests.conftest import hash_embedder

KEY = "obsidian-test-key-123"


def _open(settings: Settings, **obsidian: Any) -> Brain:
    settings.embedding.model = "offline/hash-384"
    for key, value in obsidian.items():
        setattr(settings.obsidian, key, value)
    return Brain(settings, embedder=hash_embedder(), clock=ManualClock()).open()


def _frontmatter(text: str) -> dict[str, Any]:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


class VaultServer:
    """A loopback stand-in for the Local REST API plugin that records every request."""

    def __init__(self, status: int = 204) -> None:
        self.status = status
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                outer.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": self.rfile.read(length).decode() if length else "",
                    }
                )
                self.send_response(outer.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_PUT = do_DELETE = _record  # noqa: N815 - http.server naming

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def vault_server() -> Iterator[VaultServer]:
    server = VaultServer()
    yield server
    server.close()


def test_notes_appear_in_the_vault_folder(settings: Settings, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    b = _open(settings, vault_path=str(vault), subfolder="brain")
    try:
        a = b.memory.add("Qdrant listens on port 6333 in docker", "infra", tags=["qdrant"])
        c = b.memory.add("Publish port 6333 of the qdrant docker container", "infra")
        b.memory.link(c.note["zk_id"], a.note["zk_id"], "supports")
        b.agentic.mirror.enqueue(c.note["zk_id"])
        assert b.agentic.drain(10)
        path = vault / "brain" / "zk" / f"{c.note['zk_id']}.md"
        text = path.read_text(encoding="utf-8")
        front = _frontmatter(text)
        assert front["zk_id"] == c.note["zk_id"] and front["project"] == "infra"
        assert front["memory_type"] == "permanent" and front["note_kind"] == "general"
        assert f"[[{a.note['zk_id']}]]" in front["links"]
        assert front["created"] and front["updated"] and front["title"]
        assert f"- supports [[{a.note['zk_id']}]]" in text
        assert (
            "qdrant"
            in _frontmatter((vault / "brain" / "zk" / f"{a.note['zk_id']}.md").read_text())["tags"]
        )
        b.memory.forget(a.note["zk_id"])
        assert b.agentic.drain(10)
        assert not (vault / "brain" / "zk" / f"{a.note['zk_id']}.md").exists()
        assert b.agentic.status()["obsidian"]["mode"] == "folder"
        assert b.agentic.status()["obsidian"]["written"] >= 2
    finally:
        b.close()


def test_rest_mode_puts_markdown_with_the_bearer_key(
    settings: Settings, vault_server: VaultServer
) -> None:
    b = _open(settings, api_key=KEY, host=vault_server.url, subfolder="brain")
    try:
        note = b.memory.add("Qdrant listens on port 6333 in docker", "infra").note
        assert b.agentic.drain(10)
        put = vault_server.requests[-1]
        assert put["method"] == "PUT"
        assert put["path"] == f"/vault/brain/zk/{note['zk_id']}.md"
        assert put["headers"]["authorization"] == f"Bearer {KEY}"
        assert put["headers"]["content-type"] == "text/markdown"
        assert _frontmatter(put["body"])["zk_id"] == note["zk_id"]
        assert KEY not in str(b.agentic.status())
    finally:
        b.close()


def test_failures_are_counted_never_raised(settings: Settings, tmp_path: Path) -> None:
    server = VaultServer(status=500)
    try:
        b = _open(settings, api_key=KEY, host=server.url)
        try:
            b.memory.add("first note about qdrant", "infra")  # must not raise
            assert b.agentic.drain(10)
            status = b.agentic.status()["obsidian"]
            assert status["failures"] == 1 and status["written"] == 0
            assert "HTTP 500" in status["last_error"]
        finally:
            b.close()
    finally:
        server.close()
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the vault should be")
    settings.obsidian.api_key = ""
    b = _open(settings, vault_path=str(blocked))
    try:
        b.memory.add("second note about qdrant", "infra")
        assert b.agentic.drain(10)
        assert b.agentic.status()["obsidian"]["failures"] == 1
    finally:
        b.close()


def test_mirror_is_off_without_settings(brain: Brain) -> None:
    brain.memory.add("a note", "infra")
    assert brain.agentic.status()["obsidian"] == {
        "mode": "off",
        "written": 0,
        "deleted": 0,
        "failures": 0,
        "pending": 0,
        "last_error": "",
    }


def test_render_escapes_yaml_safely() -> None:
    text = render(
        {
            "zk_id": "ZK-0000000A",
            "title": 'a: "tricky" title\n--- with',
            "tags": [],
            "links": [],
            "content": "body",
            "project": "p",
        }
    )
    assert _frontmatter(text)["title"] == 'a: "tricky" title\n--- with'
