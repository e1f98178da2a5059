"""The order of grep hits: vendored, generated or minified files last; before them, the file
that defines a symbol before the files that use it, product code before tests, a whole-word
match before a part of a longer name.

An engine reports hits in the order it walks the tree (ripgrep's threads: no order at all),
and the caller shows the first few: without ranking, ``bench/`` files came before the file
that defines the symbol. Ranking reads only the hit line and its path (no file is opened),
so it costs microseconds a hit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

# Path parts that mark code nobody here wrote or edits by hand.
_VENDORED = re.compile(
    r"(^|/)(node_modules|vendor|vendored|third_party|third-party|site-packages|dist|build|"
    r"target|\.venv|venv|__pycache__|\.git)(/|$)"
    r"|\.min\.(js|css)$|\.bundle\.js$|\.map$|_pb2(_grpc)?\.py$|\.pb\.go$|\.generated\.\w+$"
    r"|(^|/)(package-lock\.json|yarn\.lock|pnpm-lock\.yaml|poetry\.lock|Cargo\.lock|go\.sum)$"
)
_TESTS = re.compile(r"(^|/)(tests?|spec|__tests__|testdata|fixtures)(/|$)|(^|/)test_[^/]*$"
                    r"|_test\.(py|go)$|\.(test|spec)\.[jt]sx?$")
_WORDISH = re.compile(r"[A-Za-z_$][\w$]*")
# A line that defines ``{name}``: Python, JS/TS, Go, Rust, Java/C#/Kotlin/Swift, Ruby, shell,
# C-family macros, and a top-level assignment or constant in any of them.
_DEFINES = (
    r"^\s*(?:async\s+)?def\s+{name}\b",
    r"^\s*(?:export\s+)?(?:default\s+)?(?:abstract\s+)?(?:data\s+|sealed\s+)?"
    r"(?:class|interface|enum|struct|trait|record|object|protocol|module|type|union)\s+{name}\b",
    r"^\s*(?:export\s+)?(?:async\s+)?function\*?\s+{name}\b",
    r"^\s*(?:export\s+)?(?:const|let|var|static|final)\s+(?:mut\s+)?{name}\b",
    r"^\s*func\s+(?:\([^)]*\)\s*)?{name}\b",
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+{name}\b",
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|type|mod|const|static)\s+{name}\b",
    r"^\s*#\s*define\s+{name}\b",
    r"^\s*{name}\s*(?::[^=]*)?=(?!=)",
    r"^\s*(?:def\s+self\.|function\s+){name}\b",
)


class Hit(Protocol):
    @property
    def path(self) -> str: ...

    @property
    def line(self) -> int: ...

    @property
    def text(self) -> str: ...


def path_class(path: str) -> int:
    """0 product code, 1 tests and fixtures, 2 vendored, generated or minified."""
    if _VENDORED.search(path):
        return 2
    return 1 if _TESTS.search(path) else 0


def symbol_of(pattern: str, fixed: bool) -> str | None:
    """The identifier a grep asks for, when it asks for one (``Foo``, ``foo_bar``; a regex
    whose text is a plain name counts too), else None."""
    text = pattern if fixed else pattern.replace("\\b", "")
    return text if _WORDISH.fullmatch(text) else None


class Ranker:
    """Scores hits for one query; lower keys first."""

    def __init__(self, pattern: str, *, fixed: bool, case_insensitive: bool) -> None:
        self.symbol = symbol_of(pattern, fixed)
        flags = re.IGNORECASE if case_insensitive else 0
        name = re.escape(self.symbol) if self.symbol else ""
        self._defines = (
            re.compile("|".join(f"(?:{d.format(name=name)})" for d in _DEFINES), flags)
            if self.symbol else None
        )
        self._word = re.compile(rf"(?<![\w$]){name}(?![\w$])") if self.symbol else None

    def key(self, hit: Hit) -> tuple[int, int, int, int, int, str, int]:
        """Vendored last whatever it holds; then definitions, product before tests, whole
        words before parts of names, shallow paths first."""
        text = hit.text
        defines = bool(self._defines and self._defines.search(text))
        whole = bool(self._word and self._word.search(text)) if self.symbol else True
        cls = path_class(hit.path)
        return (
            1 if cls == 2 else 0,
            0 if defines else 1,
            cls,
            0 if whole else 1,
            hit.path.count("/"),
            hit.path,
            hit.line,
        )


H = TypeVar("H", bound=Hit)


def rank(hits: Sequence[H], pattern: str, *, fixed: bool, case_insensitive: bool) -> list[H]:
    """``hits`` best first (see the module docstring); a stable, total order."""
    ranker = Ranker(pattern, fixed=fixed, case_insensitive=case_insensitive)
    return sorted(hits, key=ranker.key)
