"""One hook run: read the client's JSON on stdin, reach the brain, print what to inject.

Standard library only (a hook must start fast). The brain is reached as a short-lived client
of the owner's call channel (mcp_surface/owner_rpc.py: a token handshake, then one JSON frame
per call). With no owner on the data dir, writes go to the spool instead. Whatever happens
(no owner, a slow owner, bad input, a bug) the hook exits 0 within its deadline and prints
nothing it has not finished; the reason goes to ``<home>/hooks.log``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time

# typing and collections.abc cost a hook's start ~10 ms; annotations are strings here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from os import PathLike

    Path = str | PathLike[str]  # a data dir or file: a str or a pathlib.Path
    from collections.abc import Iterator
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
    with contextlib.suppress(OSError):
        path = os.path.join(home, LOG_FILE)
        if os.path.exists(path) and os.stat(path).st_size > MAX_LOG:
            os.replace(path, path + ".1")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        _append_private(path, f"{stamp} pid={os.getpid()} {event}: {reason[:300]}\n")


@contextlib.contextmanager
def state(home: Path) -> Iterator[dict[str, Any]]:
    """The hooks' small memory between runs (failed command shapes waiting for their fix,
    the last handoff per session), read and written under an exclusive lock."""
    os.makedirs(home, exist_ok=True)
    path = os.path.join(home, STATE_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = b""
        while chunk := os.read(fd, 1 << 16):
            raw += chunk
        try:
            data = json.loads(raw) if raw.strip() else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        before = json.dumps(data, sort_keys=True)
        yield data
        after = json.dumps(data, sort_keys=True)
        if after != before:
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, after.encode("utf-8"))
    finally:
        os.close(fd)


def _redacted(value: Any) -> Any:
    """Every string in a spooled call, through the brain's redaction: the spool is at rest."""
    from brain.redact import redact  # stdlib-only module; imported only when spooling

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
    _append_private(path, json.dumps(entry, separators=(",", ":")) + "\n")


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
        self._sock: socket.socket | None = None
        self._buf = b""
        self._next = 0

    def _connect(self) -> socket.socket:
        import socket  # only a run that calls the owner pays for it

        try:
            info = json.loads(_read(os.path.join(self.home, "owner.json")))
            token = _read(os.path.join(self.home, "owner.token")).strip()
            address, pid = str(info.get("address") or ""), int(info.get("pid") or 0)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise NoOwner(f"no owner.json/owner.token ({type(exc).__name__})") from None
        if not address or not token or not _alive(pid):
            raise NoOwner("no live owner serving calls")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
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
        self._sock.sendall(json.dumps(frame, separators=(",", ":")).encode() + b"\n")

    def _read(self) -> dict[str, Any]:
        assert self._sock is not None
        while b"\n" not in self._buf:
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                raise NoOwner("the owner closed the channel")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        frame = json.loads(line)
        return frame if isinstance(frame, dict) else {}

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """The tool's structured result; CallFailed when the tool said no."""
        if self._sock is None:
            self._connect()
        self._next += 1
        rid = self._next
        self._send(
            {"id": rid, "name": name, "args": args, "caller": self.caller,
             "transport": "local",  # a hook is a local process: brain/paths.py's local policy
             "request_id": os.urandom(16).hex(), "retry": False}
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
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None


# ------------------------------------------------------------------------------ deadline
@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise Deadline in this (single-threaded) process after ``seconds``, wherever it is:
    blocked on a socket, reading a transcript, or in a loop."""

    def fire(_sig: int, _frame: Any) -> None:
        raise Deadline(f"deadline of {seconds:.2f} s passed")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
