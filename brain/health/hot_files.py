"""Hot files: writes counted per source file over a rolling window, a bounded list per project.

The sources indexer calls :meth:`HotFiles.record` each time it writes a file's points. A file
written ``threshold`` times or more within ``window_s`` is hot: the sign of an automated
writer (a build output, a log) that a source should exclude. It is logged once when it turns
hot and listed by :meth:`HotFiles.report`. Each project keeps at most ``max_files`` files (the
least recently written is dropped), and each file at most ``threshold`` timestamps, so memory
is bounded whatever writes.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brain.trust import tenancy
from brain.trust.identity import Identity

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Track:
    owner: dict[str, str]  # user_id, agent_id, visibility of the source (tenancy.visible)
    source_id: str
    path: str
    times: deque[float] = field(default_factory=deque)
    hot_logged: bool = False


class HotFiles:
    def __init__(
        self, now: Callable[[], float], *, threshold: int, window_s: float, max_files: int
    ) -> None:
        self._now = now
        self.threshold = max(1, int(threshold))
        self.window_s = float(window_s)
        self.max_files = max(1, int(max_files))
        self._projects: dict[str, OrderedDict[tuple[str, str], _Track]] = {}
        self._lock = threading.Lock()

    def _trim(self, track: _Track, now: float) -> None:
        while track.times and track.times[0] <= now - self.window_s:
            track.times.popleft()

    def record(self, project: str, source_id: str, path: str, owner: Mapping[str, Any]) -> None:
        """One write of ``path`` of source ``source_id`` (never raises into the writer)."""
        now = self._now()
        key = (source_id, path)
        with self._lock:
            files = self._projects.setdefault(project, OrderedDict())
            track = files.get(key)
            if track is None:
                track = _Track({k: str(owner.get(k, "")) for k in
                                ("user_id", "agent_id", "visibility")}, source_id, path)
                files[key] = track
                while len(files) > self.max_files:
                    files.popitem(last=False)
            files.move_to_end(key)
            self._trim(track, now)
            track.times.append(now)
            while len(track.times) > self.threshold:  # bounded: only "at least threshold" counts
                track.times.popleft()
            hot = len(track.times) >= self.threshold
            turned_hot = hot and not track.hot_logged
            track.hot_logged = hot
        if turned_hot:
            log.warning("hot file: %s (source %s, project %s) written %d times within %.0f s; "
                        "an automated writer? exclude it from the source",
                        path, source_id, project, self.threshold, self.window_s)

    def report(self, who: Identity | None, project: str | None = None) -> dict[str, Any]:
        """Hot files (at or above the threshold) ``who`` may read, per project: the source
        visible to ``who`` and the path outside another agent's agent-core subtree. ``who``
        None: every file (the process's own reports)."""
        now = self._now()
        out: list[dict[str, Any]] = []
        tracked = 0
        with self._lock:
            for proj, files in self._projects.items():
                if project is not None and proj != project:
                    continue
                for track in files.values():
                    # Both read checks a search applies: the source's owner visibility and
                    # the path policy (another agent's private agent-core/<agent>/ subtree).
                    if who is not None and not (tenancy.visible(track.owner, who)
                                                and tenancy.path_readable(track.path, who)):
                        continue
                    self._trim(track, now)
                    tracked += 1
                    if len(track.times) >= self.threshold:
                        out.append({"project": proj, "source_id": track.source_id,
                                    "path": track.path, "writes": len(track.times),
                                    "last_write_ts": track.times[-1]})
        out.sort(key=lambda r: (-r["writes"], r["project"], r["path"]))
        return {"hot_files": out, "count": len(out), "tracked": tracked,
                "threshold": self.threshold, "window_s": self.window_s}
