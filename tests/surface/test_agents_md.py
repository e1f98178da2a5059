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


# ------------------------------------------------- commands and tools every text names exist
# What a user reads besides the docs: the explorer's pages (webui/templates) and the messages
# of the errors the product raises (string literals in calls to an exception class, anywhere in
# the product's source). Each `brain ...` command they name must be one the parser knows, and
# each tool one the full profile lists, never a name of an earlier release.
TEMPLATES = sorted((ROOT / "webui" / "templates").glob("*.html"))
PRODUCT = [*sorted((ROOT / "brain").rglob("*.py")), *sorted((ROOT / "mcp_surface").rglob("*.py")),
           *sorted((ROOT / "webui").rglob("*.py")), ROOT / "mcp_server.py", ROOT / "config.py"]
QUOTED_COMMAND = re.compile(r"(?:`|'|\"|<code>)brain((?: [a-z][a-z0-9-]*)+)")
SHELL_COMMAND = re.compile(r"(?:^\s*|[;&|]\s*|\$ )brain((?: [a-z][a-z0-9-]*)+)", re.M)
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)
CODE_WORD = re.compile(r"<code>([a-z][a-z_]*)</code>")
ACTION_CALL = re.compile(r"\b([a-z_]+)\(action=[\"']([a-z_]+)[\"']")
JINJA = re.compile(r"\{[{%#].*?[}%#]\}", re.S)


def commands_in(text: str) -> set[str]:
    """The `brain ...` commands a text names: quoted, in <code>, or on a shell line of a
    fenced block (a prose line that starts with "brain" is not one)."""
    found = {m.strip() for m in QUOTED_COMMAND.findall(text)}
    for block in FENCE.findall(text):
        found |= {m.strip() for m in SHELL_COMMAND.findall(block)}
    return found


def command_problem(words: list[str]) -> str | None:
    """Why ``brain WORDS`` is not a command the parser knows, or None when it is: each word
    names a subcommand while there are subcommands, then the next may be a positional's
    choice (``brain install claude-code``); later words are arguments."""
    import argparse

    from brain.cli import build_parser

    parser = build_parser()
    for word in words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            if word not in subs[0].choices:
                return f"no command {word!r} (known: {sorted(subs[0].choices)})"
            parser = subs[0].choices[word]
            continue
        positional = [a for a in parser._actions if not a.option_strings and a.dest != "help"]
        choices = positional[0].choices if positional else None
        if choices is not None and word not in choices:
            return f"{word!r} is not one of {sorted(choices)}"
        return None
    return None


def _error_classes(trees: list[Any]) -> set[str]:
    import ast
    import builtins

    bases: dict[str, set[str]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = {b.id if isinstance(b, ast.Name) else b.attr
                         for b in node.bases if isinstance(b, ast.Name | ast.Attribute)}
                bases.setdefault(node.name, set()).update(names)
    errors = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
              and issubclass(getattr(builtins, n), BaseException)}
    errors |= {"ToolError"}  # fastmcp's, which CodedToolError extends
    grown = True
    while grown:
        more = {c for c, bs in bases.items() if bs & errors} - errors
        errors |= more
        grown = bool(more)
    return errors


def error_texts() -> list[tuple[str, str]]:
    """(file, text) of every string literal in a call to an exception class in the product,
    the parts of one call (f-string pieces, concatenated literals) joined."""
    import ast

    trees = [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in PRODUCT]
    classes = _error_classes([t for _, t in trees])
    out = []
    for path, tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name not in classes:
                continue
            parts = [n.value for arg in [*node.args, *(k.value for k in node.keywords)]
                     for n in ast.walk(arg) if isinstance(n, ast.Constant)
                     and isinstance(n.value, str)]
            if parts:
                out.append((str(path.relative_to(ROOT)), "".join(parts)))
    return out


def _named_texts() -> list[tuple[str, str]]:
    texts = [(p.name, _text(p)) for p in [*DOCS, *TEMPLATES]]
    return texts + error_texts()


def test_every_command_the_docs_pages_and_errors_name_exists() -> None:
    bad = []
    for where, text in _named_texts():
        for command in sorted(commands_in(text)):
            problem = command_problem(command.split())
            if problem:
                bad.append(f"{where}: `brain {command}`: {problem}")
    assert not bad, "texts name brain commands that do not exist:\n" + "\n".join(bad)


async def test_every_tool_the_pages_and_errors_name_exists(brain: Any) -> None:
    """The explorer's pages and the error messages name today's tools: no name of an earlier
    release, every `tool(action="x")` a listed tool taking that action, and every
    <code>word</code> of a page a tool or an action of one."""
    live = await _listed("full", brain)
    actions = {a for t in live.values()
               for a in t.inputSchema.get("properties", {}).get("action", {}).get("enum", [])}
    texts = [(p.name, JINJA.sub(" ", _text(p))) for p in TEMPLATES] + error_texts()
    bad = []
    for where, text in texts:
        if where == "mcp_surface/profiles.py":  # it maps the earlier names onto today's
            continue
        words = set(re.findall(r"\b([a-z]+(?:_[a-z]+)+)\b", text))
        bad += [f"{where}: {n} (an earlier release's name)" for n in sorted(words & set(RENAMED))]
        for name, action in ACTION_CALL.findall(text):
            if name not in live:
                bad.append(f"{where}: {name}(")
            elif action not in live[name].inputSchema["properties"].get(
                    "action", {}).get("enum", []):
                bad.append(f"{where}: {name}(action={action!r})")
    for path in TEMPLATES:
        bad += [f"{path.name}: <code>{w}</code>" for w in CODE_WORD.findall(_text(path))
                if w not in live and w not in actions]
    assert not bad, "texts name tools that do not exist:\n" + "\n".join(bad)


def test_the_name_checks_can_fail() -> None:
    assert command_problem(["source", "add"]) is None
    assert command_problem(["install", "claude-code"]) is None
    assert command_problem(["sources", "add"]) is not None  # the explorer's old empty state
    assert command_problem(["health", "scann"]) is not None
    assert commands_in("run `brain source add PATH` or 'brain sync'") == {"source add", "sync"}
    assert commands_in("the brain keeps notes\nbrain stats") == set()  # prose, not a command
    assert commands_in("```bash\nmake install && brain install opencode\n```\n") == {
        "install opencode"}
    assert any("brain source add" in t for _, t in error_texts())  # the scan reaches messages
    assert ACTION_CALL.findall("list it with fs(action='list')") == [("fs", "list")]
    assert JINJA.sub(" ", "{% if x %}a{{ tree(hot) }}{% endif %}") == " a  "
