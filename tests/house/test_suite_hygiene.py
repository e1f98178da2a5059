"""The suite passes on a loaded machine (issue 49): no test bounds the wall clock tightly.

A comparison is flagged when one side is a wall-clock duration and the other a bound below
``HANG_FLOOR_S``:

- a difference with a clock call on its left (``time.monotonic() - t0``), or a name bound to
  one, or a name unpacked from a local helper that returns one (``out, took, code = run()``);
- a deadline: a name bound to ``clock() + budget``, compared with a clock call, flags the
  budget;
- a timing figure a test reads from a result (a key ending in ``_ms`` or ``_s``, such as
  ``out["p50_ms"]`` or ``stats["elapsed_s"]``): below the floor, or against another figure
  (a timing ratio).

Only upper bounds are flagged (a load can only make things slower, so ``took >= 0.35`` holds
on any box). The bound is read from literals, module constants (``tests/timing.py`` and
other test modules included), parameter defaults and ``float(os.environ.get(k, "2.0"))``;
a bound it cannot read is not flagged. CPU time (``tests/timing.CpuClock``,
``time.process_time``) is not a wall clock and is the way to bound work.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.timing import HANG_FLOOR_S

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}

# True hang guards whose bound sits below the floor on purpose, with why. Keyed by
# "path:line text" so a moved line still matches and an edited one has to be looked at again.
ALLOWED: dict[str, str] = {}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    text: str
    bound: float

    def key(self) -> str:
        return f"{self.path}:{self.text}"


# ---------------------------------------------------------------- what is a number


class Constants:
    """Numeric values of module-level names, read across test modules on demand."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._modules: dict[str, dict[str, ast.expr]] = {}

    def module(self, dotted: str) -> dict[str, ast.expr]:
        if dotted not in self._modules:
            self._modules[dotted] = {}
            parts = dotted.split(".")
            if parts[0] == "tests":
                path = self.root.joinpath(*parts[1:]).with_suffix(".py")
                if path.is_file():
                    self._modules[dotted] = module_assignments(ast.parse(path.read_text()))
        return self._modules[dotted]


def module_assignments(tree: ast.Module) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            out[node.target.id] = node.value
    return out


@dataclass
class Scope:
    """What a name means where a comparison sits: module constants, imported names,
    module aliases, and the enclosing function's parameter defaults."""

    constants: Constants
    own: dict[str, ast.expr]
    imported: dict[str, tuple[str, str]]  # local name -> (module, name)
    aliases: dict[str, str]  # local name -> module
    defaults: dict[str, ast.expr]

    def value(self, node: ast.expr, depth: int = 0) -> float | str | None:
        if depth > 20:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return node.value if not isinstance(node.value, bool) else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.value(node.operand, depth + 1)
            return -inner if isinstance(inner, int | float) else None
        if isinstance(node, ast.BinOp):
            left, right = self.value(node.left, depth + 1), self.value(node.right, depth + 1)
            if not isinstance(left, int | float) or not isinstance(right, int | float):
                return None
            ops = {ast.Add: float.__add__, ast.Sub: float.__sub__, ast.Mult: float.__mul__,
                   ast.Div: float.__truediv__}
            op = ops.get(type(node.op))
            return op(float(left), float(right)) if op else None
        if isinstance(node, ast.Name):
            return self.name(node.id, depth)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = self.aliases.get(node.value.id)
            if module and (expr := self.constants.module(module).get(node.attr)) is not None:
                return self._in(module).value(expr, depth + 1)
            return None
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        return None

    def name(self, name: str, depth: int) -> float | str | None:
        if name in self.defaults:
            return self.value(self.defaults[name], depth + 1)
        if name in self.own:
            return self.value(self.own[name], depth + 1)
        if name in self.imported:
            module, attr = self.imported[name]
            if (expr := self.constants.module(module).get(attr)) is not None:
                return self._in(module).value(expr, depth + 1)
        return None

    def call(self, node: ast.Call, depth: int) -> float | str | None:
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id in ("float", "int", "str") and len(node.args) == 1:
            inner = self.value(node.args[0], depth + 1)
            if inner is None:
                return None
            try:
                return {"float": float, "int": int, "str": str}[fn.id](inner)
            except ValueError:
                return None
        # os.environ.get("NAME", default): the default is what a plain run compares with.
        if (isinstance(fn, ast.Attribute) and fn.attr == "get" and len(node.args) == 2
                and ast.unparse(fn.value) == "os.environ"):
            return self.value(node.args[1], depth + 1)
        return None

    def _in(self, module: str) -> Scope:
        return Scope(self.constants, self.constants.module(module), {}, {}, {})


