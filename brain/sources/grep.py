"""Literal/regex search over the live files of sources: ripgrep, else git grep, grep, Python.

Every engine is handed the excludes it can express (for speed), and every hit is then
checked again against ``SourceFilter.admits`` so the floor holds whatever the engine did.
The search is bounded by a deadline (the process is killed) and by a result count
(reading stops). Python-side matching (snippets, the Python engine) uses the ``regex``
module, whose matching takes a timeout: Python's ``re`` cannot be interrupted, and a
pattern like ``(a+)+$`` on a long line would backtrack for minutes past the deadline.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import regex

from brain.errors import InvalidArgument
from brain.sources.filters import SourceFilter, file_holds_credentials
from brain.sources.walker import is_binary, target_rel, walk_source
from brain.trust.globs import compile_spec
from brain.trust.redact import multiline_secret_lines, redact

ENGINES = ("rg", "git-grep", "grep", "python")
MAX_SNIPPET = 300
MAX_GREP_FILE = "20M"
_KEY_SCAN_BYTES = 20 * 1024 * 1024  # as much of a file as grep reads (MAX_GREP_FILE)
_REDACT_LINE_CAP = 65536
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/=]{16,}")
# Finding where a snippet starts is cosmetic: past this, the line's start is shown instead.
SNIPPET_MATCH_S = 0.05
# The Python engine gives one line at most this long before it stops as timed out. regex's
# timeout counts the process's CPU time, not wall time, so on a loaded machine a match can
# overrun its budget by the load factor: a short budget per line keeps that overrun short.
LINE_MATCH_S = 0.25
_REGEX_ERROR_MARKERS = (
    "regex parse error",
    "in a regex",
    "error parsing regex",
    "invalid regular expression",
    "unmatched",
    "pcre",
)
_FIX_HINT = "escape special characters (for example \\( or \\.) or pass fixed=true"


@dataclass(frozen=True, slots=True)
class GrepHit:
    path: str  # POSIX, relative to root
    abs_path: Path
    line: int
    text: str
    root: Path

    @property
    def abs(self) -> Path:
        return self.abs_path


@dataclass(slots=True)
class GrepResult:
    hits: list[GrepHit] = field(default_factory=list)
    truncated: bool = False
    engine: str = "rg"
    timed_out: bool = False


@functools.cache
def find_rg() -> str | None:
    """ripgrep on PATH, else the binary the ``ripgrep`` PyPI wheel puts beside Python."""
    found = shutil.which("rg")
    if found:
        return found
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = folder / ("rg.exe" if os.name == "nt" else "rg")
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def available_engines() -> list[str]:
    have = {
        "rg": find_rg() is not None,
        "git-grep": shutil.which("git") is not None,
        "grep": shutil.which("grep") is not None,
        "python": True,
    }
    return [e for e in ENGINES if have[e]]


def grep(
    roots: list[tuple[Path, SourceFilter]],
    pattern: str,
    *,
    fixed: bool = False,
    case_insensitive: bool = False,
    glob: str | None = None,
    max_results: int = 200,
    timeout_s: float = 10.0,
    engine: str | None = None,
) -> GrepResult:
    """Search ``pattern`` in every admitted file under ``roots``; see the module docstring."""
    if not pattern:
        raise InvalidArgument("pattern is empty; pass the text or regex to search for.")
    if max_results < 1:
        raise InvalidArgument("max_results must be at least 1.", max_results=max_results)
    chosen = _choose_engine(engine)
    py_re = _python_regex(pattern, fixed, case_insensitive, strict=chosen != "rg")
    col = _Collector(max_results, time.monotonic() + max(0.1, timeout_s), glob, py_re)
    for root, flt in roots:
        if col.stopped:
            break
        query = _Query(Path(root), flt, pattern, fixed, case_insensitive, glob)
        if chosen == "python":
            _python_search(query, col)
        else:
            _process_search(chosen, query, col)
    return GrepResult(col.hits, col.truncated, chosen, col.timed_out)


# -- shared pieces -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Query:
    root: Path
    flt: SourceFilter
    pattern: str
    fixed: bool
    icase: bool
    glob: str | None


class _Collector:
    """Gathers hits, applying the filter again; knows when to stop."""

    def __init__(
        self, limit: int, deadline: float, glob: str | None, py_re: regex.Pattern | None
    ):
        self.hits: list[GrepHit] = []
        self.limit = limit
        self.deadline = deadline
        self.truncated = False
        self.timed_out = False
        self.glob_spec = compile_spec([glob]) if glob else None
        self.py_re = py_re
        self._files: dict[tuple[Path, str], tuple[str, Path] | None] = {}
        self._key_lines: dict[Path, set[int]] = {}

    @property
    def stopped(self) -> bool:
        if not self.timed_out and time.monotonic() > self.deadline:
            self.timed_out = self.truncated = True
        return self.truncated

    def offer(self, q: _Query, rel: str, line: int, text: str) -> bool:
        """Add a hit if the filter admits it; False once no more hits are wanted."""
        key = (q.root, rel)
        if key in self._files:  # a file's verdict is computed once, not per matching line
            found = self._files[key]
        else:
            found = self._files[key] = self._admit(q, rel)
        if found is None:
            return not self.stopped
        if len(self.hits) >= self.limit:
            self.truncated = True
            return False
        line_text = self._redacted(found[1], line, text)
        self.hits.append(GrepHit(found[0], found[1], line, self._snippet(line_text), q.root))
        return not self.stopped

    def _redacted(self, path: Path, line: int, text: str) -> str:
        """A live line may hold a secret: redacted (the whole line, then cut) like indexed
        text; a line inside a private-key block of its file is redacted whole. Only a
        base64-looking line can be one, so only then is its file read (once)."""
        if _BASE64_LINE.fullmatch(text.strip()):
            if path not in self._key_lines:
                self._key_lines[path] = _key_block_lines(path)
            if line in self._key_lines[path]:
                return "[REDACTED:private_key]"
        # A minified multi-megabyte line is cut before redaction (bounded work); the snippet
        # is then taken from the redacted head.
        return redact(text[:_REDACT_LINE_CAP]).text

    def _admit(self, q: _Query, raw: str) -> tuple[str, Path] | None:
        """(rel, absolute path) when the file may be returned, else None."""
        rel = raw.replace(os.sep, "/").removeprefix("./")
        if rel.startswith("../") or not q.flt.admits(rel):
            return None
        target = target_rel(q.root, rel)  # a link out, at any depth, whatever the engine did
        if target is None or (target != rel and not q.flt.admits(target)):
            return None  # judged before anything reads the file
        if file_holds_credentials(q.root / rel, rel):
            return None
        if self.glob_spec is not None and not self.glob_spec.match_file(rel):
            return None
        return rel, q.root / rel

    def _snippet(self, text: str) -> str:
        text = text.rstrip("\r\n")
        if len(text) <= MAX_SNIPPET:
            return text
        start = 0
        match = None
        if self.py_re is not None:
            try:
                match = self.search(text, SNIPPET_MATCH_S)
            except TimeoutError:
                match = None
        if match:
            start = max(0, min(match.start() - MAX_SNIPPET // 3, len(text) - MAX_SNIPPET))
        return text[start : start + MAX_SNIPPET]

    def search(self, text: str, budget_s: float) -> regex.Match | None:
        """``py_re.search`` within ``budget_s`` and the deadline; TimeoutError past them."""
        assert self.py_re is not None
        budget = min(budget_s, self.deadline - time.monotonic())
        if budget <= 0:
            raise TimeoutError("grep deadline passed")
        return self.py_re.search(text, timeout=budget)


def _key_block_lines(path: Path) -> set[int]:
    """Lines of ``path`` inside a PEM private-key block (read once per file with a hit)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(_KEY_SCAN_BYTES)
    except OSError:
        return set()
    if b"PRIVATE KEY" not in data:
        return set()
    return multiline_secret_lines(data.decode("utf-8", errors="replace"))


