"""How a server that cannot start says so: one line, ``opencode-brain: [CODE] message``, on
stderr and in ``brain.log``, and exit code 2. Never a traceback on stderr.

A failure can arrive wrapped: the stdio server opens the Brain inside a task group, which
raises an ``ExceptionGroup``; :func:`brain_error_in` finds the typed error inside.
"""

from __future__ import annotations

import errno
import logging
import logging.handlers
import os
import sys
import time
import traceback
from pathlib import Path
from typing import NoReturn, TypeVar

from brain.errors import BrainError, ConfigError, DataDirUnwritable, DiskFull

PREFIX = "opencode-brain"


class StartFailed(BrainError):
    code = "START_FAILED"


E = TypeVar("E", bound=BaseException)


def _found_in(exc: BaseException, kind: type[E]) -> E | None:
    """The first ``kind`` behind ``exc``: itself, its cause or context, or inside an
    exception group."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, kind):
            return e
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
        for nxt in (e.__cause__, e.__context__):
            if nxt is not None:
                stack.append(nxt)
    return None


def brain_error_in(exc: BaseException) -> BrainError | None:
    """The typed error behind ``exc`` (itself, its cause, or inside an exception group)."""
    return _found_in(exc, BrainError)


def _os_error_in(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc`` (itself, its cause, or inside an exception group)."""
    return _found_in(exc, OSError)


UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def data_dir_error(exc: BaseException, home: Path | None) -> BrainError | None:
    """A data dir that cannot be written (read-only, another user's) or is full, said as
    its typed error; None when ``exc`` is no such failure, or concerns a file elsewhere."""
    err = _os_error_in(exc)
    if err is None or err.errno not in (*UNWRITABLE, *NO_SPACE):
        return None
    where = Path(str(err.filename)) if err.filename else None
    if home is not None and where is not None and not where.is_relative_to(home):
        return None
    shown = where or home
    if err.errno in NO_SPACE:
        writing = f" (writing {where})" if where else ""
        return DiskFull(f"no space left on the disk of the data dir {home}{writing}: free some "
                        "space there (BRAIN__STORAGE__MIN_FREE_MB is the margin the brain "
                        "keeps), or set BRAIN__HOME to a folder on another disk; then run it "
                        "again", path=str(shown))
    return DataDirUnwritable(f"cannot write {shown} ({err.strerror}): the data dir {home} "
                             "must be writable by this user; make it so, or set BRAIN__HOME "
                             "to a folder you can write", path=str(shown))


def log_writable(home: Path | None) -> bool:
    """Whether this process can write brain.log (its handler is set up, or the file could be)."""
    if home is None:
        return False
    log_path = os.path.abspath(home / "brain.log")
    if any(h.baseFilename == log_path for h in _log_file_handlers()):
        return True
    target = home / "brain.log"
    return os.access(target if target.exists() else home, os.W_OK) if home.exists() else False


def as_brain_error(exc: BaseException, home: Path | None = None) -> BrainError:
    found = brain_error_in(exc)
    if found is not None:
        return found
    if isinstance(exc, ValueError):  # config.ConfigInvalid: the message names field and fix
        return ConfigError(str(getattr(exc, "message", exc)))
    on_disk = data_dir_error(exc, home)
    if on_disk is not None:
        return on_disk
    where = ("the details are in brain.log" if log_writable(home) else
             f"brain.log cannot be written in {home}, so the details are lost: make it writable")
    return StartFailed(f"{type(exc).__name__}: {exc} ({where})")


def one_line(err: BrainError) -> str:
    return f"{PREFIX}: " + " ".join(str(err).split())


def _log_file_handlers() -> list[logging.FileHandler]:
    return [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]


def _append(home: Path | None, text: str) -> None:
    """Write to brain.log through its handler if logging is set up, else append directly."""
    handlers = _log_file_handlers()
    if handlers:
        record = logging.LogRecord("brain.start", logging.ERROR, __file__, 0, text, None, None)
        for h in handlers:
            h.handle(record)
        return
    if home is None:
        return
    try:
        home.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(home / "brain.log", "a", encoding="utf-8") as fh:
            fh.write(f"{stamp} ERROR brain.start: {text}\n")
    except OSError:
        pass  # a full or read-only disk: stderr still has the line


def refuse(home: Path | None, exc: BaseException) -> NoReturn:
    """Report a start failure as the documented line and exit with code 2."""
    err = as_brain_error(exc, home)
    line = one_line(err)
    logging.raiseExceptions = False  # a log write on a full disk must not print a traceback
    if isinstance(err, StartFailed):  # unexpected: keep the traceback, in the log file only
        _append(home, line + "\n" + "".join(traceback.format_exception(exc)))
    else:
        _append(home, line)
    print(line, file=sys.stderr, flush=True)
    raise SystemExit(2)


def guess_home() -> Path:
    """The data dir when the settings themselves failed to load (for brain.log)."""
    from config import DEFAULT_HOME

    return Path(os.environ.get("BRAIN__HOME") or DEFAULT_HOME).expanduser()
