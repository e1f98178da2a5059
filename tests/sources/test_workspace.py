"""The workspace the client already names (issue 51, item 4): a stdio client's MCP roots, or
else the git work tree the server started in, become its project's source on the first tool
call under ``[sources] workspace = auto``, within the allowed roots; otherwise nothing
changes. Real ``python mcp_server.py`` processes, real fastmcp clients."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from brain.sources import workspace
from tests.timing import HANG_S

ROOT = Path(__file__).resolve().parents[2]


def _project(base: Path) -> Path:
    proj = base / "shop"
    (proj / "app").mkdir(parents=True)
    (proj / "app" / "billing.py").write_text("def zebracorn_invoice():\n    return 42\n")
    return proj


def _server(home: Path, cwd: Path, **env: str) -> StdioTransport:
    full = {**os.environ, "BRAIN__HOME": str(home), "HF_HUB_OFFLINE": "1",
            "BRAIN__EMBEDDING__MODEL": "offline/hash-384", "BRAIN__SOURCES__WORKSPACE": "auto",
            **env}
    return StdioTransport(command=sys.executable, args=[str(ROOT / "mcp_server.py")],
                          env=full, cwd=str(cwd))


async def _until_found(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    """fs_search until the workspace's first sync has indexed the file: grep sees it once
    the source is registered, the semantic index once its chunks are embedded (a sync that
    yields to these very calls: brain/embedding/lanes.py)."""
    res: dict[str, Any] = {}
    with anyio.move_on_after(HANG_S):
        while True:
            res = (await client.call_tool("fs_search", args)).structured_content
            if res["count"]:
                break
            await anyio.sleep(0.2)
    return res


async def _grep_until_found(client: Client, query: str) -> dict[str, Any]:
    return await _until_found(client, {"query": query, "search_mode": "grep"})


async def test_a_client_announcing_roots_gets_its_workspace_searchable_with_no_setup(
    home: Path, tmp_path: Path
) -> None:
    proj = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"  # the server starts outside the project
    elsewhere.mkdir()
    # mode="legacy": the handshake-era protocol Claude Code and OpenCode speak (2025-11-25)
    async with Client(_server(home, elsewhere), roots=[proj.as_uri()], mode="legacy") as client:
        await client.call_tool("search_memory", {"query": "anything", "project": "shop"})
        res = await _grep_until_found(client, "zebracorn_invoice")
        assert res["sources"] == ["shop"] and res["count"] == 1, res
        assert res["results"][0]["path"] == "app/billing.py"
        sem = await _until_found(client, {"query": "zebracorn invoice", "project": "shop"})
        assert sem["results"] and sem["results"][0]["path"] == "app/billing.py", sem
    next_session = Client(_server(home, elsewhere), roots=[proj.as_uri()], mode="legacy")
    async with next_session as client:
        await client.call_tool("brain_stats", {})
        res = (await client.call_tool("fs_search", {"query": "zebracorn_invoice",
                                                    "search_mode": "grep"})).structured_content
        assert res["sources"] == ["shop"]  # held already: not added twice


async def test_without_roots_the_git_work_tree_the_server_started_in_is_the_workspace(
    home: Path, tmp_path: Path
) -> None:
    proj = _project(tmp_path)
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    async with Client(_server(home, proj / "app")) as client:  # started below the top
        await client.call_tool("brain_stats", {})
        res = await _grep_until_found(client, "zebracorn_invoice")
        assert res["sources"] == ["shop"] and res["count"] == 1, res


@pytest.mark.parametrize("case", ["off", "outside-policy", "not-git"])
async def test_otherwise_nothing_is_registered(home: Path, tmp_path: Path, case: str) -> None:
    proj = _project(tmp_path / "in")
    if case != "not-git":
        subprocess.run(["git", "init", "-q", str(proj)], check=True)
    env = {"BRAIN__SOURCES__WORKSPACE": "off"} if case == "off" else {}
    if case == "outside-policy":
        env["BRAIN__PATHS__ALLOWED_ROOTS"] = str(tmp_path / "other")
    async with Client(_server(home, proj, **env)) as client:
        await client.call_tool("brain_stats", {})
        res = (await client.call_tool("fs_search", {"query": "zebracorn_invoice",
                                                    "search_mode": "grep"})).structured_content
        assert res["sources"] == [] and res["count"] == 0, res
        assert "unreachable" not in res


def test_home_and_the_filesystem_root_are_never_a_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "user"
    (user / "proj").mkdir(parents=True)
    (user / ".git").mkdir()  # a dotfiles repository at the top of home
    monkeypatch.setenv("HOME", str(user))
    uris = ["file:///", user.as_uri(), tmp_path.as_uri(), (user / "proj").as_uri(),
            "https://example.com/x", (user / "missing").as_uri()]
    assert workspace.from_roots(uris) == [str(user / "proj")]
    assert workspace.git_top(str(user / "proj")) is None  # home's repository is not one