def _choose_engine(engine: str | None) -> str:
    available = available_engines()
    if engine is None:
        return available[0]
    if engine not in ENGINES:
        raise InvalidArgument(f"unknown grep engine {engine!r}; use one of {', '.join(ENGINES)}.")
    if engine not in available:
        raise InvalidArgument(
            f"grep engine {engine!r} is not available here; "
            "install ripgrep (pip install ripgrep) or omit engine to pick one automatically."
        )
    return engine


def _python_regex(
    pattern: str, fixed: bool, icase: bool, *, strict: bool
) -> regex.Pattern | None:
    """Compile for snippets and the Python engine; a failure is an error only when strict.
    The syntax is ``re``'s (what callers know); ``regex`` then matches with a timeout."""
    source = re.escape(pattern) if fixed else pattern
    try:
        re.compile(source, re.IGNORECASE if icase else 0)
        return regex.compile(source, regex.IGNORECASE if icase else 0)
    except (re.error, regex.error) as exc:
        if strict:
            raise InvalidArgument(
                f"invalid regex {pattern!r}: {exc}; {_FIX_HINT}.", pattern=pattern
            ) from exc
        return None


def _simple_names(patterns: list[str]) -> list[str]:
    """Single-component patterns (``node_modules``, ``*.pem``) that grep/git can prune."""
    names = []
    for p in patterns:
        name = p.rstrip("/")
        if name and not p.startswith("!") and "/" not in name:
            names.append(name)
    return names


# -- external engines ----------------------------------------------------------------------


def _rg_command(q: _Query) -> list[str]:
    cmd = [find_rg() or "rg", "--no-config", "--no-heading", "-n", "--null", "--color=never"]
    cmd += ["--hidden", "--no-require-git", "--no-ignore-dot", "--no-ignore-parent"]
    cmd += ["--no-ignore-global", "--no-ignore-exclude", "--max-filesize", MAX_GREP_FILE]
    cmd += ["--max-columns", "2000", "--max-columns-preview"]
    if not q.flt.use_gitignore:
        cmd.append("--no-ignore-vcs")
    if q.fixed:
        cmd.append("-F")
    if q.icase:
        cmd.append("-i")
    # rg's override globs differ from gitignore for folder names ("docs/" whitelists no
    # file), so only file-shaped globs are handed over; the post-filter checks the rest.
    # The later glob wins in rg, so the allowlist goes before the excludes.
    if q.glob and "*" in q.glob.rsplit("/", 1)[-1]:
        cmd += ["--glob", q.glob]
    for pat in [*q.flt.exclude_patterns(), *q.flt.never_negatable_patterns()]:
        cmd += ["--glob", "!" + pat]
    return [*cmd, "-e", q.pattern, "--", "."]


