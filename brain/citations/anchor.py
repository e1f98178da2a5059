"""A citation against the file as it is now: anchor one (at write time), check one (later).

Both read the cited file once (at most MAX_SPAN_FILE_BYTES; a larger file is cited whole by
its bytes' hash), find the span (spans.py) and return a new citation dict; nothing here
writes to the store.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from brain.citation import CHANGED, FRESH, GONE, MAX_EXCERPT, MAX_SPAN_FILE_BYTES, Ref
from brain.citations import git, spans
from brain.citations.git import Repos, blob_id

Redactor = Callable[[str], str]


class Views(dict[str, "FileView | None"]):
    """What one re-check has read: each cited file once (path -> view), and git's diff of
    each anchoring commit against the work tree once (``diffs``)."""

    def __init__(self) -> None:
        super().__init__()
        self.diffs: dict[str, list[tuple[str, ...]]] = {}

    def diff(self, repos: Repos, root: str, since: str) -> list[tuple[str, ...]]:
        if since not in self.diffs:
            self.diffs[since] = repos.diff(root, since)
        return self.diffs[since]


@dataclass(slots=True)
class FileView:
    """One read of a cited file: its bytes' facts, its lines and the spans found in it."""

    size: int
    mtime_ns: int
    blob: str
    lines: list[str] | None  # None: too large to parse (hashed whole)
    whole_hash: str
    found: dict[tuple[str, str], spans.Span | None] = field(default_factory=dict)
    py_index: dict[str, tuple[int, int]] | None = None  # parsed once, on the first symbol


