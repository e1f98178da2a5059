"""Which paths a caller may reach: the brain's one path policy.

``add_source``, ``update_source``, ``ingest_file``, ``fs_search`` and every sync ask
:class:`PathPolicy`; inside a source, the walk, the watcher, a targeted sync and grep judge
each file with ``walker.target_rel`` / ``walker.open_beneath``, built on :func:`inside` and
:func:`special_filesystems`. The rules, in order:

1. A caller passes an absolute path (``~`` is the server user's home). A relative path is
   refused: the server's working directory is wherever its client launched it, not the
   caller's. (The CLI makes its relative arguments absolute against its own working
   directory before calling.)
2. The path is resolved to its real path: every symlink, at every depth.
3. Never a special filesystem: /proc, /sys, /dev, nor a mount of procfs, sysfs, devtmpfs and
   the like wherever it is mounted (read from /proc/mounts). Never ``/`` as a source.
4. Never the brain's own data dir (``BRAIN__HOME``: tokens, owner.token, the store).
5. Under an allowed root: ``[paths] allowed_roots`` when set (this process's settings, else
   the roots recorded in the data dir's policy.json by the last process given some:
   brain/trust/recorded.py); otherwise the user's home for local callers (stdio, the CLI) and
   nothing at all for HTTP callers. Local callers also reach the folders the user consented
   to by registering a source there (``brain source add``, the ``sources`` tool over stdio),
   recorded in the same file.

The transport is per call, not per process: one Brain (the owner's) serves its own stdio
client, forwarded stdio proxies and HTTP callers alike. :func:`via` marks the call's
transport in a context variable: the HTTP front marks "http", a call forwarded to the owner
carries its transport (a forwarded call without one gets the strict HTTP policy), and an
unmarked in-process call (stdio, the CLI, background work) is local.
"""

from __future__ import annotations

import os
import re
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from brain.errors import Forbidden, InvalidArgument
from brain.trust.recorded import RecordedPolicy

LOCAL, HTTP = "local", "http"
SETTING = "BRAIN__PATHS__ALLOWED_ROOTS"
SETTING_HINT = (
    f"set {SETTING} (a path, a {os.pathsep!r}-separated list or a JSON list) or [paths] "
    "allowed_roots in brain.toml to allow a folder"
)
CONSENT_HINT = "register it with 'brain source add PATH' (recorded in the data dir as your consent)"


def hint(kind: str | None = None) -> str:
    """How a caller of ``kind`` (default: the current call's) gets a folder allowed."""
    if (kind or transport.get()) == LOCAL:
        return f"{CONSENT_HINT}, or {SETTING_HINT}"
    return SETTING_HINT
SPECIAL_PREFIXES = ("/proc", "/sys", "/dev")
# Kernel and pseudo filesystems: their "files" are the machine's state, never documents.
SPECIAL_TYPES = frozenset(
    {
        "proc", "sysfs", "devtmpfs", "devpts", "debugfs", "tracefs", "securityfs", "cgroup",
        "cgroup2", "pstore", "bpf", "configfs", "fusectl", "mqueue", "binfmt_misc",
        "efivarfs", "autofs", "hugetlbfs", "rpc_pipefs", "nsfs", "selinuxfs",
    }
)  # fmt: skip
_PATH_MAX, _NAME_MAX = 4096, 255  # Linux's limits: longer paths fail in the OS untyped
_MOUNTS = "/proc/mounts"
_MOUNTS_TTL_S = 2.0  # mounts change rarely; a walk or a batch of events reads them once

transport: ContextVar[str] = ContextVar("brain_transport", default=LOCAL)


@contextmanager
def via(kind: str) -> Iterator[None]:
    """Run the enclosed call as coming over ``kind``; anything but "local" is HTTP's."""
    token = transport.set(LOCAL if kind == LOCAL else HTTP)
    try:
        yield
    finally:
        transport.reset(token)


def inside(root: str, path: str) -> bool:
    """True when ``path`` is ``root`` or below it (both real paths)."""
    base = root.rstrip(os.sep) + os.sep
    return path == root or path.startswith(base)


# ---------------------------------------------------------------------- special filesystems
@dataclass(frozen=True, slots=True)
class SpecialFs:
    """Where the special filesystems are mounted, and their device numbers."""

    points: frozenset[str]
    devices: frozenset[int]

    def holds_path(self, real: str) -> bool:
        return any(inside(p, real) for p in (*SPECIAL_PREFIXES, *self.points))

    def holds_device(self, st_dev: int) -> bool:
        return st_dev in self.devices