def _git_command(q: _Query) -> list[str]:
    cmd = ["git", "grep", "--no-index", "-n", "-z", "-I", "--no-color"]
    if q.flt.use_gitignore:
        cmd.append("--exclude-standard")
    cmd.append("-F" if q.fixed else "-P")
    if q.icase:
        cmd.append("-i")
    cmd += ["-e", q.pattern, "--", "."]
    for name in _simple_names([*q.flt.exclude_patterns(), *q.flt.never_negatable_patterns()]):
        cmd += [f":(exclude,glob)**/{name}", f":(exclude,glob)**/{name}/**"]
    return cmd


def _grep_command(q: _Query) -> list[str]:
    cmd = ["grep", "-r", "-n", "-I", "--null", "--color=never"]
    cmd.append("-F" if q.fixed else "-P")
    if q.icase:
        cmd.append("-i")
    for name in _simple_names([*q.flt.exclude_patterns(), *q.flt.never_negatable_patterns()]):
        cmd += [f"--exclude-dir={name}", f"--exclude={name}"]
    return [*cmd, "-e", q.pattern, "--", "."]


def _parse_colon(raw: bytes) -> tuple[str, int, str] | None:
    path, sep, rest = raw.partition(b"\0")
    num, sep2, text = rest.partition(b":")
    if not sep or not sep2 or not num.isdigit():
        return None
    return os.fsdecode(path), int(num), text.decode("utf-8", errors="replace")


def _parse_git(raw: bytes) -> tuple[str, int, str] | None:
    fields = raw.split(b"\0", 2)
    if len(fields) != 3 or not fields[1].isdigit():
        return None
    return os.fsdecode(fields[0]), int(fields[1]), fields[2].decode("utf-8", errors="replace")


_COMMANDS: dict[str, tuple[Callable[[_Query], list[str]], Callable]] = {
    "rg": (_rg_command, _parse_colon),
    "git-grep": (_git_command, _parse_git),
    "grep": (_grep_command, _parse_colon),
}


def _process_search(engine: str, q: _Query, col: _Collector) -> None:
    build, parse = _COMMANDS[engine]
    remaining = col.deadline - time.monotonic()
    if remaining <= 0:
        col.stopped  # noqa: B018 - marks the timeout
        return
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            build(q), cwd=q.root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
        )
        killer = threading.Timer(remaining, proc.kill)
        killer.start()
        found = False
        try:
            found = _read_hits(proc, parse, q, col)
        finally:
            killer.cancel()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        if proc.returncode not in (0, 1) and not found and not col.stopped:
            err.seek(0)
            _raise_pattern_error(engine, q.pattern, err.read().decode("utf-8", "replace"))


def _read_hits(proc: subprocess.Popen, parse: Callable, q: _Query, col: _Collector) -> bool:
    assert proc.stdout is not None
    found = False
    for raw in proc.stdout:
        parsed = parse(raw.rstrip(b"\n"))
        if parsed is None:
            continue
        found = True
        if not col.offer(q, *parsed):
            break
    return found


def _raise_pattern_error(engine: str, pattern: str, stderr: str) -> None:
    lowered = stderr.lower()
    if "backtracking limit" in lowered or "match limit" in lowered:
        raise InvalidArgument(
            f"regex {pattern!r} backtracks too much to finish ({engine}); simplify it "
            "(e.g. '(a+)+' matches what 'a+' does) or pass fixed=true.", pattern=pattern
        )
    if any(marker in lowered for marker in _REGEX_ERROR_MARKERS):
        message = stderr.strip().splitlines()
        detail = " ".join(line.strip() for line in message[:6])
        raise InvalidArgument(
            f"invalid regex {pattern!r} ({engine}): {detail}; {_FIX_HINT}.", pattern=pattern
        )


# -- pure Python ---------------------------------------------------------------------------


def _python_search(q: _Query, col: _Collector) -> None:
    assert col.py_re is not None
    cancel = threading.Event()
    walk = walk_source(q.root, q.flt, cancel=cancel)
    for entry in walk.files:
        if col.stopped:
            return
        if col.glob_spec is not None and not col.glob_spec.match_file(entry.rel):
            continue
        for line_no, line in _lines(entry.path):
            try:
                found = col.search(line, LINE_MATCH_S)
            except TimeoutError:
                col.timed_out = col.truncated = True
                return
            if found and not col.offer(q, entry.rel, line_no, line):
                return


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    if is_binary(path):
        return
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            yield from enumerate(fh, start=1)
    except OSError:
        return