# ---------------------------------------------------------------- what is a clock


def is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or node.args:
        return False
    fn = node.func
    if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name):
        return fn.value.id == "time" and fn.attr in CLOCKS
    return False


def has_clock_call(node: ast.AST) -> bool:
    return any(is_clock_call(n) for n in ast.walk(node))


def is_elapsed(node: ast.expr) -> bool:
    """``clock() - start`` (the clock on the left: the time since something)."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)
            and has_clock_call(node.left))


def deadline_budget(node: ast.expr) -> ast.expr | None:
    """``clock() + budget`` -> budget."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        if is_clock_call(node.left):
            return node.right
        if is_clock_call(node.right):
            return node.left
    return None


def returned_elapsed(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int | None]:
    """Positions of a helper's return tuple that hold an elapsed time (None: the whole)."""
    out: set[int | None] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and node.value is not None:
            if isinstance(node.value, ast.Tuple):
                out |= {i for i, e in enumerate(node.value.elts) if is_elapsed(e)}
            elif is_elapsed(node.value):
                out.add(None)
    return out


def called_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Await):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


# ---------------------------------------------------------------- the scan


def functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def defaults_of(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    args = fn.args
    positional = args.posonlyargs + args.args
    out = {a.arg: d for a, d in zip(positional[::-1], args.defaults[::-1], strict=False)}
    out |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d}
    return out


def imports_of(tree: ast.Module) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    imported: dict[str, tuple[str, str]] = {}
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                imported[a.asname or a.name] = (node.module, a.name)
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
    return imported, aliases


def scan(path: Path, constants: Constants, rel: str) -> list[Finding]:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()
    own = module_assignments(tree)
    imported, aliases = imports_of(tree)
    helpers = {fn.name: pos for fn in functions(tree) if (pos := returned_elapsed(fn))}
    findings: list[Finding] = []
    for fn in functions(tree):
        scope = Scope(constants, own, imported, aliases, defaults_of(fn))
        elapsed, deadlines = _names(fn, helpers)
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare):
                for bound, unit in _bounds(node, elapsed, deadlines):
                    value = 0.0 if is_ratio(bound) else scope.value(bound)
                    if isinstance(value, int | float) and value * unit < HANG_FLOOR_S:
                        text = lines[node.lineno - 1].strip()
                        findings.append(Finding(rel, node.lineno, text, value * unit))
    return sorted(set(findings), key=lambda f: f.line)


def _names(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, helpers: dict[str, set[int | None]]
) -> tuple[set[str], dict[str, ast.expr]]:
    elapsed: set[str] = set()
    deadlines: dict[str, ast.expr] = {}
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name):
            if is_elapsed(value) or None in helpers.get(called_name(value) or "", set()):
                elapsed.add(target.id)
            elif (budget := deadline_budget(value)) is not None:
                deadlines[target.id] = budget
        elif isinstance(target, ast.Tuple) and (name := called_name(value)) in helpers:
            for i, elt in enumerate(target.elts):
                if i in helpers[name] and isinstance(elt, ast.Name):
                    elapsed.add(elt.id)
    return elapsed, deadlines


