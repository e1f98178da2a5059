"""The docs name what exists: AGENTS.md and docs/tools.md against the live tool lists, and
every setting and tool any doc names against the code.

- AGENTS.md documents exactly the core profile (a row per tool, both ways), and every bare
  identifier it puts in backticks is a tool or an argument of one;
- docs/tools.md documents exactly the full profile, each tool in the group (module of
  mcp_server.TOOL_GROUPS, or "core" for mcp_server's own) that registers it;
- README.md, AGENTS.md and docs/*.md name only real settings (``BRAIN__SECTION__FIELD``,
  ``[section] field``, ``section.field``) and never a tool name of an earlier release outside
  docs/tools.md's table of them;
- the front doors stay small: AGENTS.md at most 4,000 characters, README.md 15,000.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from config import Settings
from mcp_surface.profiles import CORE, RENAMED

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "AGENTS.md"
TOOLS_DOC = ROOT / "docs" / "tools.md"
DOCS = [ROOT / "README.md", AGENTS, *sorted((ROOT / "docs").glob("*.md"))]
ROW = re.compile(r"^\| `([a-z_]+)` \|", re.M)
GROUP_ROW = re.compile(r"^\| `([a-z_]+)` \| ([a-z]+) \|", re.M)
BACKTICKED = re.compile(r"`([a-z][a-z_]*)`")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


async def _listed(profile: str, brain: Any) -> dict[str, Any]:
    from fastmcp import Client

    from mcp_server import create_server

    async with Client(create_server(brain=brain, profile=profile)) as c:  # type: ignore[arg-type]
        return {t.name: t for t in await c.list_tools()}


def test_the_front_doors_are_small() -> None:
    assert len(_text(AGENTS)) <= 4000, len(_text(AGENTS))
    assert len(_text(ROOT / "README.md")) <= 15_000


async def test_agents_md_documents_exactly_the_core_profile(brain: Any) -> None:
    live = await _listed("core", brain)
    rows = set(ROW.findall(_text(AGENTS)))
    assert set(live) == rows == CORE, (set(live) ^ rows)
    arguments = {a for t in live.values() for a in t.inputSchema.get("properties", {})}
    stray = set(BACKTICKED.findall(_text(AGENTS))) - rows - arguments
    assert not stray, f"AGENTS.md names what no core tool is or takes: {sorted(stray)}"


async def test_tools_md_documents_exactly_the_full_profile(brain: Any) -> None:
    live = await _listed("full", brain)
    rows = dict(GROUP_ROW.findall(_text(TOOLS_DOC)))
    assert set(live) == set(rows), set(live) ^ set(rows)


async def test_every_tool_group_registers_its_documented_tools() -> None:
    """Each module of mcp_server.TOOL_GROUPS, registered alone, adds exactly the tools of its
    docs/tools.md group: none is empty, and none hides in another group's rows."""
    from fastmcp import FastMCP

    import mcp_server

    rows = dict(GROUP_ROW.findall(_text(TOOLS_DOC)))
    for group in mcp_server.TOOL_GROUPS:
        probe = FastMCP("probe")
        group.register(probe, None)  # the gate is only called when a tool runs
        names = {t.name for t in await probe.list_tools()}
        short = group.__name__.rsplit(".", 1)[-1]
        assert names, f"{group.__name__} registers no tool"
        assert names == {n for n, g in rows.items() if g == short}, group.__name__


def test_protocol_covers_the_workflow_order() -> None:
    text = _text(AGENTS)
    order = ["`open_session`", "`preflight_check`", "`record_failure`", "`record_resolution`",
             "`close_session`", "`archive_stale_notes`"]
    positions = [text.index(t) for t in order]
    assert positions == sorted(positions)


