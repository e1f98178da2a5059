"""A stdio note call that names no project works on the client's workspace project (MCP
roots, else the git work tree the server started in), named as the hooks name it, so what an
agent writes and searches meets what the hooks capture and brief there. Real
``python mcp_server.py`` processes sharing one data dir, real fastmcp clients."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
from fastmcp import Client

from brain.hooks.events import project_of
from tests.sources.test_workspace import _server
from tests.timing import HANG_S


def _repo(base: Path, name: str) -> Path:
    root = base / name
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


async def _add(client: Client, content: str, **args: Any) -> str:
    res = await client.call_tool("add_memory", {"content": content, **args})
    return str(res.structured_content["note"]["project"])


async def _found(client: Client, query: str, **args: Any) -> list[tuple[str, str]]:
    """The (project, title) of each hit."""
    res = await client.call_tool("search_memory", {"query": query, "top_k": 5, **args})
    return [(h["project"], h["title"]) for h in res.structured_content["results"]]


async def test_calls_without_a_project_work_on_the_workspace_the_hooks_name(
        home: Path, tmp_path: Path) -> None:
    shop, blog = _repo(tmp_path, "shop app"), _repo(tmp_path, "blog")
    off = {"BRAIN__SOURCES__WORKSPACE": "off"}  # the project alone, no source registered
    async with Client(_server(home, shop / "src", **off)) as owner:
        assert await _add(owner, "Decision: invoices are rounded per line") \
            == project_of({"cwd": str(shop / "src")}) == "shop-app"
        assert await _add(owner, "Decision: shared logging goes to stderr",
                          project="general") == "general"  # a named project is kept
        # a second agent, in another repository, forwards to the first process
        async with Client(_server(home, blog, **off)) as sibling:
            assert await _add(sibling, "Decision: posts render as static html") == "blog"
            blog_only = [("blog", "Decision: posts render as static html")]
            assert await _found(sibling, "how are invoices rounded") == blog_only
            ctx = (await sibling.call_tool("open_session", {})).structured_content
            assert ctx["context"]["project"] == ctx["inbox"]["project"] == "blog"
        assert await _found(owner, "how are posts rendered") == [
            ("shop-app", "Decision: invoices are rounded per line")]
        assert await _found(owner, "logging", project="general") == [
            ("general", "Decision: shared logging goes to stderr")]


async def test_roots_name_it_first_and_without_a_workspace_or_when_off_the_default_stays(
        home: Path, tmp_path: Path) -> None:
    shop, elsewhere = _repo(tmp_path, "shop"), _repo(tmp_path, "elsewhere")
    off = {"BRAIN__SOURCES__WORKSPACE": "off"}
    async with Client(_server(home, elsewhere, **off), roots=[shop.as_uri()],
                      mode="legacy") as client:  # roots, as Claude Code and OpenCode send
        assert await _add(client, "roots first") == "shop"
    plain = tmp_path / "plain"  # no git work tree, no roots: no workspace
    plain.mkdir()
    async with Client(_server(home, plain, **off)) as client:
        assert await _add(client, "no workspace") == "general"
    async with Client(_server(home, shop, BRAIN__MEMORY__WORKSPACE_PROJECT="false",
                              **off)) as client:
        assert await _add(client, "turned off") == "general"


async def test_a_client_that_never_lists_its_roots_holds_up_its_first_call_only_briefly(
        home: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()

    async def never(_context: Any) -> list[str]:
        await anyio.sleep(3600)
        return []

    async with Client(_server(home, plain), roots=never, mode="legacy") as client:
        with anyio.fail_after(HANG_S):  # a hang only; the wait is workspace.ROOTS_TIMEOUT_S
            assert await _add(client, "still written") == "general"
