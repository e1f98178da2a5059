"""One owner per data dir: the process that holds the store, elected by a file lock.

Qdrant Edge admits one open shard per directory, so exactly one process (the *owner*) opens
the Brain of a data dir; its background work (watchers, queues, workers) therefore runs once.
Other servers on the same dir forward their calls to the owner over a Unix socket and take
over when it dies. This module holds the parts without MCP: the lock, the per-home tokens,
``owner.json``, the owner history, and request ids that make a retried write idempotent.

Files under ``<home>``:

- ``owner.lock``   flock held by the owner for its whole life (the kernel frees it on death)
- ``owner.json``   ``{pid, address, started, kind}`` of the current owner
- ``owner.sock``   the owner's status endpoint (HTTP); ``owner.calls.sock`` its call channel
- ``owner.token``  bearer token of the owner's sibling endpoint, 0600, new at each election
- ``owner.log``    one line per Brain opened by an owner (history; tests count it)
- ``http.token``   bearer token of ``brain serve --http`` (0600, made on first use)
- ``tokens.json``  optional per-caller HTTP tokens: ``{sha256(token): {user_id, agent_id}}``
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.errors import ConfigError, InvalidArgument, StoreLocked
from brain.private import fsync_dir

if TYPE_CHECKING:  # the brain these functions serve is built above them, in app.py
    from brain.app import Brain
from brain.store.stamping import REQUEST_FIELD, RequestStampingStore, current_request
from brain.trust.identity import Identity
from brain.vector_store import Filter, Match

LOCK_FILE = "owner.lock"
INFO_FILE = "owner.json"
TOKEN_FILE = "owner.token"
HISTORY_FILE = "owner.log"
HTTP_TOKEN_FILE = "http.token"
TOKENS_FILE = "tokens.json"
SOCKET_FILE = "owner.sock"
_SUN_PATH_MAX = 100  # AF_UNIX paths are capped near 108 bytes; keep a margin


# ------------------------------------------------------------------------------ files
def _write_private(path: Path, text: str) -> None:
    """Write ``text`` atomically with 0600 permissions (temp file in the same dir + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())  # a crash after the rename leaves the whole file, not a cut
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed child stays a zombie until reaped, yet it holds nothing any more
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# ------------------------------------------------------------------------------ the lock
class OwnerLock:
    """``flock`` on ``<home>/owner.lock``: held means this process owns the data dir."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.path = self.home / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


# ------------------------------------------------------------------------------ owner.json
@dataclass(frozen=True, slots=True)
class OwnerInfo:
    pid: int
    address: str  # Unix socket path of the sibling endpoint; "" when it serves none (CLI)
    started: str
    kind: str = "stdio"  # stdio | http | cli

    @property
    def alive(self) -> bool:
        return pid_alive(self.pid)


def read_info(home: Path) -> OwnerInfo | None:
    try:
        data = json.loads((Path(home) / INFO_FILE).read_text(encoding="utf-8"))
        return OwnerInfo(
            int(data["pid"]),
            str(data.get("address", "")),
            str(data.get("started", "")),
            str(data.get("kind", "stdio")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_info(home: Path, info: OwnerInfo) -> None:
    _write_private(Path(home) / INFO_FILE, json.dumps(asdict(info)))


def clear_info(home: Path, pid: int) -> None:
    """Remove owner.json if it still names ``pid`` (never another owner's)."""
    info = read_info(home)
    if info is not None and info.pid == pid:
        with contextlib.suppress(OSError):
            (Path(home) / INFO_FILE).unlink()


def record_open(home: Path, kind: str) -> None:
    """Append to the owner history: who opened the Brain of this data dir, and when."""
    with open(Path(home) / HISTORY_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "kind": kind, "at": now_iso()}) + "\n")


def held_message(home: Path) -> str:
    info = read_info(home)
    if info is not None and info.alive:
        what = "the brain CLI" if info.kind == "cli" else f"a {info.kind} server"
        return (
            f"the brain at {home} is served by pid {info.pid} ({what}); stop it or retry "
            "(MCP servers and brain commands share a running server; a command that opened the "
            "brain itself holds it until it ends)"
        )
    return f"the brain at {home} is in use by another process; stop it or retry"


