"""gitignore-style patterns matched in time linear in the pattern, never exponential.

pathspec turns ``*a*a*a*b`` into ``[^/]*a[^/]*a[^/]*a[^/]*b``, which Python's ``re``
backtracks through in time exponential in the number of stars: one such glob against a
40-character file name held the server for minutes, and ``re`` cannot be interrupted
(issue 50). Every pattern a caller or a config gives (fs_search's ``path_glob``, a source's
exclude/include, the ``.gitignore`` files of a source, the built-in excludes) is compiled
here instead, to a regular expression that cannot backtrack more than once per position:

- inside one path segment, the text between two stars is found at its leftmost place and
  kept there (an atomic group, ``(?>[^/]*?abc)``): with stars on both sides, the leftmost
  place leaves the most room for the rest, so nothing is lost by never trying another;
  the last piece is tried from the right, once, and must end where the segment ends;
- across segments, ``**`` between two blocks of segments finds the next block at its
  leftmost component (the same argument, one level up); only the block after the last
  ``**`` is tried at each component, rightmost first, as pathspec does, so the directory
  marker (``ps_d``) that GitIgnoreSpec's priority reads is set exactly as before.

The cost of matching one path is then bounded by (path length) x (pattern length), at most
4,096 x 1,000 (``brain.trust.limits``), and in practice micro-seconds. Everything else is
pathspec's own: the normalisation of segments below is pathspec 1.x's GitIgnoreSpecPattern
(negation, anchoring, directory-only patterns, ``**``), and GitIgnoreSpec still decides which
pattern wins. One difference on purpose: a bracket expression never matches ``/``, as in git
(pathspec's ``[!a]`` did).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

import pathspec
from pathspec.patterns.gitignore.base import GitIgnorePatternError
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

log = logging.getLogger(__name__)

_DIR_MARK_CG = "(?P<ps_d>/)"
_DIR_MARK_OPT = f"(?:{_DIR_MARK_CG}|$)"
_STAR = object()  # a run of stars inside a segment


class _RangeError(GitIgnorePatternError):
    """An unterminated ``[``: git discards such a pattern, and so do we."""


def _segment_atoms(seg: str) -> list[object]:
    """The segment as single-character regexes and ``_STAR`` marks (runs folded)."""
    atoms: list[object] = []
    i, end = 0, len(seg)
    while i < end:
        char = seg[i]
        i += 1
        if char == "\\":
            if i >= end:
                raise GitIgnorePatternError(
                    f"Escape character found with no next character to escape: {seg!r}"
                )
            atoms.append(re.escape(seg[i]))
            i += 1
        elif char == "*":
            if not atoms or atoms[-1] is not _STAR:
                atoms.append(_STAR)
        elif char == "?":
            atoms.append("[^/]")
        elif char == "[":
            j = i
            if j < end and seg[j] in "!^":
                j += 1
            if j < end and seg[j] == "]":
                j += 1
            while j < end and seg[j] != "]":
                j += 1
            if j >= end:
                raise _RangeError(f"Invalid range notation in pattern {seg!r}")
            j += 1
            expr = "["
            if seg[i] in "!^":
                expr += "^"
                i += 1
            expr += seg[i:j].replace("\\", "\\\\")
            atoms.append(f"(?!/){expr}")  # one character, never the separator
            i = j
        else:
            atoms.append(re.escape(char))
    return atoms


def _segment(seg: str) -> str:
    """One path segment (no ``/``, not ``**``) as a regex with at most one way to match."""
    if seg == "*":
        return "[^/]+"
    atoms = _segment_atoms(seg)
    if _STAR not in atoms:
        # fixed width: nothing to backtrack; the end of the segment is checked here, inside
        # any atomic group the segment sits in, not left to what follows
        return "".join(str(a) for a in atoms) + "(?![^/])"
    pieces: list[str] = [""]
    for atom in atoms:
        if atom is _STAR:
            pieces.append("")
        else:
            pieces[-1] += str(atom)
    first, middle, last = pieces[0], pieces[1:-1], pieces[-1]
    body = first + "".join(f"(?>[^/]*?{p})" for p in middle if p) + "[^/]*" + last
    return f"(?>{body}(?![^/]))"


def _normalize(is_dir_pattern: bool, segs: list[str]) -> tuple[list[str] | None, str | None]:
    """pathspec's GitIgnoreSpecPattern normalisation: the segments, or a whole regex."""
    if not segs[0]:
        del segs[0]  # a leading slash anchors the pattern to the root
    elif (len(segs) == 1 or (len(segs) == 2 and not segs[1])) and segs[0] != "**":
        segs.insert(0, "**")  # a bare name matches at any depth
    if not segs:
        raise GitIgnorePatternError("Pattern normalized to nothing.")
    if not segs[-1]:
        segs[-1] = "**"  # a trailing slash: everything inside
    for i in range(len(segs) - 1, 0, -1):
        if segs[i - 1] == "**" and segs[i] == "**":
            del segs[i]
    if len(segs) == 1 and segs[0] == "**":
        return None, _DIR_MARK_CG if is_dir_pattern else "."
    if len(segs) == 2 and segs == ["**", "*"]:
        return None, "."
    if len(segs) == 3 and segs == ["**", "*", "**"]:
        return None, _DIR_MARK_CG if is_dir_pattern else "/"
    return segs, None


def _translate(is_dir_pattern: bool, segs: list[str]) -> str:
    """Segments to a regex; a ``**`` followed by a later ``**`` opens an atomic,
    leftmost search for the block between them (see the module's docstring)."""
    out: list[str] = []
    need_slash = False
    open_group = False
    end = len(segs) - 1
    for i, seg in enumerate(segs):
        if seg == "**":
            if open_group:
                out.append(")")
                open_group = False
            later = "**" in segs[i + 1 :]
            if i == 0:
                out.append("^(?>(?:[^/]+/)*?" if later else "^(?:.+/)?")
                open_group = later
            elif i < end:
                out.append("(?>(?:/[^/]+)*?" if later else "(?:/.+)?")
                open_group = later
                need_slash = True
            else:
                out.append(_DIR_MARK_CG if is_dir_pattern else "/")
        else:
            if i == 0:
                out.append("^")
            if need_slash:
                out.append("/")
            out.append(_segment(seg))
            if i == end:
                out.append(_DIR_MARK_OPT)
            need_slash = True
    if open_group:  # unreachable: a group opens only when a later ** closes it
        out.append(")")
    return "".join(out)


def pattern_to_regex(pattern: str) -> tuple[str | None, bool | None]:
    """(regex, include) of one gitignore line; (None, None) for a no-op line.
    Raises GitIgnorePatternError (a ValueError) for a pattern git would reject."""
    text = pattern if pattern.endswith("\\ ") else pattern.rstrip()
    if not text or text.startswith("#") or text == "/":
        return None, None
    include = True
    if text.startswith("!"):
        include = False
        text = text[1:]
    segs = text.split("/")
    is_dir_pattern = not segs[-1]
    try:
        norm, whole = _normalize(is_dir_pattern, segs)
    except GitIgnorePatternError as exc:
        raise GitIgnorePatternError(f"Invalid git pattern: {pattern!r}") from exc
    if whole is not None:
        return whole, include
    assert norm is not None
    try:
        return _translate(is_dir_pattern, norm), include
    except _RangeError:
        return None, None  # git discards a pattern with an unterminated range


class BoundedPattern(GitIgnoreSpecPattern):
    """GitIgnoreSpecPattern compiled by ``pattern_to_regex`` above."""

    __slots__ = ()

    @classmethod
    def pattern_to_regex(cls, pattern):  # type: ignore[no-untyped-def,override]
        if isinstance(pattern, bytes):
            raise TypeError("patterns are text")
        return pattern_to_regex(pattern)


def compile_spec(lines: Iterable[str]) -> pathspec.GitIgnoreSpec:
    """A GitIgnoreSpec of bounded patterns. Raises GitIgnorePatternError (a ValueError) on
    an invalid line; the "simple" backend, since re2/hyperscan would recompile the regex."""
    patterns = [BoundedPattern(line) for line in lines if line]
    return pathspec.GitIgnoreSpec(patterns, backend="simple")


def compile_lenient(lines: Iterable[str], origin: str) -> pathspec.GitIgnoreSpec:
    """``compile_spec`` for lines nobody checked (a ``.gitignore`` in a source): an invalid
    line is skipped with a warning naming ``origin``, the others hold."""
    patterns = []
    for n, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            patterns.append(BoundedPattern(line))
        except (ValueError, re.error) as exc:
            log.warning("%s line %d skipped: %r is not a valid pattern (%s)", origin, n, line, exc)
    return pathspec.GitIgnoreSpec(patterns, backend="simple")
