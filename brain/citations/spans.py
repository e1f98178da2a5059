"""Where a citation's span is in a file's text, and its hash.

- A whole file: every line.
- A line range: the same lines; when their text is no longer there, the first window of
  the same height whose hash matches (the lines moved) is taken instead.
- A symbol: Python through ``ast`` (functions, classes, methods as ``Class.method``, and
  module-level assignments); other languages through the small named set of patterns in
  :data:`PATTERNS`, the span running to the matching closing brace (or, for languages
  without braces, to the end of the indented block).

Hashes are over the span's lines with trailing whitespace dropped and blank lines at either
end trimmed, so re-indenting the file's tail or an editor's trailing spaces do not count as
a change, while any change inside the span does.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass

# Language -> (file suffixes, patterns; "{name}" is the symbol's escaped name).
PATTERNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "javascript/typescript": (
        (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"),
        (r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*{name}\s*[(<]",
         r"^\s*(?:export\s+)?(?:default\s+)?(?:abstract\s+)?class\s+{name}\b",
         r"^\s*(?:export\s+)?(?:declare\s+)?(?:interface|type|enum)\s+{name}\b",
         r"^\s*(?:export\s+)?(?:const|let|var)\s+{name}\s*[:=]",
         r"^\s*(?:(?:public|private|protected|static|async|readonly|override|get|set)\s+)*"
         r"{name}\s*(?:<[^>]*>)?\s*\([^;]*$"),
    ),
    "go": (
        (".go",),
        (r"^func\s+(?:\([^)]*\)\s*)?{name}\s*[\[(]", r"^type\s+{name}\b",
         r"^(?:var|const)\s+{name}\b"),
    ),
    "rust": (
        (".rs",),
        (r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?(?:const\s+)?(?:extern\s+\S+\s+)?"
         r"fn\s+{name}\b",
         r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|type|mod|union)\s+{name}\b",
         r"^\s*impl(?:<[^>]*>)?\s+(?:[\w:<>, ]+\s+for\s+)?{name}\b"),
    ),
    "java/kotlin/c#/scala": (
        (".java", ".kt", ".kts", ".cs", ".scala"),
        (r"^\s*(?:[\w@]+\s+)*(?:class|interface|enum|record|object|trait)\s+{name}\b",
         r"^\s*(?:[\w<>\[\],.?@]+\s+)*(?:fun\s+|def\s+)?{name}\s*(?:<[^>]*>)?\s*\("),
    ),
    "c/c++": (
        (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh"),
        (r"^\s*(?:typedef\s+)?(?:struct|class|enum|union|namespace)\s+{name}\b",
         r"^[A-Za-z_][\w\s\*&:<>,]*?\b{name}\s*\([^;]*$"),
    ),
    "ruby": (
        (".rb",),
        (r"^\s*def\s+(?:self\.)?{name}\b", r"^\s*(?:class|module)\s+{name}\b"),
    ),
    "shell": (
        (".sh", ".bash", ".zsh"),
        (r"^\s*(?:function\s+)?{name}\s*(?:\(\s*\))?\s*\{",),
    ),
}
_BRACELESS = {"ruby"}
_MAX_SCAN_LINES = 20_000  # a brace search never reads further than this from its start


@dataclass(frozen=True, slots=True)
class Span:
    lines: tuple[int, int]  # 1-based, inclusive
    hash: str
    text: str


def norm(text: str) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines()]


def digest(lines: list[str]) -> str:
    a, b = 0, len(lines)
    while a < b and not lines[a]:
        a += 1
    while b > a and not lines[b - 1]:
        b -= 1
    return hashlib.sha256("\n".join(lines[a:b]).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _span(lines: list[str], a: int, b: int) -> Span:
    """Lines a..b (1-based, inclusive) of ``lines``."""
    part = lines[a - 1 : b]
    return Span((a, b), digest(part), "\n".join(part))


def whole(lines: list[str]) -> Span:
    return _span(lines, 1, len(lines)) if lines else Span((1, 1), digest([]), "")


def line_range(lines: list[str], first: int, last: int, old_hash: str | None = None) -> Span | None:
    """The cited range; when its text changed and the old text is elsewhere (the lines
    moved), that window. None when the range lies wholly past the end of the file."""
    if first > len(lines):
        moved = _find_window(lines, last - first + 1, old_hash) if old_hash else None
        return moved
    here = _span(lines, first, min(last, len(lines)))
    if old_hash is None or here.hash == old_hash:
        return here
    return _find_window(lines, last - first + 1, old_hash) or here


def _find_window(lines: list[str], height: int, want: str | None) -> Span | None:
    if want is None or height < 1 or height > len(lines):
        return None
    for a in range(1, len(lines) - height + 2):
        if lines[a - 1] and digest(lines[a - 1 : a - 1 + height]) == want:
            return _span(lines, a, a + height - 1)
    return None


def language_of(path: str) -> str | None:
    lower = path.lower()
    if lower.endswith((".py", ".pyi")):
        return "python"
    for lang, (suffixes, _) in PATTERNS.items():
        if lower.endswith(suffixes):
            return lang
    return None


def symbol(text: str, lines: list[str], path: str, name: str,
           index: dict[str, tuple[int, int]] | None = None) -> Span | None:
    """The span of ``name`` (dotted for a member: ``Class.method``) in the file, or None.
    ``index``: the file's :func:`python_index`, when the caller has it (one parse a file)."""
    lang = language_of(path)
    if lang == "python":
        idx = index if index is not None else python_index(text)
        if idx or not _unparsable(text):
            found = idx.get(name)
            return _span(lines, *found) if found else None
        lang = "python-fallback"
    bounds: tuple[int, int] | None = (1, len(lines))
    for part in name.split("."):
        assert bounds is not None
        bounds = _pattern(lines, lang, part, bounds)
        if bounds is None:
            return None
    return _span(lines, *bounds) if bounds else None