def read(path: str) -> FileView | None:
    """The file at ``path`` (a real, regular file), or None when there is none."""
    try:
        st = os.stat(path)
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as fh:
            data = fh.read(MAX_SPAN_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_SPAN_FILE_BYTES:
        digest = hashlib.sha256(data).hexdigest()[:32]
        return FileView(st.st_size, st.st_mtime_ns, "", None, digest)
    lines = spans.norm(data.decode("utf-8", "replace"))
    return FileView(st.st_size, st.st_mtime_ns, blob_id(data), lines, spans.whole(lines).hash)


def span_of(view: FileView, kind: str, symbol: str | None, lines: Any, path: str,
            old_hash: str | None = None) -> spans.Span | None:
    """The cited span in ``view``; None when the symbol or range is not there."""
    if view.lines is None or kind == "file":  # the excerpt of a whole file is its head
        return spans.Span((1, max(1, len(view.lines or []))), view.whole_hash, "")
    if kind == "symbol" and symbol:
        key = ("symbol", symbol)
        if key not in view.found:
            text = "\n".join(view.lines)
            if view.py_index is None and spans.language_of(path) == "python":
                view.py_index = spans.python_index(text)
            view.found[key] = spans.symbol(text, view.lines, path, symbol, view.py_index)
        return view.found[key]
    a, b = int(lines[0]), int(lines[1])
    return spans.line_range(view.lines, a, b, old_hash)


def _excerpt(view: FileView, span: spans.Span, kind: str, redact: Redactor) -> str:
    whole_head = kind == "file" and view.lines is not None
    text = "\n".join((view.lines or [])[:40]) if whole_head else span.text
    # Redacted whole, then cut: a cut first would leave the head of a token that crosses it.
    shown = redact(text)
    if len(shown) <= MAX_EXCERPT:
        return shown
    cut = shown[:MAX_EXCERPT]
    half = cut.rfind("[REDACTED:")
    return cut[:half] if half >= 0 and "]" not in cut[half:] else cut


def anchor(root: str, rel: str, ref: Ref, origin: str, repos: Repos, now: str,
           redact: Redactor) -> dict[str, Any] | None:
    """A new citation of ``ref`` in the file ``root/rel``; None when the file, or the
    symbol or range it names, is not there."""
    view = read(os.path.join(root, rel))
    if view is None:
        return None
    kind = "symbol" if ref.symbol else "lines" if ref.lines else "file"
    span = span_of(view, kind, ref.symbol, ref.lines, rel)
    if span is None or (kind == "lines" and ref.lines and ref.lines[0] > len(view.lines or [])):
        return None
    return {
        "path": rel, "kind": kind, "symbol": ref.symbol, "lines": list(span.lines),
        "hash": span.hash, "now_hash": None, "origin": origin, "state": FRESH,
        "commit": repos.head(root),
        "blob": view.blob, "size": view.size, "mtime_ns": view.mtime_ns, "checked": now,
        "excerpt": _excerpt(view, span, kind, redact),
    }


def stat_of(root: str, rel: str) -> tuple[int, int] | None:
    """(size, mtime_ns) of ``root/rel``, or None when there is no such file."""
    try:
        st = os.stat(os.path.join(root, rel))
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def unchanged_on_disk(root: str, cite: dict[str, Any]) -> bool:
    """Whether the cited file's size and mtime are those last checked (a stat, no read)."""
    try:
        st = os.stat(os.path.join(root, str(cite.get("path", ""))))
    except OSError:
        return cite.get("state") == GONE and not cite.get("moved_from")
    return st.st_size == cite.get("size") and st.st_mtime_ns == cite.get("mtime_ns")


def check(root: str, cite: dict[str, Any], repos: Repos, now: str,
          views: Views) -> dict[str, Any]:
    """``cite`` checked against the file now: fresh, changed or gone, with where its span is
    (a symbol or a moved range follows its text; a file git reports renamed is followed).
    ``views`` caches file reads across the citations of one check."""
    path = str(cite.get("path", ""))
    view = _view(root, path, views)
    out = dict(cite)
    if view is None:
        # Renames are asked of git from the anchoring commit, where the file had its first name.
        rows = views.diff(repos, root, str(cite.get("commit") or ""))
        moved = git.renamed(rows, str(cite.get("moved_from") or path))
        if moved is not None:
            view = _view(root, moved, views)
            if view is not None:
                out.update(path=moved, moved_from=cite.get("moved_from") or path)
                path = moved
    out["checked"] = now
    if view is None and cite.get("kind") == "symbol":
        found = _symbol_elsewhere(root, cite, repos, views)
        if found is not None:
            view = _view(root, found, views)
            out.update(path=found, moved_from=cite.get("moved_from") or path)
            path = found
    if view is None:
        out.update(state=GONE, now_hash=None)
        return out
    out.update(size=view.size, mtime_ns=view.mtime_ns)
    kind = str(cite.get("kind", "file"))
    span = span_of(view, kind, cite.get("symbol"), cite.get("lines") or (1, 1), path,
                   old_hash=str(cite.get("hash")))
    if span is None and kind == "symbol":  # the symbol left its file: moved to a new one?
        found = _symbol_elsewhere(root, cite, repos, views)
        moved_view = _view(root, found, views) if found is not None else None
        if found is not None and moved_view is not None:
            out.update(path=found, moved_from=cite.get("moved_from") or path,
                       size=moved_view.size, mtime_ns=moved_view.mtime_ns)
            span = span_of(moved_view, kind, cite.get("symbol"), None, found)
    if span is None:
        out.update(state=GONE, now_hash=None)
        return out
    if span.hash == cite.get("hash"):
        out.update(state=FRESH, lines=list(span.lines), now_hash=None)
    else:
        out.update(state=CHANGED, now_hash=span.hash)
        if kind != "lines":
            out["lines"] = list(span.lines)
    return out


MAX_ADDED_LOOKED_AT = 64  # files added since the commit searched for a vanished symbol


def _symbol_elsewhere(root: str, cite: dict[str, Any], repos: Repos,
                      views: Views) -> str | None:
    """The one file git reports added since the anchoring commit that defines the cited
    symbol (its file was deleted or rewritten beyond git's rename detection, or the symbol
    moved to a new file); None when there is none, or more than one."""
    lang = spans.language_of(str(cite.get("path", "")))
    hits = []
    added = git.added(views.diff(repos, root, str(cite.get("commit") or "")))
    for rel in added[:MAX_ADDED_LOOKED_AT]:
        if spans.language_of(rel) != lang:
            continue
        view = _view(root, rel, views)
        if view is not None and span_of(view, "symbol", cite.get("symbol"), None, rel):
            hits.append(rel)
    return hits[0] if len(hits) == 1 else None


def now_view(root: str, cite: dict[str, Any], redact: Redactor) -> dict[str, Any]:
    """The cited span as it is now (verify_note's "now" side)."""
    path = str(cite.get("path", ""))
    view = read(os.path.join(root, path))
    if view is None:
        return {"exists": False}
    kind = str(cite.get("kind", "file"))
    span = span_of(view, kind, cite.get("symbol"), cite.get("lines") or (1, 1), path,
                   old_hash=str(cite.get("hash")))
    if span is None:
        return {"exists": True, "found": False}
    return {"exists": True, "found": True, "lines": list(span.lines), "hash": span.hash,
            "commit": cite.get("commit_now", ""), "excerpt": _excerpt(view, span, kind, redact)}


def _view(root: str, path: str, views: Views) -> FileView | None:
    if path not in views:
        views[path] = read(os.path.join(root, path))
    return views[path]
