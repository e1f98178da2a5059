"""Citations written in a note's own text: ``path``, ``path:LINE``, ``path:A-B`` and
``path::symbol`` forms. Only candidates are found here; the service keeps those naming a
file that exists in a source the caller may see.

A candidate is a relative path with a file suffix (``brain/app.py``, ``worker.go``), not
part of a URL or an e-mail address, optionally followed by a line, a range or a symbol.
"""

from __future__ import annotations

import re

from brain.citation import MAX_CITES, Ref, parse_ref
from brain.errors import InvalidArgument

MAX_SCAN_CHARS = 200_000  # a note's text read for citations (notes are capped lower anyway)
_CANDIDATE = re.compile(
    r"(?<![\w/.:@-])"  # not the tail of a URL, an e-mail or a longer path
    r"((?:\.{0,2}/)?(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7})"
    r"(::[A-Za-z_$][\w$.]*[\w$]|:\d+(?:-\d+)?)?"
    r"(?![\w/]|://)"
)
_NOT_FILES = frozenset({"e.g", "i.e", "etc", "vs"})


def candidates(text: str) -> list[Ref]:
    """The distinct citation candidates of ``text``, in order, at most MAX_CITES * 2."""
    out: list[Ref] = []
    seen: set[Ref] = set()
    for m in _CANDIDATE.finditer(text[:MAX_SCAN_CHARS]):
        path, tail = m.group(1), m.group(2) or ""
        if path.lower() in _NOT_FILES or path[0].isdigit() and "/" not in path:
            continue  # "1.5", "e.g": not files
        try:
            ref = parse_ref(path + tail)
        except InvalidArgument:
            continue
        if ref not in seen:
            seen.add(ref)
            out.append(ref)
            if len(out) >= 2 * MAX_CITES:
                break
    return out