def setting_exists(path: list[str]) -> bool:
    """``["memory", "relevance_band"]`` names a field of Settings (dict sections such as
    ``workers`` take any key, then their model's fields)."""
    model: Any = Settings
    i = 0
    while i < len(path):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return False
        field = model.model_fields.get(path[i].lower())
        if field is None:
            return False
        ann = field.annotation
        i += 1
        if typing.get_origin(ann) is dict:
            ann = typing.get_args(ann)[1]
            i += 1  # the dict's key: any name
            if i > len(path):
                return False
        model = ann
    return True


ENV = re.compile(r"BRAIN__([A-Z0-9_]+?(?:__[A-Z0-9_]+)+)\b")
SECTION_FIELD = re.compile(r"\[([a-z_]+)\] `?([a-z_]+)`?")
DOTTED = re.compile(r"`([a-z_]+)\.([a-z_]+)`")
FILE_SUFFIXES = {"py", "json", "md", "toml", "txt", "db", "js", "log"}  # `decay.py`: a file


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_setting_a_doc_names_exists(doc: Path) -> None:
    text = _text(doc)
    sections = set(Settings.model_fields)
    bad = [f"BRAIN__{m}" for m in ENV.findall(text)
           if m != "SECTION__FIELD" and not setting_exists(m.split("__"))]  # the pattern itself
    bad += [f"[{s}] {f}" for s, f in SECTION_FIELD.findall(text)
            if s in sections and not setting_exists([s, f])]
    bad += [f"{s}.{f}" for s, f in DOTTED.findall(text)
            if s in sections and f not in FILE_SUFFIXES and not setting_exists([s, f])]
    assert not bad, f"{doc.name} names settings that do not exist: {bad}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_doc_names_a_tool_of_an_earlier_release(doc: Path) -> None:
    text = _text(doc)
    if doc == TOOLS_DOC:  # its table of the earlier names, and only that, names them
        text = text.split("## Names of earlier releases")[0]
    old = sorted({n for n in re.findall(r"`([a-z_]+)[`(]", text) if n in RENAMED})
    assert not old, f"{doc.name} names tools of an earlier release: {old}"


# Backticked calls in the docs that are Python, not tools: the scripting API
# (brain/api.py: open_brain, call) and the store's optimize.
PYTHON_CALLS = {"open_brain", "call", "optimize"}
CALL = re.compile(r"`([a-z_]+)\((?:action=\"([a-z_]+)\")?")


async def test_every_tool_a_doc_calls_exists_with_its_action(brain: Any) -> None:
    """`tool(...)` in any doc is a tool of the full profile, and `tool(action="x"...)` an
    action that tool takes."""
    live = await _listed("full", brain)
    bad = []
    for doc in DOCS:
        for name, action in CALL.findall(_text(doc)):
            if name in PYTHON_CALLS:
                continue
            if name not in live:
                bad.append(f"{doc.name}: {name}(")
            elif action and action not in live[name].inputSchema["properties"].get(
                    "action", {}).get("enum", []):
                bad.append(f'{doc.name}: {name}(action="{action}")')
    assert not bad, f"docs call tools or actions that do not exist: {bad}"


def test_the_checks_can_fail() -> None:
    """The resolver and patterns above refuse what does not exist (a check that cannot
    fail checks nothing)."""
    assert setting_exists(["memory", "relevance_band"])
    assert setting_exists(["workers", "decay", "enabled"])
    assert setting_exists(["mcp", "tools"])
    assert not setting_exists(["memory", "no_such_field"])
    assert not setting_exists(["nosection", "x"])
    assert not setting_exists(["mcp", "tools", "deeper"])
    assert ENV.findall("set BRAIN__MCP__TOOLS=full") == ["MCP__TOOLS"]
    assert CALL.findall('see `health(action="scann")` and `nosuch_tool(x)`') == [
        ("health", "scann"), ("nosuch_tool", "")]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_of_a_doc_resolves(doc: Path) -> None:
    """README's front door points into docs/: a moved or renamed page fails here."""
    links = re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", _text(doc))
    missing = [link for link in links if not (doc.parent / link).exists()]
    assert not missing, f"{doc.name} links to files that do not exist: {missing}"
