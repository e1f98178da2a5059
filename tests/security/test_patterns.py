"""No pattern freezes the server (issue 50, finding 1).

``*a*a*a*a*a*a*a*a*a*a*a*a*b`` against a file named ``"a"*40 + ".txt"`` backtracked in
Python's ``re`` for minutes (pathspec's translation), as fs_search's ``path_glob``, as a
source's exclude, and from a ``.gitignore``; ``re`` holds the interpreter, so every other
client waited too. brain/trust/globs.py compiles every pattern so that it cannot backtrack;
these tests send the finding's pattern through each door and bound the process's CPU time
(not wall time: the machine is shared), and check the new engine agrees with pathspec's.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Any

import anyio
import pathspec
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from brain.trust.globs import compile_spec, pattern_to_regex

EVIL = "*a*a*a*a*a*a*a*a*a*a*a*a*b"
LONG_NAME = "a" * 40 + ".txt"
CPU_BUDGET_S = 2.0  # the bound, per call, of this whole process's CPU


def _cpu() -> float:
    return time.process_time()  # every thread of this process: the server runs here


def _tree(root: Path, gitignore: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / LONG_NAME).write_text("the long-named file\n")
    (root / "notes.md").write_text("# Notes\n\nplain words\n")
    (root / "debug.log").write_text("a log line\n")
    if gitignore is not None:
        (root / ".gitignore").write_text(gitignore)
    return root


async def _add(client: Client, root: Path, **extra: Any) -> dict[str, Any]:
    args = {"action": "add", "path": str(root), "name": "proj", "trigger": "manual", **extra}
    await client.call_tool("sources", args)
    return (await client.call_tool("sources", {"action": "sync", "source": "proj",
                                               "wait": True})).data  # fmt: skip


async def _paths(client: Client, **extra: Any) -> list[str]:
    args = {"query": "", "search_mode": "filter", "limit": 50, **extra}
    found = (await client.call_tool("fs_search", args)).data
    return sorted(r["path"] for r in found["results"])


# -- the engine ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        (EVIL, LONG_NAME),
        (EVIL, "/".join([LONG_NAME] * 50)),
        ("*a" * 499 + "b", "a" * 255),  # 499 stars, the longest pattern a caller may send
        ("**/a/" * 199 + "b", "/".join(["a"] * 2000)),  # ** between blocks, deep path
        ("**/*a*a*a*b/" * 40 + "c", "/".join(["a" * 100] * 40)),
        ("!" + EVIL, LONG_NAME),
        ("[a]*[a]*[a]*[a]*[a]*[a]*[a]*[a]*[a]*[a]*?b", "a" * 255),
    ],
)
def test_no_pattern_backtracks(pattern: str, path: str) -> None:
    spec = compile_spec([pattern, "!nothing"])  # the negation forces the per-pattern path
    start = _cpu()
    for _ in range(100):
        assert spec.check_file(path).include is None
    assert _cpu() - start < CPU_BUDGET_S


def test_the_finding_pattern_still_matches_what_it_should() -> None:
    spec = compile_spec([EVIL])
    assert spec.match_file("a" * 40 + "b") and spec.match_file("x/" + "ab" * 13)
    assert spec.match_file("a" * 40 + "b/inside.py")  # a matching directory holds its files
    assert not spec.match_file(LONG_NAME) and not spec.match_file("b")


def _random_pattern(rng: random.Random) -> str:
    tokens = ["a", "b", "*", "?", "/", "[ab]", "[!a]", "**", "ab", "\\*", "*a*", "/"]
    text = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 7)))
    return "!" + text if rng.random() < 0.2 else text


def _random_path(rng: random.Random) -> str:
    parts = ["".join(rng.choice("ab*") for _ in range(rng.randint(1, 4)))
             for _ in range(rng.randint(1, 5))]  # fmt: skip
    return "/".join(parts) + ("/" if rng.random() < 0.3 else "")


def test_same_verdicts_as_pathspec() -> None:
    """gitignore semantics unchanged: negation, anchoring, directory-only patterns, ``**``,
    escapes and the directory-marker priority of GitIgnoreSpec, on random specs of up to
    three lines. pathspec's ``[!a]`` may match ``/`` (ours, like git's, never does), so the
    reference gets ``[b*]``: the same set over this alphabet without the separator."""
    rng = random.Random(50)
    compared = 0
    for _ in range(3000):
        lines = [_random_pattern(rng) for _ in range(rng.randint(1, 3))]
        try:
            ref = pathspec.GitIgnoreSpec.from_lines([x.replace("[!a]", "[b*]") for x in lines])
        except ValueError:
            with pytest.raises(ValueError):
                compile_spec(lines)
            continue
        ours = compile_spec(lines)
        for _ in range(8):
            path = _random_path(rng)
            assert ours.check_file(path).include == ref.check_file(path).include, (lines, path)
            compared += 1
    assert compared > 20_000


def test_a_bracket_never_matches_the_separator() -> None:
    assert compile_spec(["x[!a]y"]).match_file("xby")
    assert not compile_spec(["x[!a]y"]).match_file("x/y")
    assert pattern_to_regex("# comment") == (None, None)
    assert pattern_to_regex("a[b") == (None, None)  # git discards an unterminated range


# -- through the server -------------------------------------------------------------------


async def test_fs_search_path_glob_answers_within_budget(client: Client, tmp_path: Path) -> None:
    done = await _add(client, _tree(tmp_path / "proj"))
    assert done["status"] == "done"
    start = _cpu()
    assert await _paths(client, path_glob=EVIL) == []
    assert _cpu() - start < CPU_BUDGET_S
    assert await _paths(client, path_glob="*a*a*a*a*a*a*a*a*a*a*a*a*.txt") == [LONG_NAME]


async def test_source_exclude_syncs_within_budget(client: Client, tmp_path: Path) -> None:
    start = _cpu()
    done = await _add(client, _tree(tmp_path / "proj"), exclude=[EVIL, "*d*e*b*u*g*.log"])
    assert done["status"] == "done"
    assert _cpu() - start < CPU_BUDGET_S
    assert await _paths(client) == sorted([LONG_NAME, "notes.md"])  # the .log is excluded


async def test_gitignore_line_syncs_and_a_bad_line_is_skipped(
    client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The finding's pattern in a source's .gitignore holds no call; an invalid line (a
    trailing backslash) is skipped with a warning and the other lines still apply (before,
    one bad line made the whole file ignored)."""
    root = _tree(tmp_path / "proj", gitignore=f"{EVIL}\n*.log\nbroken\\\n")
    start = _cpu()
    with caplog.at_level(logging.WARNING, logger="brain.trust.globs"):
        done = await _add(client, root)
    assert done["status"] == "done"
    assert _cpu() - start < CPU_BUDGET_S
    assert await _paths(client) == sorted([".gitignore", LONG_NAME, "notes.md"])
    assert any(".gitignore line 3 skipped" in r.getMessage() for r in caplog.records)


