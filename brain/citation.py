"""What a citation is: a reference to code a note speaks of, and what the brain saw of it.

A citation names a file of a registered source by its path relative to the source root,
optionally narrowed to a line range (``path:10-20``) or a symbol (``path::Class.method``).
It records the hash of the cited span as it was (``hash``), the git commit and blob of the
file where the source is a git work tree, and its state as last checked:

- ``fresh``: the span's hash is unchanged (even if it moved to other lines);
- ``changed``: the span is still there (the file, the symbol) but its text differs;
- ``gone``: the file or the symbol no longer exists.

Citations live in the note payload (``cites``), beside ``cite_keys`` (one
``<source_id>:<path>`` per cited file, payload-indexed: the path -> notes index) and
``cite_state`` (the note's state, the worst of its citations that count).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from brain.errors import InvalidArgument

FRESH, CHANGED, GONE = "fresh", "changed", "gone"
STATES = (FRESH, CHANGED, GONE)
ORIGINS = ("explicit", "detected", "hook")
MAX_CITES = 16  # citations kept on one note (explicit first, then detected, then hook)
MAX_REF_CHARS = 512
MAX_EXCERPT = 1200  # characters of a cited span kept (redacted) to show what was seen
MAX_SPAN_FILE_BYTES = 1_000_000  # a cited file larger than this is hashed whole, not parsed
# A search hit's fused score (and rerank score) is lowered by this share when its cited code
# has changed or is gone: it ranks below an equal fresh note, and is never dropped.
RANK_PENALTY = {CHANGED: 0.10, GONE: 0.20}

_REF = re.compile(r"^(?P<path>[^:]+?)(?:::(?P<symbol>[A-Za-z_$][\w$.]*)|:(?P<a>\d+)(?:-(?P<b>\d+))?)?$")


@dataclass(frozen=True, slots=True)
class Ref:
    """A citation as a caller writes it: ``path``, ``path:12``, ``path:12-30``, ``path::name``."""

    path: str
    symbol: str | None = None
    lines: tuple[int, int] | None = None

    def text(self) -> str:
        return ref_text(self.path, self.symbol, self.lines)


def ref_text(path: str, symbol: str | None, lines: Any) -> str:
    if symbol:
        return f"{path}::{symbol}"
    if lines:
        a, b = int(lines[0]), int(lines[1])
        return f"{path}:{a}" if a == b else f"{path}:{a}-{b}"
    return path


def parse_ref(value: Any) -> Ref:
    """A caller's citation string as a :class:`Ref`; InvalidArgument when it is not one."""
    if (not isinstance(value, str) or not value.strip() or len(value) > MAX_REF_CHARS
            or any(ord(ch) < 32 for ch in value)):
        raise InvalidArgument(
            f"cites: {str(value)[:80]!r} is not a citation; write path, path:LINE, "
            f"path:FIRST-LAST or path::symbol (at most {MAX_REF_CHARS} characters, no "
            "control characters)",
            field="cites")
    m = _REF.match(value.strip().strip("`"))
    if m is None:
        raise InvalidArgument(f"cites: {value[:80]!r} is not path, path:LINE, path:A-B or "
                              "path::symbol", field="cites")
    path = m["path"].strip()
    if m["a"]:
        a = int(m["a"])
        b = int(m["b"] or a)
        if a < 1 or b < a or b - a > 100_000:
            raise InvalidArgument(f"cites: {value[:80]!r} has no valid line range (1-based, "
                                  "first <= last)", field="cites")
        return Ref(path, lines=(a, b))
    return Ref(path, symbol=m["symbol"])


def key_of(source_id: str, path: str) -> str:
    """The path -> notes index key of a cited file."""
    return f"{source_id}:{path}"


def cite_text(c: dict[str, Any]) -> str:
    """A stored citation as its reference text (the range as it was given, or as it moved)."""
    return ref_text(str(c.get("path", "")), c.get("symbol"),
                    c.get("lines") if c.get("kind") == "lines" else None)


def note_state(cites: list[dict[str, Any]]) -> str:
    """A note's state: the worst state of its citations that count. Hook citations (files
    merely read or edited in the turn) count only when the note has no other citation."""
    counted = [c for c in cites if c.get("origin") != "hook"] or cites
    states = {c.get("state", FRESH) for c in counted}
    return GONE if GONE in states else CHANGED if CHANGED in states else FRESH


def summary(cites: list[dict[str, Any]]) -> dict[str, Any]:
    """The compact form a note shows of its citations: its state, how many are fresh, and
    which are changed or gone."""
    out: dict[str, Any] = {"state": note_state(cites), "fresh": 0}
    for c in cites:
        state = c.get("state", FRESH)
        if state == FRESH:
            out["fresh"] += 1
        else:
            out.setdefault(state, []).append(cite_text(c))
    return out


def penalised(value: float, state: str) -> float:
    """``value`` lowered by the state's RANK_PENALTY share (of its magnitude, so a negative
    rerank score is lowered too)."""
    return value - abs(value) * RANK_PENALTY.get(state, 0.0)