@contextlib.contextmanager
def exclusive(home: Path, kind: str = "cli") -> Iterator[OwnerLock]:
    """Hold the data dir for a one-shot command, or raise ``StoreLocked`` saying who has it."""
    lock = OwnerLock(home)
    if not lock.try_acquire():
        raise StoreLocked(held_message(home), path=str(home))
    try:
        write_info(home, OwnerInfo(os.getpid(), "", now_iso(), kind))
        yield lock
    finally:
        clear_info(home, os.getpid())
        lock.release()


# ------------------------------------------------------------------------------ tokens
def new_owner_token(home: Path) -> str:
    token = secrets.token_urlsafe(32)
    _write_private(Path(home) / TOKEN_FILE, token)
    return token


def read_owner_token(home: Path) -> str | None:
    try:
        return (Path(home) / TOKEN_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def http_token(home: Path) -> tuple[str, Path, bool]:
    """The home HTTP token, made (0600) on first use: ``(token, path, created)``."""
    path = Path(home) / HTTP_TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token, path, False
    except OSError:
        pass
    token = secrets.token_urlsafe(32)
    _write_private(path, token)
    return token, path, True


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_tokens(home: Path) -> dict[str, Identity]:
    """Per-caller HTTP tokens: sha256 digest -> identity (the file never holds a token).
    A damaged file (cut short, bytes flipped, not the expected shape) is CONFIG_INVALID
    naming it and the way back; nothing is changed."""
    path = Path(home) / TOKENS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(d): Identity(str(v["user_id"]), str(v["agent_id"]))
                for d, v in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"{path} is damaged or not a tokens file ({type(exc).__name__}: {exc}); the "
            "per-caller HTTP tokens cannot be checked, so they are refused (the home token "
            "in http.token still works). Restore the file from a backup, or move it aside "
            "and give each caller a new token with `brain token add --user U --agent A`.",
            path=str(path),
        ) from None


def add_token(home: Path, user_id: str, agent_id: str) -> str:
    """Make a token for one caller identity; only its digest is stored. Returns the token."""
    for name, value in (("user_id", user_id), ("agent_id", agent_id)):
        if not value or not value.strip() or len(value) > 128:
            raise InvalidArgument(
                f"{name} must be a non-empty id of at most 128 characters", field=name
            )
    tokens = load_tokens(home)
    token = secrets.token_urlsafe(32)
    tokens[token_digest(token)] = Identity(user_id.strip(), agent_id.strip())
    data = {d: {"user_id": i.user_id, "agent_id": i.agent_id} for d, i in tokens.items()}
    _write_private(Path(home) / TOKENS_FILE, json.dumps(data, indent=2))
    return token


def same_token(given: str | None, expected: str | None) -> bool:
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def socket_path(home: Path) -> Path:
    """Where the owner listens: ``<home>/owner.sock``, or a short path in /tmp when the data
    dir is too deep for a Unix socket name."""
    path = Path(home).resolve() / SOCKET_FILE
    if len(str(path)) <= _SUN_PATH_MAX:
        return path
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"brain-{os.getuid()}-{digest}.sock"


# ------------------------------------------------------------------------------ request ids
# A forwarded call carries a request id made by the calling process; the store stack stamps
# the notes written meanwhile with it (brain/store/stamping.py, installed by brain/app.py).


def find_request(brain: Brain, request_id: str) -> dict[str, Any] | None:
    """The note written by ``request_id``, if that request was applied."""
    flt = Filter(must=(Match("kind", "note"), Match(REQUEST_FIELD, request_id)))
    points, _ = brain.store.scroll(flt, limit=1)
    return points[0].payload if points else None


__all__ = [
    "OwnerInfo",
    "OwnerLock",
    "RequestStampingStore",
    "add_token",
    "clear_info",
    "current_request",
    "exclusive",
    "find_request",
    "held_message",
    "http_token",
    "load_tokens",
    "new_owner_token",
    "pid_alive",
    "read_info",
    "read_owner_token",
    "record_open",
    "same_token",
    "socket_path",
    "token_digest",
    "write_info",
]
