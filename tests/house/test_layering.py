"""brain/ is plain Python: it never imports the MCP framework (the tool layer adapts it), nor
the MCP layer above it, nor the benchmarks in bench/ (they are clients of the product)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("fastmcp", "mcp")


def test_brain_never_imports_mcp_frameworks() -> None:
    offenders = []
    files = sorted((ROOT / "brain").rglob("*.py"))
    assert len(files) > 10
    for path in files:
        for name in _all_imports(path):
            if name.split(".")[0] in FORBIDDEN:
                offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []


def test_config_imports_nothing_from_brain() -> None:
    assert not [n for n in _all_imports(ROOT / "config.py") if n.split(".")[0] == "brain"]


# What brain/ must never import, by any route: a statement, or importlib.import_module /
# __import__ / runpy.run_module with a literal name. bench/ sits above the product (it drives
# the server as a client does), mcp_server / mcp_surface are the tool layer, webui the web
# explorer beside it (brain/ stays free of web frameworks).
ABOVE_BRAIN = ("bench", "mcp_server", "mcp_surface", "fastmcp", "mcp", "webui", "starlette",
               "jinja2", "uvicorn")
# The one legitimate upward reach: `brain serve` (the installed command) starts the server
# by importing mcp_server when it runs (brain/cli/serve.py says why). Nothing may be added here.
KNOWN_UPWARD = {("brain/cli/serve.py", "mcp_server")}
_DYNAMIC = {"import_module", "__import__", "run_module"}


def _all_imports(path: Path) -> list[str]:
    """Every module name ``path`` imports, statically or through a literal dynamic import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (
                called in _DYNAMIC
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                names.append(first.value)
    return names


def test_brain_imports_nothing_above_it() -> None:
    found = set()
    files = sorted((ROOT / "brain").rglob("*.py"))
    assert len(files) > 10
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for name in _all_imports(path):
            if name.split(".")[0] in ABOVE_BRAIN:
                found.add((rel, name))
    assert found - KNOWN_UPWARD == set()


def test_the_import_walk_sees_dynamic_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "import importlib, runpy\n"
        "from importlib import import_module\n"
        "def f():\n"
        "    importlib.import_module('mcp_server')\n"
        "    import_module('bench.speed')\n"
        "    __import__('mcp_surface.routing')\n"
        "    runpy.run_module('bench', run_name='__main__')\n"
        "    from fastmcp import Client\n",
        encoding="utf-8",
    )
    assert set(_all_imports(src)) >= {
        "mcp_server", "bench.speed", "mcp_surface.routing", "bench", "fastmcp",
    }


def test_no_benchmark_code_in_the_product() -> None:
    """Benchmarks live in bench/ (issue 19): none under brain/, and the wheel ships brain* only."""
    brain = ROOT / "brain"
    stray = [
        p.relative_to(ROOT).as_posix()
        for p in brain.rglob("*.py")
        if "bench" in p.relative_to(brain).as_posix()
        and p.relative_to(brain).as_posix() != "cli/bench.py"
    ]
    assert stray == []
    assert (ROOT / "bench" / "__init__.py").is_file()
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = conf["tool"]["setuptools"]["packages"]["find"]["include"]
    assert "brain*" in include and not [p for p in include if p.startswith("bench")]
