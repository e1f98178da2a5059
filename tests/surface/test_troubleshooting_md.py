"""docs/troubleshooting.md lists every error code a user can meet, and only those.

The codes are read from the product's source, not from a list kept beside it: every ``code``
an exception class sets (brain/errors.py's tree and the classes beside it), the code of every
``CodedToolError(...)`` / ``ToolCallError(...)`` raised with a literal one, and every
``{"error": "CODE"}`` an HTTP endpoint answers. A new code with no row here fails.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import brain.errors as errors

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "troubleshooting.md"
PRODUCT = [*sorted((ROOT / "brain").rglob("*.py")), *sorted((ROOT / "mcp_surface").rglob("*.py")),
           *sorted((ROOT / "webui").rglob("*.py")), ROOT / "mcp_server.py", ROOT / "config.py"]
CODE = re.compile(r"^[A-Z][A-Z0-9_]{3,}$")
CODED_CALLS = {"CodedToolError", "ToolCallError"}


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and CODE.match(n.value)]


def raised_codes(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(
                    stmt, "target", None)
                value = getattr(stmt, "value", None)
                if isinstance(target, ast.Name) and target.id == "code" and value is not None:
                    found.update(_strings(value))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in CODED_CALLS and node.args:
                found.update(_strings(node.args[0]))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (isinstance(key, ast.Constant) and key.value == "error"
                        and isinstance(value, ast.Constant) and isinstance(value.value, str)
                        and CODE.match(value.value)):
                    found.add(value.value)
    return found


def product_codes() -> set[str]:
    return set().union(*(raised_codes(p) for p in PRODUCT))


def documented_codes() -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", text, re.M)
    return set(rows)


def test_every_code_of_brain_errors_is_found_in_the_source() -> None:
    """The scan sees the whole typed tree (a scan that missed it would check nothing)."""
    tree = {cls.code for cls in _subclasses(errors.BrainError)} | {errors.BrainError.code}
    assert tree <= product_codes(), tree - product_codes()
    assert {"TOOL_NOT_IN_PROFILE", "OWNER_UNAVAILABLE", "NO_UI", "START_FAILED"} <= \
        product_codes()


def _subclasses(cls: type) -> set[type]:
    out = set(cls.__subclasses__())
    for sub in list(out):
        out |= _subclasses(sub)
    return out


def test_troubleshooting_lists_every_code_a_user_can_meet() -> None:
    missing = product_codes() - documented_codes()
    assert not missing, f"docs/troubleshooting.md has no row for: {sorted(missing)}"


def test_every_code_troubleshooting_lists_exists() -> None:
    stray = documented_codes() - product_codes()
    assert not stray, f"docs/troubleshooting.md lists codes nothing raises: {sorted(stray)}"
    cited = set(re.findall(r"\[([A-Z][A-Z0-9_]{3,})\](?!\()", DOC.read_text("utf-8")))
    cited.discard("CODE")  # the shape itself: `[CODE] message`
    assert cited <= product_codes(), cited - product_codes()


def test_the_code_scan_can_fail(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text('class E(Exception):\n    code = "AB_CD"\n'
                   'raise CodedToolError("CD_EF", "m")\n'
                   'answer = {"error": "EF_GH", "message": "m"}\n'
                   'other = {"error": "not a code"}\n')
    assert raised_codes(src) == {"AB_CD", "CD_EF", "EF_GH"}
