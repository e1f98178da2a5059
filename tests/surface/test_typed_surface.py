"""The doors are typed (issue 49): no parameter in mcp_server.py, mcp_surface/ or webui/ is
annotated with a bare ``Any`` unless the value is genuinely open.

THE RULE: a parameter annotated ``Any`` (``Any``, ``typing.Any`` or the string ``"Any"``)
fails, because a project or framework type says what it is: the services (``Services``), the
call gate (``Call``), the server (``FastMCP``), the state that holds the Brain
(``BrainHolder``), the router, a task group, fastmcp's ``CallNext``... The only exceptions
are listed in :data:`OPEN`, each with the reason its value has no narrower type. Read from
the source with ``ast``, so a new module is checked without being imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = (ROOT / "mcp_server.py", ROOT / "mcp_surface", ROOT / "webui")

# (file, function, parameter) -> why the value is open.
OPEN: dict[tuple[str, str, str], str] = {
    ("mcp_surface/lean.py", "lean_schema", "schema"):
        "a JSON schema fragment: any JSON value, walked recursively",
    ("mcp_surface/lean.py", "to_mcp_tool", "overrides"):
        "fastmcp's FunctionTool.to_mcp_tool(**overrides: Any), passed on as is",
    ("mcp_surface/lean.py", "convert_result", "raw_value"):
        "fastmcp's convert_result(raw_value: Any): whatever a tool returned",
    ("mcp_surface/text_guard.py", "as_text", "value"):
        "any JSON-shaped value (a tool's arguments or result), walked recursively",
    ("mcp_surface/text_guard.py", "first_bad_text", "value"):
        "any JSON-shaped value (a tool's arguments or result), walked recursively",
    ("mcp_surface/stdio_guard.py", "_encodable", "value"):
        "a JSON-RPC id or value as decoded from a client's line",
    ("mcp_surface/stdio_guard.py", "_request_id", "msg"):
        "a decoded JSON-RPC line: any JSON value, checked before use",
    ("mcp_surface/stdio_guard.py", "_unanswerable", "msg"):
        "a decoded JSON-RPC line: any JSON value, checked before use",
    ("mcp_surface/stdio_guard.py", "_screen", "source"):
        "the MCP SDK's private stdio reader stream (mcp.server.stdio), untyped there",
    ("mcp_surface/stdio_guard.py", "_screen", "write"):
        "the MCP SDK's private stdio writer stream (mcp.server.stdio), untyped there",
    ("mcp_surface/stdio_guard.py", "_pipes", "stdin"):
        "the binary file the SDK's private _claim_fd returns for fd 0",
    ("mcp_surface/stdio_guard.py", "_pipes", "stdout"):
        "the binary file the SDK's private _claim_fd returns for fd 1",
    ("mcp_surface/stdio_guard.py", "_read_lines", "out"):
        "the SDK's private stdio reader stream, as _screen's source",
    ("mcp_surface/stdio_guard.py", "_write_lines", "source"):
        "the SDK's private stdio writer stream, as _screen's write",
    ("mcp_surface/stdio_guard.py", "__init__", "inner"):
        "the SDK's private stdio writer stream that _TextWriter wraps",
    ("mcp_surface/election.py", "start_soon", "args"):
        "*args forwarded to anyio's TaskGroup.start_soon, typed Any there too",
    ("mcp_surface/forwarding.py", "start_soon", "args"):
        "*args forwarded to anyio's TaskGroup.start_soon (the Host protocol of it)",
    ("webui/app.py", "page", "ctx"):
        "a Jinja template's context: any value a template shows",
}


def _is_any(node: ast.expr | None) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any" and isinstance(node.value, ast.Name) and \
            node.value.id in ("typing", "t")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.strip() in ("Any", "typing.Any")
    return False


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = fn.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]


def bare_any(path: Path, rel: str) -> tuple[set[tuple[str, str, str]], int]:
    """(file, function, parameter) of every bare-Any parameter in ``path``, and how many
    annotated parameters it has."""
    found: set[tuple[str, str, str]] = set()
    annotated = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for p in _params(node):
                if p.annotation is None:
                    continue
                annotated += 1
                if _is_any(p.annotation):
                    found.add((rel, node.name, p.arg))
    return found, annotated


def _files() -> list[Path]:
    out: list[Path] = []
    for where in CHECKED:
        out.extend([where] if where.is_file() else sorted(where.rglob("*.py")))
    return out


def scan() -> tuple[set[tuple[str, str, str]], int]:
    found: set[tuple[str, str, str]] = set()
    total = 0
    for path in _files():
        hits, n = bare_any(path, path.relative_to(ROOT).as_posix())
        found |= hits
        total += n
    return found, total


def test_no_bare_any_parameter_where_a_type_exists() -> None:
    found, _ = scan()
    untyped = sorted(found - OPEN.keys())
    assert untyped == [], (
        "type these parameters (a project or framework type exists), or, for a genuinely "
        f"open value, list them in OPEN with the reason: {untyped}")


def test_every_open_entry_still_exists_and_says_why() -> None:
    found, _ = scan()
    stale = sorted(OPEN.keys() - found)
    assert stale == [], f"no longer bare Any (drop them from OPEN): {stale}"
    assert all(len(reason) > 20 for reason in OPEN.values())


def test_bare_any_share_of_mcp_surface_stays_small() -> None:
    """The share the issue measured (17.7% of mcp_surface's annotated parameters were bare
    Any): only the OPEN values are left."""
    found, total = set(), 0
    for path in sorted((ROOT / "mcp_surface").rglob("*.py")):
        hits, n = bare_any(path, path.relative_to(ROOT).as_posix())
        found |= hits
        total += n
    assert len(found) / total < 0.06


def test_the_check_sees_every_spelling(tmp_path: Path) -> None:
    """The walk is real: each spelling of Any in each kind of parameter is caught, a
    parameterised Any (``dict[str, Any]``) and an unannotated one are not."""
    src = tmp_path / "m.py"
    src.write_text(
        "import typing\nfrom typing import Any\n"
        "def register(mcp: Any, call: 'Any', *args: typing.Any, **kw: Any) -> None: ...\n"
        "class C:\n    async def run(self, b: Any, /, ok: dict[str, Any], x=1) -> None: ...\n",
        encoding="utf-8")
    found, annotated = bare_any(src, "m.py")
    assert found == {("m.py", "register", "mcp"), ("m.py", "register", "call"),
                     ("m.py", "register", "args"), ("m.py", "register", "kw"),
                     ("m.py", "run", "b")}
    assert annotated == 6
