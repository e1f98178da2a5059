"""One hook run: read the client's JSON on stdin, reach the brain, print what to inject.

Standard library only (a hook must start fast). The brain is reached as a short-lived client
of the owner's call channel (mcp_surface/owner_rpc.py: a token handshake, then one JSON frame
per call). With no owner on the data dir, writes go to the spool instead. Whatever happens
(no owner, a slow owner, bad input, a bug) the hook exits 0 within its deadline and prints
nothing it has not finished; the reason goes to ``<home>/hooks.log``.
"""

from __future__ import annotations

import _signal  # signal.py builds enums at import (enum, functools: ~6 ms of a hook's start)
import fcntl
import os
import time

from brain.hooks import wire

# typing, collections.abc and contextlib cost a hook's start ~10 ms; annotations are strings
# here, and the two context managers below are plain classes.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from os import PathLike
    from types import TracebackType

    Path = str | PathLike[str]  # a data dir or file: a str or a pathlib.Path
    from typing import Any

SPOOL_FILE = "hooks.spool.jsonl"
STATE_FILE = "hooks.state.json"
LOG_FILE = "hooks.log"
MAX_STDIN = 4 * 1024 * 1024  # a hook payload is small; a transcript is read from its path
MAX_SPOOL = 8 * 1024 * 1024  # past this the spool takes nothing more (logged)
MAX_LOG = 1024 * 1024


class Deadline(Exception):
    """The hook ran out of time."""


class NoOwner(Exception):
    """No server owns the data dir (or its call channel cannot be reached)."""


class CallFailed(Exception):
    """The owner answered with an error."""


# ------------------------------------------------------------------------------ files
def _append_private(path: Path, line: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def log(home: Path, event: str, reason: str) -> None:
    """One line per hook that did not do its job; never the payload (it may hold secrets)."""
    try:
        path = os.path.join(home, LOG_FILE)
        if os.path.exists(path) and os.stat(path).st_size > MAX_LOG:
            os.replace(path, path + ".1")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        _append_private(path, f"{stamp} pid={os.getpid()} {event}: {reason[:300]}\n")
    except OSError:
        pass


class state:  # noqa: N801 - used as a function: ``with state(home) as st``
    """The hooks' small memory between runs (failed command shapes waiting for their fix,
    the last handoff per session), read and written under an exclusive lock. Written back
    only when the block changed it and ended without an exception."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.fd = -1
        self.data: dict[str, Any] = {}
        self.before = ""

    def __enter__(self) -> dict[str, Any]:
        os.makedirs(self.home, exist_ok=True)
        self.fd = os.open(os.path.join(self.home, STATE_FILE), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            raw = b""
            while chunk := os.read(self.fd, 1 << 16):
                raw += chunk
            try:
                data = wire.loads(raw) if raw.strip() else {}
            except ValueError:
                data = {}
        except BaseException:
            os.close(self.fd)
            raise
        self.data = data if isinstance(data, dict) else {}
        self.before = wire.dumps(self.data, sort_keys=True)
        return self.data

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None:
                after = wire.dumps(self.data, sort_keys=True)
                if after != self.before:
                    os.lseek(self.fd, 0, os.SEEK_SET)
                    os.ftruncate(self.fd, 0)
                    os.write(self.fd, after.encode("utf-8"))
        finally:
            os.close(self.fd)


def _redacted(value: Any) -> Any:
    """Every string in a spooled call, through the brain's redaction: the spool is at rest."""
    from brain.trust.redact import redact  # stdlib-only module; imported only when spooling

    if isinstance(value, str):
        return redact(value).text
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    return value


def spool(home: Path, entry: dict[str, Any]) -> None:
    path = os.path.join(home, SPOOL_FILE)
    if os.path.exists(path) and os.stat(path).st_size > MAX_SPOOL:
        raise OSError(f"spool full ({MAX_SPOOL} bytes): start a server to drain it")
    entry = {**_redacted(entry), "at": time.time()}
    _append_private(path, wire.dumps(entry) + "\n")


# ------------------------------------------------------------------------------ the owner
def _calls_path(address: str) -> str:
    stem, suffix = os.path.splitext(address)  # next to owner.sock: owner.calls.sock
    return f"{stem}.calls{suffix}"


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


class Owner:
    """A one-call-at-a-time client of the owner's call channel."""

    def __init__(self, home: Path, caller: dict[str, str]) -> None:
        self.home = home
        self.caller = caller
        self._sock: Any = None  # a _socket.socket
        self._buf = b""
        self._next = 0

    def _connect(self) -> Any:
        # _socket, not socket: socket.py builds enums and imports selectors (~5 ms).
        import _socket

        try:
            info = wire.loads(_read(os.path.join(self.home, "owner.json")))
            token = _read(os.path.join(self.home, "owner.token")).strip()
            address, pid = str(info.get("address") or ""), int(info.get("pid") or 0)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise NoOwner(f"no owner.json/owner.token ({type(exc).__name__})") from None
        if not address or not token or not _alive(pid):
            raise NoOwner("no live owner serving calls")
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.connect(_calls_path(address))
            self._sock = sock
            self._send({"token": token, "pid": os.getpid()})
            if not self._read().get("ok"):
                raise NoOwner("the owner refused the token")
        except OSError as exc:
            sock.close()
            self._sock = None
            raise NoOwner(f"cannot reach the owner: {type(exc).__name__}") from None
        return sock

    def _send(self, frame: dict[str, Any]) -> None:
        assert self._sock is not None
        self._sock.sendall(wire.dumps(frame).encode() + b"\n")

    def _read(self) -> dict[str, Any]:
        assert self._sock is not None
        while b"\n" not in self._buf:
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                raise NoOwner("the owner closed the channel")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        frame = wire.loads(line)
        return frame if isinstance(frame, dict) else {}

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """The tool's structured result; CallFailed when the tool said no."""
        if self._sock is None:
            self._connect()
        self._next += 1
        rid = self._next
        self._send(
            {
                "id": rid,
                "name": name,
                "args": args,
                "caller": self.caller,
                "transport": "local",  # a hook is a local process: brain/trust/paths.py's local policy
                "request_id": os.urandom(16).hex(),
                "retry": False,
            }
        )
        while True:
            frame = self._read()
            if frame.get("id") == rid:
                break
        if "error" in frame:
            raise CallFailed(str(frame["error"])[:300])
        result = frame.get("result") or {}
        if result.get("isError"):
            text = " ".join(c.get("text", "") for c in result.get("content") or [])
            raise CallFailed(text[:300] or "tool error")
        out = result.get("structuredContent")
        return out if isinstance(out, dict) else {}

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None


# ------------------------------------------------------------------------------ deadline
class deadline:  # noqa: N801 - used as a function: ``with deadline(seconds)``
    """Raise Deadline in this (single-threaded) process after ``seconds``, wherever it is:
    blocked on a socket, reading a transcript, or in a loop."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.old: Any = None

    def _fire(self, _sig: int, _frame: Any) -> None:
        raise Deadline(f"deadline of {self.seconds:.2f} s passed")

    def __enter__(self) -> None:
        self.old = _signal.signal(_signal.SIGALRM, self._fire)
        _signal.setitimer(_signal.ITIMER_REAL, max(self.seconds, 0.001))

    def __exit__(self, *exc: object) -> None:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        _signal.signal(_signal.SIGALRM, self.old)
