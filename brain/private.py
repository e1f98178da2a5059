"""The data dir is private: 0700 folders, 0600 files, whoever runs the brain.

It holds notes, indexed source text, parsed documents, tokens and logs. ``secure_home``
runs when a process starts using a data dir (``Brain.open`` and ``setup_logging``): it sets
the process umask to 077, so every file written afterwards (the store's segments and WAL,
SQLite databases with their -wal/-shm, the graph cache, logs, exports, backups, tokens) is
created private, and it tightens whatever an older version left readable.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "UMASK", "private_file", "secure_home"]

DIR_MODE = 0o700
FILE_MODE = 0o600
UMASK = 0o077


def secure_home(home: Path) -> None:
    """umask 077 for this process; ``home`` 0700 and what lies under it owner-only.

    Inside, group and other bits are removed and the owner's kept (0644 -> 0600,
    0755 -> 0700). A data dir pointed at the user's home or ``/`` by mistake gets the umask
    and nothing else: rewriting the modes of a whole home is not this function's call."""
    os.umask(UMASK)
    home.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    real = home.resolve()
    if real in (Path.home().resolve(), Path(real.anchor)):
        return
    _tighten(home, DIR_MODE)
    for dirpath, dirnames, filenames in os.walk(home):  # symlinks are not followed
        for name in (*dirnames, *filenames):
            _tighten(Path(dirpath, name))


def fsync_dir(path: Path | str) -> None:
    """Make a rename or a new entry in folder ``path`` durable (fsync the folder). A
    filesystem that cannot fsync a folder is let be."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def private_file(path: Path | str) -> None:
    """Make one file owner-only (for files written outside the data dir, e.g. exports)."""
    _tighten(Path(path), FILE_MODE)


def _tighten(path: Path, mode: int | None = None) -> None:
    """Set ``mode``, or (None) drop the group and other bits."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return
        current = stat.S_IMODE(st.st_mode)
        wanted = current & ~UMASK if mode is None else mode
        if current != wanted:
            os.chmod(path, wanted)
    except OSError:  # vanished meanwhile (a temp file renamed) or not ours: nothing to do
        return
