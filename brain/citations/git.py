"""What git knows of a source: its commit, renames since a commit, files changed since a ref.

Through the ``git`` command (never a reader of git's objects), each call bounded by
TIMEOUT_S and run with optional locks off so a brain never contends with the user's git. A
folder that is not a work tree, or a machine without git, simply has no git facts: the
citations then rest on content hashes alone.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import threading
import time

from brain.errors import InvalidArgument

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0
HEAD_TTL_S = 1.0  # a commit read is reused this long (a burst of writes asks once)
MAX_OUTPUT = 8 * 1024 * 1024
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/~^@{}+-]{0,199}$")


class GitError(Exception):
    """git refused or timed out (the caller decides what that means)."""


def available() -> bool:
    return shutil.which("git") is not None


def run(root: str, *args: str) -> str:
    """``git -C root args...``'s stdout; GitError on failure, timeout or a missing git."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0",
           "LC_ALL": "C"}
    try:
        proc = subprocess.run(["git", "-C", root, "-c", "core.quotepath=off", *args],
                              capture_output=True, timeout=TIMEOUT_S, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]} failed: {exc}") from exc
    if proc.returncode != 0:
        raise GitError(proc.stderr.decode("utf-8", "replace").strip()[:300])
    return proc.stdout[:MAX_OUTPUT].decode("utf-8", "replace")


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what ``git hash-object`` prints for a file without
    filters): the id of the cited file as seen, comparable with ``git ls-tree``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def check_ref(ref: str) -> str:
    """A caller's ref (a commit, branch, tag, ``HEAD~3``), refused when it could be an
    option or is not a ref's shape."""
    if not isinstance(ref, str) or not _REF.match(ref.strip()) or ".." in ref:
        raise InvalidArgument(
            f"{str(ref)[:60]!r} is not a git ref: pass a commit id, a branch, a tag or a form "
            "like HEAD~3", field="changed_since")
    return ref.strip()


class Repos:
    """Git facts per source root, with the commit cached for HEAD_TTL_S."""

    def __init__(self) -> None:
        self._heads: dict[str, tuple[float, str]] = {}
        self._prefixes: dict[str, str] = {}
        self._lock = threading.Lock()
        self.enabled = available()

    def head(self, root: str, fresh: bool = False) -> str:
        """The commit checked out in ``root``, or "" (not a work tree, no commit, no git);
        ``fresh`` asks git even within HEAD_TTL_S of the last answer."""
        if not self.enabled:
            return ""
        now = time.monotonic()
        with self._lock:
            cached = self._heads.get(root)
            if cached is not None and now - cached[0] < HEAD_TTL_S and not fresh:
                return cached[1]
        try:
            commit = run(root, "rev-parse", "--verify", "-q", "HEAD").strip()
        except GitError:
            commit = ""
        with self._lock:
            self._heads[root] = (now, commit)
        return commit

    def prefix(self, root: str) -> str:
        """Where ``root`` lies inside its repository ("" at the top, "sub/dir/" below it):
        git names paths from the top, a source from its own root."""
        with self._lock:
            if root in self._prefixes:
                return self._prefixes[root]
        try:
            found = run(root, "rev-parse", "--show-prefix").strip()
        except GitError:
            found = ""
        with self._lock:
            self._prefixes[root] = found
        return found

    def diff(self, root: str, since: str) -> list[tuple[str, ...]]:
        """``git diff --name-status -M since`` (commit against the work tree, staged renames
        included) as (status letter, path...) rows, paths relative to ``root``. Empty when
        git cannot answer (no git, not a work tree, an unknown commit)."""
        if not self.enabled or not since:
            return []
        try:
            out = run(root, "diff", "--name-status", "-M", "-z", since, "--")
        except GitError as exc:
            log.debug("git diff in %s failed: %s", root, exc)
            return []
        rows: list[tuple[str, ...]] = []
        top, fields = self.prefix(root), out.split("\0")
        i = 0
        while i < len(fields) and fields[i]:
            status = fields[i]
            width = 3 if status.startswith(("R", "C")) else 2
            paths = fields[i + 1 : i + width]
            if all(p.startswith(top) for p in paths):
                rows.append((status[:1], *(p[len(top):] for p in paths)))
            i += width
        return rows

    def changed(self, root: str, ref: str, to: str | None = None) -> set[str]:
        """Paths (both sides of a rename) changed between ``ref`` and ``to`` (default: the
        work tree). InvalidArgument when ``ref`` is not a commit of this repository."""
        ref = check_ref(ref)
        ends = [ref] if to is None else [ref, check_ref(to)]
        for end in ends:
            try:
                run(root, "rev-parse", "--verify", "-q", f"{end}^{{commit}}")
            except GitError as exc:
                raise InvalidArgument(f"{end!r} is not a commit of the git work tree {root}",
                                      field="changed_since") from exc
        out = run(root, "diff", "--name-status", "-M", "-z", *ends, "--")
        paths: set[str] = set()
        fields = out.split("\0")
        i = 0
        while i < len(fields) and fields[i]:
            status = fields[i]
            width = 3 if status.startswith(("R", "C")) else 2
            paths.update(f for f in fields[i + 1 : i + width] if f)
            i += width
        top = self.prefix(root)
        return {p[len(top):] for p in paths if p.startswith(top)}


def renamed(rows: list[tuple[str, ...]], path: str) -> str | None:
    """Where ``path`` went, in a :meth:`Repos.diff`: a rename git reports, else None."""
    for row in rows:
        if row[0] == "R" and row[1] == path:
            return row[2]
    return None


def added(rows: list[tuple[str, ...]]) -> list[str]:
    """The files a :meth:`Repos.diff` reports added (a rename's new side included)."""
    return [row[-1] for row in rows if row[0] in ("A", "R", "C")]

