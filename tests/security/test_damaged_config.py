"""Damaged configuration files of the data dir (issue 50): ``tokens.json`` cut short and
``generations.json`` damaged. Each is answered with a typed error naming the file and the
fix, and changes nothing. Real parts: a real ``brain serve --http`` subprocess and real HTTP
requests; real Brain starts on Qdrant Edge in temp dirs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from brain.process import owner as own
from tests.process.test_http import (
    HEADERS,
    INIT,
    ROOT,
    Server,
    _env,
    _start,
    _stop,
    _token,
    _token_add,
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = _start(tmp_path / "home", tmp_path / "server.err")
    try:
        yield srv
    finally:
        _stop(srv)


async def _stats(url: str, token: str) -> dict:
    async with Client(StreamableHttpTransport(url, auth=token), timeout=60) as c:
        res = await c.call_tool("brain_stats", {})
    assert res.structured_content is not None
    return res.structured_content


async def test_truncated_tokens_json_answers_a_typed_error_naming_the_file(
        server: Server) -> None:
    alice = _token_add(server.home, "alice", "a1")
    await _stats(server.url, alice)  # the token works
    tokens = server.home / own.TOKENS_FILE
    good = tokens.read_bytes()
    tokens.write_bytes(good[: len(good) // 2])  # cut short
    async with httpx.AsyncClient(timeout=30) as http:
        res = await http.post(server.url, json=INIT,
                              headers={**HEADERS, "authorization": f"Bearer {alice}"})
    # Was: HTTP 500 with a traceback naming no file.
    assert res.status_code == 503, res.text
    body = res.json()
    assert body["error"] == "CONFIG_INVALID"
    assert "tokens.json" in body["message"] and "brain token add" in body["message"]
    assert str(server.home) not in body["message"]  # the full path stays in the server log
    assert "Traceback" not in server.output()
    assert str(tokens) in server.output() and "CONFIG_INVALID" in server.output()
    # The home token keeps working, and `brain token add` refuses, changing nothing.
    await _stats(server.url, _token(server))
    add = subprocess.run(
        [sys.executable, "-m", "brain.cli", "token", "add", "--user", "bob", "--agent", "b1"],
        env=_env(server.home), cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert add.returncode != 0 and "[CONFIG_INVALID]" in add.stderr and str(tokens) in add.stderr
    assert tokens.read_bytes() == good[: len(good) // 2]
    # Put back (a backup): the per-caller token works again, without a restart.
    tokens.write_bytes(good)
    await _stats(server.url, alice)


def test_load_tokens_names_each_kind_of_damage(tmp_path: Path) -> None:
    from brain.errors import ConfigError

    path = tmp_path / own.TOKENS_FILE
    for bad in (b'{"abc": {"user_id": "u", "age', b'{"abc": {"user_id": "\xff"}}', b"[1, 2]",
                b'{"abc": {"user_id": "u"}}'):
        path.write_bytes(bad)
        with pytest.raises(ConfigError) as info:
            own.load_tokens(tmp_path)
        assert str(path) in str(info.value) and "brain token add" in str(info.value)
        assert path.read_bytes() == bad


# ------------------------------------------------------------------------ generations.json
def _open(settings):  # noqa: ANN001, ANN202
    from brain.app import Brain
    from tests.conftest import hash_embedder

    settings.embedding.model = "offline/hash-384"
    return Brain(settings, embedder=hash_embedder()).open()


@pytest.mark.parametrize("damage", ["truncate", "flip", "shape"])
def test_damaged_generations_json_is_named_with_the_fix(settings, damage: str) -> None:  # noqa: ANN001
    from brain.errors import ConfigError
    from brain.generations import state

    b = _open(settings)
    try:
        b.memory.add("a note to keep", project="p")
    finally:
        b.close()
    path = settings.home / state.STATE_FILE
    state.save(settings.home, state.GenerationState(active=1, active_model="offline/hash-384",
                                                    active_dimension=384))
    good = path.read_bytes()
    bad = {"truncate": good[: len(good) // 2],
           "flip": good.replace(b'"active": 1', b'"active": \xff'),
           "shape": b'{"active": "one", "rebuild": {"target": 3}}'}[damage]
    path.write_bytes(bad)
    with pytest.raises(ConfigError) as info:
        _open(settings)
    msg = str(info.value)
    assert str(path) in msg, msg
    assert info.value.details["path"] == str(path)
    assert "_g1" in msg  # the generations found on disk, to write the fix with
    assert path.read_bytes() == bad  # changed nothing
    path.write_bytes(good)
    b = _open(settings)
    try:
        assert len(list(b.memory.notes())) == 1
    finally:
        b.close()
