"""brain/ is plain Python: it never imports the MCP framework (the tool layer adapts it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("fastmcp", "mcp")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_brain_never_imports_mcp_frameworks() -> None:
    offenders = []
    files = sorted((ROOT / "brain").rglob("*.py"))
    assert len(files) > 10
    for path in files:
        for name in _imports(path):
            if name.split(".")[0] in FORBIDDEN:
                offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []


def test_config_imports_nothing_from_brain() -> None:
    assert not [n for n in _imports(ROOT / "config.py") if n.split(".")[0] == "brain"]
