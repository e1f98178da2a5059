"""The house's floors (ARCHITECTURE.md, "Layers"): brain/ is grouped into packages by concern,
and an import between two of them (or the few modules at brain/'s root) only ever goes down.
Read from the source with ``ast``, every import counts: module level, inside a function, or
behind ``TYPE_CHECKING``, since each is an arrow a reader has to follow."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
BRAIN = ROOT / "brain"

# Top floor first. A unit is a package under brain/ or a module at its root; a unit may
# import only from units on floors below its own.
FLOORS: list[set[str]] = [
    {"cli"},
    {"process", "api"},
    {"app"},
    {"maintenance", "agentic"},
    {"workflow", "files", "generations", "health", "citations"},
    {"memory", "sources"},
    {"search", "workers"},
    {"store", "embedding", "hooks"},
    {"llm", "trust", "report"},
    {"notes"},  # the note schema and its enums: tenancy checks visibility against them
    {"vector_store", "citation"},
    {"errors", "clock", "heap", "private", "http_json", "projects"},
]
# brain/__init__.py is the package's face for scripts (open_brain, imported lazily from api).
FACE = "__init__"
MAX_ROOT_MODULES = 15


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else FACE


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """brain modules ``path`` imports (``from brain import x`` names ``brain.x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("brain."))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "brain":
                found.update(f"brain.{a.name}" for a in node.names)
            elif node.module.startswith("brain."):
                found.add(node.module)
    return found


def _edges() -> dict[tuple[str, str], set[str]]:
    """(importing unit, imported unit) -> the files that make the arrow."""
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in sorted(BRAIN.rglob("*.py")):
        src = _unit(_module_of(path))
        for name in _imports(path):
            dst = _unit(name)
            if dst != src:
                edges[(src, dst)].add(path.relative_to(ROOT).as_posix())
    return edges


def _floor() -> dict[str, int]:
    return {unit: i for i, floor in enumerate(FLOORS) for unit in floor}


def test_every_unit_of_brain_has_a_floor() -> None:
    units = {p.name for p in BRAIN.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    units |= {p.stem for p in BRAIN.glob("*.py") if p.stem != FACE}
    assert units == set(_floor())


def test_imports_between_packages_only_go_down() -> None:
    floor = _floor()
    upward = {
        f"{src} -> {dst}: {sorted(files)}"
        for (src, dst), files in _edges().items()
        if src != FACE and floor[dst] <= floor[src]
    }
    assert upward == set()


def test_no_circle_between_packages_or_modules() -> None:
    units = nx.DiGraph(list(_edges()))
    units.remove_nodes_from([FACE])
    assert list(nx.simple_cycles(units)) == []
    modules = nx.DiGraph()
    for path in BRAIN.rglob("*.py"):
        src = _module_of(path)
        modules.add_edges_from((src, dst) for dst in _imports(path)
                               if dst != src and not src.startswith(dst + "."))
    modules.remove_nodes_from(["brain"])
    assert list(nx.simple_cycles(modules)) == []


def test_the_root_of_brain_stays_small() -> None:
    assert len(list(BRAIN.glob("*.py"))) <= MAX_ROOT_MODULES


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk is real: a store module importing the memory package is an upward arrow."""
    src = tmp_path / "m.py"
    src.write_text("from brain.memory.core import x\nimport brain.search.fusion\n"
                   "def f():\n    from brain import app\n", encoding="utf-8")
    assert _imports(src) == {"brain.memory.core", "brain.search.fusion", "brain.app"}
    assert _floor()["memory"] < _floor()["store"]


def test_the_explorer_is_started_by_the_server_not_below_it() -> None:
    """mcp_server.create_server gives the router its explorer; mcp_surface never reaches up."""
    below = [p for p in (ROOT / "mcp_surface").rglob("*.py")
             for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
             if isinstance(node, ast.ImportFrom | ast.Import)
             and any(n.split(".")[0] == "webui" for n in
                     ([node.module or ""] if isinstance(node, ast.ImportFrom)
                      else [a.name for a in node.names]))]
    assert below == []