def _unparsable(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return True
    return False


def python_index(text: str) -> dict[str, tuple[int, int]]:
    """Every function, class, method and module-level assignment of a Python file: its
    dotted name (``Class.method``) and its bare name -> its lines. Breadth first, so a
    top-level name wins over a nested one of that name. Empty when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    out: dict[str, tuple[int, int]] = {}
    queue: list[tuple[str, ast.AST]] = [("", tree)]
    while queue:
        prefix, node = queue.pop(0)
        for child in ast.iter_child_nodes(node):
            qual = _py_name(child)
            if qual is None:
                continue
            full = f"{prefix}{qual}"
            decorators = getattr(child, "decorator_list", [])
            first = int(getattr(child, "lineno", 1))
            start = min([first, *(d.lineno for d in decorators)])
            span = (start, int(getattr(child, "end_lineno", None) or first))
            out.setdefault(full, span)
            out.setdefault(qual, span)
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                queue.append((f"{full}.", child))
    return out


def _py_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _pattern(lines: list[str], lang: str | None, name: str,
             bounds: tuple[int, int]) -> tuple[int, int] | None:
    if lang == "python-fallback":
        pats: tuple[str, ...] = (r"^\s*(?:async\s+)?def\s+{name}\b", r"^\s*class\s+{name}\b")
    elif lang is None:
        return None
    else:
        pats = PATTERNS[lang][1]
    regexes = [re.compile(p.replace("{name}", re.escape(name))) for p in pats]
    for i in range(bounds[0] - 1, bounds[1]):
        line = lines[i]
        if name not in line:
            continue
        if any(rx.search(line) for rx in regexes):
            if lang in _BRACELESS or lang == "python-fallback":
                end = _indented_end(lines, i, bounds[1], keep_end=lang in _BRACELESS)
            else:
                end = _brace_end(lines, i, bounds[1])
            return i + 1, end
    return None


def _indented_end(lines: list[str], start: int, limit: int, keep_end: bool) -> int:
    """The last line of the block opened at ``start`` (0-based): the line before the next
    non-blank line indented no deeper; that line too when it closes the block (``end``)."""
    indent = len(lines[start]) - len(lines[start].lstrip())
    last = start
    for j in range(start + 1, limit):
        line = lines[j]
        if not line.strip():
            continue
        if len(line) - len(line.lstrip()) <= indent:
            return j + 1 if keep_end and line.strip().startswith("end") else last + 1
        last = j
    return last + 1


def _brace_end(lines: list[str], start: int, limit: int) -> int:
    """The line (1-based) of the brace closing the block opened on or after ``start``
    (0-based); the declaration's own line when a ``;`` ends it first (no body)."""
    depth, opened = 0, False
    quote: str | None = None
    block_comment = False
    for j in range(start, min(limit, start + _MAX_SCAN_LINES)):
        line = lines[j]
        k = 0
        while k < len(line):
            ch = line[k]
            if block_comment:
                if line.startswith("*/", k):
                    block_comment, k = False, k + 2
                    continue
            elif quote is not None:
                if ch == "\\":
                    k += 2
                    continue
                if ch == quote:
                    quote = None
            elif line.startswith("//", k):
                break
            elif line.startswith("/*", k):
                block_comment, k = True, k + 2
                continue
            elif ch in "\"'`":
                quote = ch
            elif ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:
                    return j + 1
            elif ch == ";" and not opened:
                return j + 1
            k += 1
        if quote in ("\"", "'"):
            quote = None  # an unclosed one-line string: do not let it swallow the file
        if not opened and j - start >= 3:
            return start + 1  # no body within a few lines: the declaration alone
    return start + 1 if not opened else min(limit, start + _MAX_SCAN_LINES)
