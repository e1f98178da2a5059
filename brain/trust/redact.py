"""Secret redaction for text that is about to be stored or indexed.

``redact(text)`` replaces every secret-shaped span with ``[REDACTED:<kind>]`` and
reports which kinds it found. Patterns run in a fixed order, most specific first
(a PEM block before anything inside it, a GitHub token before the generic
``TOKEN=...`` assignment), and every later pattern skips text that is already a
marker, so a secret is counted once.

Assignments (``DB_PASSWORD='x'``, ``"api_key": "x"``, ``password: x``) keep their
key and quotes and lose only the value, so a note still reads
``DB_PASSWORD='[REDACTED:password_assignment]'``; a URL keeps its user and host
(``postgres://admin:[REDACTED:url_password]@db``). Prose such as "the password field is
required" or "token limit" is left alone: a prose value must look like a secret.

The patterns themselves live in ``brain/trust/secret_patterns.py``, the one list.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from brain.trust.secret_patterns import KINDS, NOT_SECRET, VALUE, VALUE_ANYCASE, WHOLE

__all__ = ["KINDS", "Redaction", "multiline_secret_lines", "redact", "redact_tags", "redact_tree"]

_MARKER_PREFIX = "[REDACTED:"


@dataclass(frozen=True, slots=True)
class Redaction:
    text: str
    kinds: tuple[str, ...]
    count: int


def _marker(kind: str) -> str:
    return f"{_MARKER_PREFIX}{kind}]"


def _whole_sub(kind: str, hits: list[str], keep_lines: bool) -> Callable[[re.Match[str]], str]:
    marker = _marker(kind)

    def sub(m: re.Match[str]) -> str:
        hits.append(kind)
        # A multi-line secret (a PEM block) keeps its line breaks when asked, so the line
        # numbers of an indexed file still point at the right lines.
        return marker + "\n" * m.group().count("\n") if keep_lines else marker

    return sub


def _value_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of secret values in assignments, sorted, non-overlapping."""
    lowered = text.lower()
    same_length = len(lowered) == len(text)
    haystack, patterns = (lowered, VALUE) if same_length else (text, VALUE_ANYCASE)
    found: list[tuple[int, int, int, str]] = []
    for priority, (kind, pattern, check) in enumerate(patterns):
        for m in pattern.finditer(haystack):
            start, end = m.span("value")
            value = text[start:end]
            if value[:1] in "\"'" and len(value) >= 2:
                start, end = start + 1, end - 1
            value = text[start:end].strip()
            if NOT_SECRET.fullmatch(value) or (check is not None and not check(value)):
                continue
            found.append((start, priority, end, kind))
    found.sort()
    spans: list[tuple[int, int, str]] = []
    for start, _, end, kind in found:
        if not spans or start >= spans[-1][1]:
            spans.append((start, end, kind))
    return spans


def _redact_assignments(text: str, hits: list[str]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, kind in _value_spans(text):
        out.append(text[pos:start])
        out.append(_marker(kind))
        hits.append(kind)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact(text: str, *, keep_lines: bool = False) -> Redaction:
    """Replace secret-shaped spans in ``text`` with ``[REDACTED:<kind>]`` markers.

    ``keep_lines``: a redacted multi-line secret leaves its line breaks behind (for files
    whose results cite line numbers)."""
    hits: list[str] = []
    for kind, pattern in WHOLE:
        text = pattern.sub(_whole_sub(kind, hits, keep_lines), text)
    text = _redact_assignments(text, hits)
    return Redaction(text=text, kinds=tuple(sorted(set(hits))), count=len(hits))


def redact_tags(tags: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """Each tag redacted like content (a tag that is not secret-shaped is returned as is, so
    tag filters keep working); the kinds found."""
    out: list[str] = []
    kinds: set[str] = set()
    for tag in tags:
        red = redact(tag)
        out.append(red.text)
        kinds.update(red.kinds)
    return out, tuple(sorted(kinds))


def redact_tree(value: Any, kinds: set[str] | None = None) -> Any:
    """Every string inside ``value`` (dicts, lists, nested) redacted; the kinds found are
    added to ``kinds``. For whole payloads that arrive from outside (an import)."""
    found = kinds if kinds is not None else set()
    if isinstance(value, str):
        red = redact(value)
        found.update(red.kinds)
        return red.text
    if isinstance(value, dict):
        return {k: redact_tree(v, found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v, found) for v in value]
    return value


def multiline_secret_lines(text: str) -> set[int]:
    """1-based numbers of the lines a multi-line secret (a PEM private-key block) covers.

    A grep hit is one line: a line in the middle of a key block has no marker of its own,
    so the caller asks which lines of the file lie inside one."""
    lines: set[int] = set()
    for kind, pattern in WHOLE:
        if kind != "private_key":
            continue
        for m in pattern.finditer(text):
            first = text.count("\n", 0, m.start()) + 1
            lines.update(range(first, first + m.group().count("\n") + 1))
    return lines
