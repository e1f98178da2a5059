"""OS-level watching of ``auto`` sources with ``watchfiles``, in one background thread.

Events under pruned directories (node_modules, .git, the floor, user excludes) are dropped
by the watch filter. After the debounce, the touched paths of each source go to
``on_changes(source_id, rels, full=False)``; a watcher error (lost events, an overflowing
OS queue, a vanished root) calls ``on_changes(source_id, set(), full=True)`` for every
watched source, so the index falls back to a full reconcile rather than trusting the stream.
Events reached through a symlinked folder (the OS watcher follows links) are dropped.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from brain.sources.filters import SourceFilter

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Watched:
    source_id: str
    root: str  # realpath
    flt: SourceFilter


OnChanges = Callable[[str, set[str], bool], None]


class SourceWatcher:
    def __init__(
        self, roots: Callable[[], list[Watched]], on_changes: OnChanges, debounce_ms: int = 300
    ) -> None:
        self._roots = roots
        self._on_changes = on_changes
        self._debounce_ms = max(1, debounce_ms)
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._thread: threading.Thread | None = None
        self._excluded: dict[tuple[str, str], bool] = {}

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="source-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._restart.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def refresh(self) -> None:
        """The set of watched sources changed: restart the watch."""
        self._excluded.clear()
        self._restart.set()

    # -- internals -------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            self._restart.clear()
            watched = [w for w in self._roots() if os.path.isdir(w.root)]
            if not watched:
                self._restart.wait(1.0)
                continue
            try:
                self._watch(watched)
            except Exception:  # noqa: BLE001 - any watcher failure means a full reconcile
                log.exception("source watcher failed; falling back to a full reconcile")
                for w in watched:
                    self._on_changes(w.source_id, set(), True)
                self._stop.wait(1.0)

    def _watch(self, watched: list[Watched]) -> None:
        import watchfiles

        ordered = sorted(watched, key=lambda w: len(w.root), reverse=True)

        def owner(path: str) -> tuple[Watched, str] | None:
            for w in ordered:
                if path == w.root or path.startswith(w.root + os.sep):
                    return w, os.path.relpath(path, w.root).replace(os.sep, "/")
            return None

        def keep(_change: watchfiles.Change, path: str) -> bool:
            found = owner(path)
            return (
                found is not None
                and not self._pruned(found[0], found[1])
                and _through_folders(found[0].root, found[1])
            )

        stop = _Either(self._stop, self._restart)
        for changes in watchfiles.watch(
            *[w.root for w in watched],
            watch_filter=keep,
            debounce=self._debounce_ms,
            step=20,
            stop_event=stop,
            rust_timeout=500,
            yield_on_timeout=False,
            raise_interrupt=False,
            ignore_permission_denied=True,
        ):
            per_source: dict[str, set[str]] = {}
            for _change, path in changes:
                found = owner(path)
                if found is not None and found[1] != ".":
                    per_source.setdefault(found[0].source_id, set()).add(found[1])
            for source_id, rels in per_source.items():
                self._on_changes(source_id, rels, False)

    def _pruned(self, w: Watched, rel: str) -> bool:
        """True when the path lies under a directory the source never indexes."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            key = (w.source_id, prefix)
            hit = self._excluded.get(key)
            if hit is None:
                hit = w.flt.is_excluded_dir(prefix)
                self._excluded[key] = hit
            if hit:
                return True
        return False


def _through_folders(root: str, rel: str) -> bool:
    """True when the event's path reaches its file through real folders only.

    The OS watcher follows a symlinked folder into its target (notify walks links), so it
    reports files of another tree under the link's name; those are dropped here. The file
    itself is judged later (``walker.entry_for``), so that a file replaced by a link out
    still reaches the sync and its old points are deleted."""
    folder = rel.rpartition("/")[0]
    if not folder:
        return True
    return os.path.realpath(os.path.join(root, folder)) == os.path.join(root, folder)


class _Either:
    """An event-like object set when either of two events is (what watchfiles polls)."""

    def __init__(self, a: threading.Event, b: threading.Event) -> None:
        self._a, self._b = a, b

    def is_set(self) -> bool:
        return self._a.is_set() or self._b.is_set()


def realroot(path: str | Path) -> str:
    return os.path.realpath(path)
