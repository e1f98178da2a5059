"""The path policy kept in the data dir, so every process on one brain reads the same roots.

``<home>/policy.json`` holds two things:

- ``allowed_roots``: the ``[paths] allowed_roots`` a process was last given (environment,
  .env or brain.toml). A process given none reads this one, so a server started with no
  extra environment agrees with the shell that set it; null when no process ever set it.
- ``granted``: folders the user consented to by registering a source there from the CLI
  (``brain source add``) or the ``sources`` tool over stdio, one per source. They open that
  folder to local callers (never to HTTP ones) and go when their source is removed.

Writes are atomic (a temp file renamed over) under an flock, so two processes never lose
each other's grant. A file that cannot be read counts as empty: it never widens anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FILE = "policy.json"
_LOCK = "policy.lock"


class RecordedPolicy:
    """Reads and writes ``<home>/policy.json``; a read is cached until the file changes."""

    def __init__(self, home: Path) -> None:
        self.path = Path(home) / FILE
        self._mutex = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._data: dict[str, Any] = {}
        self._warned = False

    # ------------------------------------------------------------------ reading
    def data(self) -> dict[str, Any]:
        try:
            st = self.path.stat()
        except OSError:
            return {}
        key = (st.st_mtime_ns, st.st_size)
        with self._mutex:
            if key != self._seen:
                self._data, self._seen = self._load(), key
            return self._data

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not an object")
            return data
        except (OSError, ValueError) as exc:
            if not self._warned:
                self._warned = True
                log.warning("policy.unreadable path=%s error=%s: read as empty", self.path, exc)
            return {}

    def roots(self) -> list[str] | None:
        roots = self.data().get("allowed_roots")
        if not isinstance(roots, list):
            return None
        return [r for r in roots if isinstance(r, str) and r.strip()]

    def grants(self) -> list[dict[str, str]]:
        found = self.data().get("granted")
        if not isinstance(found, list):
            return []
        return [g for g in found if isinstance(g, dict) and isinstance(g.get("root"), str)]

    # ------------------------------------------------------------------ writing
    def record_roots(self, roots: list[str]) -> None:
        if self.roots() == roots:
            return
        with self._edit() as data:
            data["allowed_roots"] = list(roots)

    def grant(self, root: str, source_id: str) -> None:
        with self._edit() as data:
            kept = [g for g in data.get("granted") or [] if g.get("source_id") != source_id]
            kept.append({"root": root, "source_id": source_id,
                         "at": datetime.now(UTC).isoformat(timespec="seconds")})
            data["granted"] = kept

    def revoke(self, source_id: str) -> None:
        if not any(g.get("source_id") == source_id for g in self.grants()):
            return
        with self._edit() as data:
            data["granted"] = [g for g in data.get("granted") or []
                               if g.get("source_id") != source_id]

    @contextlib.contextmanager
    def _edit(self) -> Iterator[dict[str, Any]]:
        """Read-modify-write under an flock; a data dir that cannot be written is logged and
        left as it is (the process still applies its own settings)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = os.open(self.path.parent / _LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            log.warning("policy.unwritable path=%s error=%s", self.path, exc)
            yield {}
            return
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._load() if self.path.exists() else {}
            data.setdefault("version", 1)
            yield data
            tmp = self.path.with_name(f".{FILE}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("policy.unwritable path=%s error=%s", self.path, exc)
        finally:
            os.close(lock)