_cache: tuple[float, SpecialFs] | None = None
_cache_lock = threading.Lock()


def special_filesystems(fresh: bool = False) -> SpecialFs:
    """The special mounts of this machine; only the fixed prefixes where /proc/mounts cannot
    be read. Cached for a moment for per-file checks; ``fresh`` for a caller's path and for
    each walk, so a mount made a moment ago is seen."""
    global _cache
    with _cache_lock:
        if not fresh and _cache is not None and time.monotonic() - _cache[0] < _MOUNTS_TTL_S:
            return _cache[1]
        found = _read_special_mounts()
        _cache = (time.monotonic(), found)
        return found


def _read_special_mounts() -> SpecialFs:
    points: set[str] = set()
    try:
        with open(_MOUNTS, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in SPECIAL_TYPES:
            points.add(_unescape(fields[1]))
    devices: set[int] = set()
    for point in points:  # only real special mounts: an unmounted /sys is the root fs's
        try:
            devices.add(os.stat(point).st_dev)
        except OSError:
            continue
    return SpecialFs(frozenset(points), frozenset(devices))


def _unescape(field: str) -> str:
    """/proc/mounts writes a space in a mount point as ``\\040`` (octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


# ---------------------------------------------------------------------- the policy
class PathPolicy:
    """The allowed roots and the refusals, for the transport of the current call.

    Built once by the Brain from ``[paths]`` and the data dir; the roots are read on each
    call, so a changed setting applies at once."""

    def __init__(self, settings: Any, data_dir: Path) -> None:
        self._settings = settings  # config.PathsSettings
        self._data_dir = os.path.realpath(Path(data_dir).expanduser())
        self.recorded = RecordedPolicy(Path(data_dir).expanduser())
        self._written: list[str] | None = None  # what this process last recorded
        self.configured()  # roots this process was given are recorded at once for the others

    # -------------------------------------------------------------- roots
    def configured(self) -> list[str] | None:
        """This process's ``allowed_roots`` (recorded in the data dir for the others), else
        the recorded ones; None when neither says."""
        given = self._settings.allowed_roots
        if given is None:
            return self.recorded.roots()
        given = [str(r) for r in given if str(r).strip()]
        if given != self._written:  # once per value: two processes never take turns writing
            self.recorded.record_roots(given)
            self._written = given
        return given

    def roots(self, kind: str | None = None) -> tuple[str, ...]:
        kind = kind or transport.get()
        configured = self.configured()
        if configured:
            found = [os.path.realpath(os.path.expanduser(r)) for r in configured]
        elif kind == LOCAL:
            found = [os.path.realpath(os.path.expanduser("~"))]
        else:
            found = []
        if kind == LOCAL:
            found += [g["root"] for g in self.recorded.grants() if g["root"] not in found]
        return tuple(found)

    def reaches(self, real: str, kind: str | None = None) -> bool:
        """True when the (already real) path lies under one of the caller's roots."""
        return any(inside(r, real) for r in self.roots(kind))

    def grant(self, real: str, source_id: str) -> None:
        """Record the user's consent to ``real`` (a source's root) in the data dir."""
        self.recorded.grant(real, source_id)

    def revoke(self, source_id: str) -> None:
        self.recorded.revoke(source_id)

    def unreachable(self, root: str, kind: str | None = None) -> tuple[str, str] | None:
        """Why a recorded source cannot be read now: ("policy", message) or ("missing",
        message); None when it can."""
        try:
            self.check_source(root, kind)
        except Forbidden as exc:  # the caller knows the source by name: no path is shown
            return "policy", exc.message.replace(root, "its folder")
        if not os.path.isdir(root):
            return "missing", ("its folder is gone or not mounted; mount or restore it, or "
                               "remove the source")
        return None

    # -------------------------------------------------------------- caller paths
    def source_root(self, path: str | Path, consent: bool = False) -> str:
        """The real path of a folder a caller asks to add as a source, or ``Forbidden``.
        ``consent`` (a local caller registering it: the CLI, the sources tool over stdio)
        lifts the allowed-roots rule; every other rule holds."""
        real = _resolve(path)
        _not_the_fs_root(real, str(path))
        self._check(real, str(path), roots=not (consent and transport.get() == LOCAL))
        return real

    def upload(self, path: str | Path) -> Path:
        """The real path of a file a caller asks to upload, or ``Forbidden``; checked before
        its existence, so a refused path tells nothing about what lies there."""
        real = _resolve(path)
        self._check(real, str(path))
        return Path(real)

    def check_source(self, root: str, kind: str | None = None) -> None:
        """An existing source may still be read: its recorded (real) root still resolves to
        itself (no link was put in its path since) and passes the rules."""
        real = os.path.realpath(root)
        if real != root:
            raise Forbidden(
                f"the source folder {root} no longer resolves to itself (a link was put in "
                "its path); remove the source and add the real folder.",
                path=root,
            )
        _not_the_fs_root(real, root)  # a source recorded before this policy existed
        self._check(real, root, kind)

    def source_ok(self, root: str, kind: str | None = None) -> bool:
        try:
            self.check_source(root, kind)
        except Forbidden:
            return False
        return True

    def open_upload(self, real: Path) -> BinaryIO:
        """Open a checked upload for reading, refusing what changed under the check: the
        last component turned into a link (O_NOFOLLOW), a folder on the way swapped for a
        link (the open file's path is compared again), a non-regular file (a FIFO is opened
        non-blocking, so it cannot hang the call) or a special filesystem's file."""
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(real, flags | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise Forbidden(
                f"cannot open {real} as a plain file ({exc.strerror}); pass a regular file.",
                path=str(real),
            ) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise InvalidArgument(
                    f"{real} is not a regular file; pass a document, not a folder or device",
                    path=str(real),
                )
            opened = _fd_path(fd)
            if special_filesystems(fresh=True).holds_device(st.st_dev) or (
                opened is not None and opened != str(real)
            ):
                raise Forbidden(f"{real} changed while it was being opened; try again.")
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    # -------------------------------------------------------------- the rules
    def _check(self, real: str, given: str, kind: str | None = None, roots: bool = True) -> None:
        special = special_filesystems(fresh=True)
        if special.holds_path(real) or _on_special_device(real, special):
            raise Forbidden(
                f"{given} is on a special filesystem (/proc, /sys, /dev or a mount of one); "
                "the brain never reads those.",
                path=given,
            )
        if inside(self._data_dir, real):
            raise Forbidden(
                f"{given} is inside the brain's own data dir ({self._data_dir}), which holds "
                "its tokens and store; pick a project folder.",
                path=given,
            )
        if not roots:
            return
        kind = kind or transport.get()
        allowed = self.roots(kind)
        if not any(inside(r, real) for r in allowed):
            who = "HTTP callers" if kind == HTTP else "local callers"
            shown = ", ".join(allowed) if allowed else "none configured"
            raise Forbidden(
                f"{given} is outside the folders {who} may reach ({shown}); {hint(kind)}.",
                path=given,
                allowed_roots=list(allowed),
            )


def _resolve(path: str | Path) -> str:
    raw = str(path)
    expanded = os.path.expanduser(raw)
    if not os.path.isabs(expanded):
        raise Forbidden(
            f"{raw} is a relative path; pass an absolute path (the server's working "
            "directory is not the caller's).",
            path=raw,
        )
    return real_path(expanded)


def real_path(path: str | Path) -> str:
    """``os.path.realpath``, with a typed error for what the OS cannot take as a path."""
    try:
        encoded = os.fsencode(path)
    except UnicodeError:
        raise InvalidArgument("the path is not valid text (a lone surrogate?).") from None
    if b"\0" in encoded:
        raise InvalidArgument("the path holds a NUL byte; pass a real file or folder path.")
    if len(encoded) >= _PATH_MAX or any(len(p) > _NAME_MAX for p in encoded.split(b"/")):
        raise InvalidArgument(
            f"the path is too long (at most {_PATH_MAX - 1} bytes, {_NAME_MAX} per name)."
        )
    return os.path.realpath(path)


def _not_the_fs_root(real: str, given: str) -> None:
    if real == os.sep:
        raise Forbidden(
            "the filesystem root / is never a source; add a project folder instead.",
            path=given,
        )


def _on_special_device(real: str, special: SpecialFs) -> bool:
    try:
        return special.holds_device(os.stat(real).st_dev)
    except OSError:
        return False  # nothing there (yet): the path rules above already judged it


def _fd_path(fd: int) -> str | None:
    """The path the kernel holds for an open file (Linux), None where it cannot tell."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
