"""Walk a source folder: prune excluded directories early, cap sizes and the file count.

The walk never reads file contents; binary detection happens lazily in
``read_text_capped`` because the indexer reads each file anyway.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from brain.errors import PathOutsideSource
from brain.sources.filters import SourceFilter
from brain.trust.paths import SpecialFs, inside, real_path, special_filesystems

MAX_SCAN_FILES = 200_000
MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_APPEND_FILE_BYTES = 20 * 1024 * 1024
MAX_INDEXED_CHARS = 200_000
APPEND_SUFFIXES = (".jsonl", ".ndjson")
_SNIFF_BYTES = 8192

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FileEntry:
    rel: str
    path: Path
    size: int
    mtime_ns: int


@dataclass(slots=True)
class WalkResult:
    files: list[FileEntry] = field(default_factory=list)
    capped: bool = False
    cancelled: bool = False
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def count_display(self) -> str:
        return count_display(len(self.files), self.capped)


def count_display(n: int, capped: bool) -> str:
    """``N+`` when the walk hit the scan cap: the source holds more than was counted."""
    return f"{n}+" if capped else str(n)


def size_cap(rel_posix: str) -> int:
    return MAX_APPEND_FILE_BYTES if rel_posix.endswith(APPEND_SUFFIXES) else MAX_FILE_BYTES


def is_binary(path: Path) -> bool:
    """A NUL byte in the first 8 KB marks a file as binary (git's and ripgrep's rule)."""
    try:
        with open(path, "rb") as fh:
            return b"\0" in fh.read(_SNIFF_BYTES)
    except OSError:
        return True


def read_text_capped(
    path: Path, max_chars: int = MAX_INDEXED_CHARS, *, root: Path | str | None = None
) -> tuple[str | None, bool]:
    """Read at most ``max_chars`` characters; ``(None, False)`` for a binary file.

    Returns ``(text, truncated)``; undecodable bytes become U+FFFD rather than failing.
    With ``root`` (a source's files) the file is opened with :func:`open_beneath`.
    """
    with _open_for_read(path, root) as fh:
        head = fh.read(_SNIFF_BYTES)
        if b"\0" in head:
            return None, False
        # A UTF-8 character is at most 4 bytes, so this many bytes always suffices.
        budget = max_chars * 4 + 4
        data = head + fh.read(max(0, budget - len(head)))
        more = bool(fh.read(1))
    text = data.decode("utf-8-sig", errors="replace")
    if len(text) > max_chars:
        return text[:max_chars], True
    return text, more


def _open_for_read(path: Path, root: Path | str | None) -> BinaryIO:
    if root is None:
        return open(path, "rb")  # noqa: SIM115 - the caller's with block closes it
    return open_beneath(root, Path(os.path.relpath(path, root)).as_posix())


def resolve_in_source(root: Path, path: str | Path) -> Path:
    """Resolve a relative or absolute path and refuse it unless it lies inside ``root``."""
    root_real = Path(os.path.realpath(root))
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root_real / candidate
    real = Path(real_path(candidate))  # InvalidArgument for a NUL, a surrogate, a huge path
    if real != root_real and root_real not in real.parents:
        raise PathOutsideSource(
            f"{path} is outside the source folder {root_real}; pass a path inside it "
            "or add its folder as a source first.",
            path=str(path),
            root=str(root_real),
        )
    return real


def target_rel(root: Path | str, rel: str) -> str | None:
    """Where ``root/rel`` really is, relative to the root; None when it may not be read as a
    file of the source. Judged as the walk judges: no folder on the way may be a link (the
    walk follows none), and a file link may point only inside the root. ``..`` and ``.``
    are refused, so a path from a watcher event, a targeted sync or a grep engine cannot
    climb out."""
    parts = rel.strip("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    root_real = os.path.realpath(root)
    if len(parts) > 1:
        folder = "/".join(parts[:-1])
        if os.path.realpath(os.path.join(root, folder)) != os.path.join(root_real, folder):
            return None
    real = os.path.realpath(os.path.join(root, *parts))
    if real == root_real or not inside(root_real, real):
        return None
    return Path(os.path.relpath(real, root_real)).as_posix()


def open_beneath(root: Path | str, rel: str) -> BinaryIO:
    """Open a file of a source for reading without following a link on the way.

    Each folder is opened relative to the one before with O_NOFOLLOW, so a folder swapped
    for a link after the walk (a race) fails to open instead of leading out; a file link
    inside the root is opened at its target. Raises OSError when the file may not be read.
    """
    target = target_rel(root, rel)
    if target is None:
        raise OSError(errno.EPERM, f"{rel} leads outside its source")
    if os.open not in os.supports_dir_fd:  # no openat (Windows): the checks above must do
        return open(os.path.join(os.path.realpath(root), target), "rb")
    base = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    parts = target.split("/")
    fd = os.open(os.path.realpath(root), base | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            inner = os.open(part, base | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open(parts[-1], base | os.O_NONBLOCK, dir_fd=fd)  # a FIFO must not hang
    finally:
        os.close(fd)
    try:
        st = os.fstat(leaf)
        if not stat.S_ISREG(st.st_mode) or special_filesystems().holds_device(st.st_dev):
            raise OSError(errno.EPERM, f"{rel} is not a regular file of its source")
        os.set_blocking(leaf, True)
        return os.fdopen(leaf, "rb")
    except BaseException:
        os.close(leaf)
        raise


def entry_for(root: Path, rel: str, flt: SourceFilter) -> FileEntry | None | str:
    """The walk entry of one path (a watcher event, a targeted sync): None when it is not an
    indexable file, "dir" for a folder. Refuses what the walk would never reach."""
    target = target_rel(root, rel)
    if target is None:
        return None
    path = root / rel
    try:
        lst = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISDIR(lst.st_mode):
        return "dir" if not flt.is_excluded_dir(rel) else None
    # A link is judged by its target's path too: a "notes.txt" linked to ".env" stays out.
    if not flt.admits(rel) or (target != rel and not flt.admits(target)):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > size_cap(rel):
        return None
    if special_filesystems().holds_device(st.st_dev):
        return None
    return FileEntry(rel, path, st.st_size, st.st_mtime_ns)


def walk_source(
    root: Path,
    flt: SourceFilter,
    max_files: int = MAX_SCAN_FILES,
    cancel: threading.Event | None = None,
    *,
    check_binary: bool = False,
) -> WalkResult:
    """List the files of a source the filter admits, stopping at ``max_files``.

    Symlinked files are kept when they resolve inside the root; symlinked directories
    are never followed (their target, if inside the root, is walked anyway), so no cycle
    and no escape is possible. Folders and files on a special filesystem (procfs mounted
    inside the source, say) are skipped.
    """
    root = Path(root)
    root_real = os.path.realpath(root)
    special = special_filesystems(fresh=True)
    result = WalkResult()
    stack: list[tuple[str, str]] = [(str(root), "")]
    while stack:
        if cancel is not None and cancel.is_set():
            result.cancelled = True
            break
        dir_path, dir_rel = stack.pop()
        try:
            with os.scandir(dir_path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            result.skipped["unreadable"] += 1
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            rel = f"{dir_rel}/{entry.name}" if dir_rel else entry.name
            if not _visit(entry, rel, root_real, flt, result, subdirs, check_binary, special):
                continue
            if len(result.files) > max_files:
                result.files.pop()
                result.capped = True
                return result
        stack.extend(reversed(subdirs))
    if result.skipped["symlink_outside"] or result.skipped["special_fs"]:
        log.info(
            "walk of %s skipped %d link(s) pointing outside it and %d special-filesystem "
            "entries; they are never indexed",
            root,
            result.skipped["symlink_outside"],
            result.skipped["special_fs"],
        )
    return result


def _visit(
    entry: os.DirEntry[str],
    rel: str,
    root_real: str,
    flt: SourceFilter,
    result: WalkResult,
    subdirs: list[tuple[str, str]],
    check_binary: bool,
    special: SpecialFs,
) -> bool:
    """Handle one directory entry; True when a file was appended to the result."""
    try:
        is_link = entry.is_symlink()
        is_dir = entry.is_dir(follow_symlinks=False)
    except OSError:
        result.skipped["unreadable"] += 1
        return False
    if is_dir:
        if flt.is_excluded_dir(rel):
            result.skipped["excluded_dir"] += 1
        elif _special_dir(entry, special):
            result.skipped["special_fs"] += 1
        else:
            subdirs.append((entry.path, rel))
        return False
    if is_link:
        target = os.path.realpath(entry.path)
        if not inside(root_real, target):
            result.skipped["symlink_outside"] += 1
            return False
        if os.path.isdir(target):
            result.skipped["symlink_dir"] += 1
            return False
        # Judged by its target's path too: a "notes.txt" linked to ".env" stays out.
        if not flt.admits(Path(os.path.relpath(target, root_real)).as_posix()):
            result.skipped["excluded"] += 1
            return False
    if not flt.admits(rel):
        result.skipped["excluded"] += 1
        return False
    try:
        st = entry.stat()  # follows an in-root symlink to its target
    except OSError:
        result.skipped["unreadable"] += 1
        return False
    if not stat.S_ISREG(st.st_mode):
        result.skipped["special"] += 1
        return False
    if special.holds_device(st.st_dev):
        result.skipped["special_fs"] += 1
        return False
    if st.st_size > size_cap(rel):
        result.skipped["too_large"] += 1
        return False
    if check_binary and is_binary(Path(entry.path)):
        result.skipped["binary"] += 1
        return False
    result.files.append(FileEntry(rel, Path(entry.path), st.st_size, st.st_mtime_ns))
    return True


def _special_dir(entry: os.DirEntry[str], special: SpecialFs) -> bool:
    """A folder on a special filesystem (a mount point of procfs inside the source)."""
    try:
        return special.holds_device(entry.stat(follow_symlinks=False).st_dev)
    except OSError:
        return True  # unreadable: nothing to walk there anyway