def figure_scale(node: ast.expr) -> float | None:
    """Seconds per unit of a timing figure read from a result (``x["p50_ms"]``: 1/1000)."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Constant):
        return None
    key = node.slice.value
    if not isinstance(key, str):
        return None
    if key.endswith("_ms") or "_ms_" in key:
        return 1 / 1000
    return 1.0 if key.endswith("_s") else None


def _bounds(
    node: ast.Compare, elapsed: set[str], deadlines: dict[str, ast.expr]
) -> list[tuple[ast.expr, float]]:
    """The bounds a comparison puts from above on a wall-clock duration or a timing figure,
    each with the seconds per unit of what it bounds."""

    def scale(e: ast.expr) -> float | None:
        if is_elapsed(e) or (isinstance(e, ast.Name) and e.id in elapsed):
            return 1.0
        return figure_scale(e)

    out: list[tuple[ast.expr, float]] = []
    sides = [node.left, *node.comparators]
    for op, left, right in zip(node.ops, sides[:-1], sides[1:], strict=True):
        if isinstance(op, ast.Lt | ast.LtE) and (unit := scale(left)) is not None:
            out.append((right, unit))
        elif isinstance(op, ast.Gt | ast.GtE) and (unit := scale(right)) is not None:
            out.append((left, unit))
        for a, b in ((left, right), (right, left)):
            if is_clock_call(a) and isinstance(b, ast.Name) and b.id in deadlines:
                out.append((deadlines[b.id], 1.0))
    return out


def is_ratio(bound: ast.expr) -> bool:
    """A bound made of another timing figure: the comparison is a timing ratio."""
    return any(figure_scale(n) is not None or is_clock_call(n) for n in ast.walk(bound)
               if isinstance(n, ast.expr))


def findings_in(root: Path) -> list[Finding]:
    constants = Constants(root)
    out: list[Finding] = []
    for path in sorted(root.rglob("*.py")):
        if "fixtures" in path.relative_to(root).parts:
            continue
        out += scan(path, constants, path.relative_to(root).as_posix())
    return out


# ---------------------------------------------------------------- the tests


def test_no_test_bounds_the_wall_clock_below_a_hang() -> None:
    everything = findings_in(TESTS)
    found = [f for f in everything if f.key() not in ALLOWED]
    shown = "\n".join(f"{f.path}:{f.line}: {f.text}  (bound {f.bound:g} s)" for f in found)
    assert not found, (
        f"wall-clock bounds below {HANG_FLOOR_S:g} s fail on a loaded machine; count the "
        "work, bound CPU time (tests/timing.CpuClock) or use tests/timing.HANG_S:\n" + shown
    )
    stale = set(ALLOWED) - {f.key() for f in everything}
    assert not stale, f"allowed hang guards no longer in tests/ (drop them): {stale}"


PLANTED = '''
import os
import time
from tests.timing import HANG_S

LIMIT = 2.0
SLOW = float(os.environ.get("SLOW_S", "3.0"))


def run(cmd, timeout=20):
    t0 = time.monotonic()
    return cmd, time.monotonic() - t0, 0


async def timed(call):
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


def test_planted(budget=5):
    t0 = time.monotonic()
    assert time.monotonic() - t0 < 2.0                    # 1 flagged: a literal
    took = time.perf_counter() - t0
    assert took < LIMIT                                   # 2 flagged: a module constant
    assert 0 < took <= LIMIT * 2                          # 3 flagged: a chain
    assert SLOW > took                                    # 4 flagged: env default, reversed
    out, spent, code = run("x")
    assert spent < 3                                      # 5 flagged: through a helper
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:                    # 6 flagged: a parameter default
        pass
    assert time.monotonic() - t0 < HANG_S                 # a hang guard: fine
    assert took >= 0.35                                   # a lower bound: fine
    assert time.process_time() - t0 < 0.5                 # CPU time: fine
    assert out is not None and code < 3                   # not a duration: fine
    stats = {"p50_ms": 3.0, "elapsed_s": 1.0, "sync_ms": 9.0}
    assert stats["p50_ms"] < 500                          # 6a flagged: a figure in ms
    assert stats["elapsed_s"] <= max(0.05 * stats["elapsed_s"], 0.25)  # 6b flagged: a ratio
    assert stats["sync_ms"] > 0 and stats["p50_ms"] < 60_000  # a presence, a hang: fine


async def test_planted_async():
    took = await timed(lambda: None)
    assert took < 1.5                                     # 7 flagged: an awaited helper
'''


def test_the_scan_catches_a_planted_example(tmp_path: Path) -> None:
    planted = tmp_path / "test_planted.py"
    planted.write_text(PLANTED)
    found = scan(planted, Constants(TESTS), "test_planted.py")
    flagged = [f.text.split("# ")[1] for f in found]
    assert flagged == [
        "1 flagged: a literal",
        "2 flagged: a module constant",
        "3 flagged: a chain",
        "4 flagged: env default, reversed",
        "5 flagged: through a helper",
        "6 flagged: a parameter default",
        "6a flagged: a figure in ms",
        "6b flagged: a ratio",
        "7 flagged: an awaited helper",
    ], flagged
    assert [f.bound for f in found] == [2.0, 2.0, 4.0, 3.0, 3.0, 5.0, 0.5, 0.0, 1.5]