async def test_an_invalid_pattern_is_refused_at_the_door(client: Client, tmp_path: Path) -> None:
    root = _tree(tmp_path / "proj")
    with pytest.raises(ToolError, match="INVALID_ARGUMENT.*exclude.*gitignore-style"):
        await client.call_tool("sources", {"action": "add", "path": str(root),
                                           "exclude": ["broken\\"]})  # fmt: skip
    listed = (await client.call_tool("sources", {"action": "list"})).data
    assert listed["count"] == 0  # nothing stored
    await _add(client, root)
    with pytest.raises(ToolError, match="INVALID_ARGUMENT.*include"):
        await client.call_tool("sources", {"action": "update", "source": "proj",
                                           "include": ["ok/*", "broken\\"]})  # fmt: skip
    listed = (await client.call_tool("sources", {"action": "list"})).data
    assert listed["sources"][0]["include"] == []  # the edit changed nothing
    with pytest.raises(ToolError, match="INVALID_ARGUMENT.*path_glob"):
        await client.call_tool("fs_search", {"query": "", "search_mode": "filter",
                                             "path_glob": "broken\\"})  # fmt: skip


async def test_other_clients_answer_while_one_sends_the_pattern(brain: Any, tmp_path: Path) -> None:
    """Two clients of one server: while the first sends the pattern (as a filter, a grep
    glob and a semantic glob, repeatedly), the second's brain_stats and search_memory answer;
    the whole exchange stays within the CPU budget per call."""
    from mcp_server import create_server

    server = create_server(profile="full", brain=brain)
    async with Client(server) as first, Client(server) as second:
        await _add(first, _tree(tmp_path / "proj"))
        await second.call_tool("add_memory", {"content": "globs are matched in linear time"})
        answered: list[str] = []
        calls = 0

        async def hostile() -> None:
            nonlocal calls
            for mode in ("filter", "grep", "semantic") * 4:
                query = "" if mode == "filter" else "line"
                await first.call_tool("fs_search", {"query": query, "search_mode": mode,
                                                    "path_glob": EVIL})  # fmt: skip
                calls += 1

        async def other() -> None:
            for _ in range(6):
                stats = (await second.call_tool("brain_stats", {})).data
                assert stats
                hits = (await second.call_tool("search_memory", {"query": "globs"})).data
                assert hits["results"]
                answered.append("ok")

        start = _cpu()
        with anyio.fail_after(120):  # catches a hang only; the bound is the CPU below
            async with anyio.create_task_group() as tg:
                tg.start_soon(hostile)
                tg.start_soon(other)
        assert calls == 12 and len(answered) == 6
        assert _cpu() - start < CPU_BUDGET_S * (calls + 2 * len(answered))
