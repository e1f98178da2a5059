"""What the start and a background watch check on a Qdrant server (seed 000, "Qdrant does
not log its own background optimization"), over its REST API:

- the version: ``GET /`` answers ``{"title", "version", "commit"}``; the start compares it with
  the qdrant-client it ships and warns when they are more than one minor version apart (or of
  another major version), since the client's calls may then mean something else;
- the optimizer runs: every ``interval_s`` (30 s) ``GET /collections/{name}/optimizations
  ?with=completed`` (Qdrant 1.17+) lists the collection's finished runs; each run not seen
  before is written as one ``vector.optimizer.completed`` log line (kind, points, segments, the
  duration the server measured, its status), and a run still going after ``warn_after_s``
  (ten minutes) gets one warning. The runs already finished at the first poll are the
  baseline, not news. A server without the endpoint (404) is said once and not asked again.

Both are reports: a failure is logged, never raised into the start or a tool call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any
from urllib.parse import quote

from brain.http_json import get_json

log = logging.getLogger(__name__)

OPTIMIZER_LOG = "vector.optimizer.completed"
_SEEN_MAX = 4096  # uuids of runs already reported (bounded memory)


def client_version() -> str:
    try:
        return metadata.version("qdrant-client")
    except metadata.PackageNotFoundError:
        return ""


def _parts(version: str) -> tuple[int, int] | None:
    bits = version.lstrip("v").split(".")
    try:
        return int(bits[0]), int(bits[1])
    except (IndexError, ValueError):
        return None


def version_gap(server: str, client: str) -> str | None:
    """Why ``server`` and ``client`` are too far apart (more than one minor version, or
    another major), or None when they are close enough (or either is unknown)."""
    s, c = _parts(server), _parts(client)
    if s is None or c is None:
        return None
    if s[0] != c[0]:
        return f"major versions differ ({s[0]} vs {c[0]})"
    if abs(s[1] - c[1]) > 1:
        return f"{abs(s[1] - c[1])} minor versions apart"
    return None


def _headers(api_key: str) -> dict[str, str]:
    return {"api-key": api_key} if api_key else {}


def check_version(url: str, api_key: str = "", timeout_s: float = 5.0,
                  client: str | None = None) -> dict[str, Any]:
    """The server's version against the client's; logs a warning when they are too far apart.
    Returns ``{server_version, client_version, version_warning}`` (never raises)."""
    client = client_version() if client is None else client
    out: dict[str, Any] = {"server_version": None, "client_version": client or None,
                           "version_warning": None}
    try:
        reply = get_json(url.rstrip("/") + "/", _headers(api_key), timeout_s)
        server = str(reply.json().get("version", "")) if reply.status == 200 else ""
    except Exception as exc:  # noqa: BLE001 - a report: the store's own calls say more
        log.info("Qdrant server %s: version not read (%s)", url, type(exc).__name__)
        return out
    out["server_version"] = server or None
    gap = version_gap(server, client)
    if gap:
        out["version_warning"] = (
            f"Qdrant server {server} and qdrant-client {client} are {gap}; upgrade one so "
            "they are at most one minor version apart")
        log.warning("%s", out["version_warning"])
    return out


@dataclass(frozen=True, slots=True)
class OptimizerRun:
    uuid: str
    kind: str
    status: str
    points: int
    segments: int
    duration_s: float | None
    started_at: str | None

    @classmethod
    def of(cls, item: dict[str, Any]) -> OptimizerRun:
        progress = item.get("progress") or {}
        segments = item.get("segments") or []
        status = item.get("status")
        if isinstance(status, dict):  # {"error": "..."} / {"cancelled": "..."}
            status = next(iter(status), "unknown")
        return cls(uuid=str(item.get("uuid", "")), kind=str(item.get("optimizer", "")),
                   status=str(status or "unknown"),
                   points=sum(int(s.get("points_count", 0) or 0) for s in segments),
                   segments=len(segments),
                   duration_s=progress.get("duration_sec"),
                   started_at=progress.get("started_at"))


@dataclass
class OptimizerWatch:
    """Polls the collection's optimizer runs and logs each finished one (see the module)."""

    url: str
    collection: Callable[[], str]  # the live generation's collection, read at each poll
    api_key: str = ""
    interval_s: float = 30.0
    warn_after_s: float = 600.0
    timeout_s: float = 5.0
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    completed_limit: int = 64
    reported: int = 0
    supported: bool = True
    _seen: dict[str, None] = field(default_factory=dict)
    _warned: set[str] = field(default_factory=set)
    _baseline: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def poll(self) -> list[OptimizerRun]:
        """One read of the server's list; returns the runs newly reported as finished."""
        if not self.supported:
            return []
        name = self.collection()
        url = (f"{self.url.rstrip('/')}/collections/{quote(name, safe='')}/optimizations"
               f"?with=completed&completed_limit={self.completed_limit}")
        try:
            reply = get_json(url, _headers(self.api_key), self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - tried again at the next poll
            log.info("Qdrant optimizer runs of %s not read: %s", name, type(exc).__name__)
            return []
        if reply.status == 404:
            self.supported = False
            log.info("Qdrant server %s lists no optimizer runs (before 1.17?): not reported",
                     self.url)
            return []
        if reply.status != 200:
            log.info("Qdrant optimizer runs of %s: HTTP %d", name, reply.status)
            return []
        try:
            result = reply.json().get("result") or {}
            done = [OptimizerRun.of(i) for i in result.get("completed") or []]
            running = [OptimizerRun.of(i) for i in result.get("running") or []]
        except (ValueError, AttributeError, TypeError):
            log.info("Qdrant optimizer runs of %s: an answer of another shape", name)
            return []
        new = [r for r in done if r.uuid not in self._seen]
        for r in new:
            self._remember(r.uuid)
        if not self._baseline:  # finished before we looked: not news
            self._baseline = True
            new = []
        for r in new:
            self.reported += 1
            log.info("%s collection=%s kind=%s status=%s points=%d segments=%d duration_s=%s",
                     OPTIMIZER_LOG, name, r.kind, r.status, r.points, r.segments,
                     f"{r.duration_s:.3f}" if r.duration_s is not None else "?")
        self._warn_long(name, running)
        return new

    def _remember(self, uuid: str) -> None:
        self._seen[uuid] = None
        while len(self._seen) > _SEEN_MAX:
            self._seen.pop(next(iter(self._seen)))

    def _warn_long(self, name: str, running: list[OptimizerRun]) -> None:
        now = self.now()
        for r in running:
            if r.uuid in self._warned or not r.started_at:
                continue
            try:
                started = datetime.fromisoformat(r.started_at.replace("Z", "+00:00"))
                age = (now.astimezone(started.tzinfo) - started).total_seconds()
            except (ValueError, TypeError):
                continue
            if age >= self.warn_after_s:
                self._warned.add(r.uuid)
                log.warning("Qdrant optimizer run %s (%s, %d points) on %s is still going after "
                            "%.0f s", r.uuid, r.kind, r.points, name, age)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="qdrant-optimizer-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 1)
            self._thread = None

    def _loop(self) -> None:
        while True:
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a report never stops the process
                log.exception("Qdrant optimizer watch failed")
            if self._stop.wait(self.interval_s):
                return


def at_start(qdrant: Any, collection: Callable[[], str]) -> tuple[dict[str, Any], OptimizerWatch]:
    """The start's checks of a reachable server (``qdrant``: the ``[qdrant]`` settings): the
    version report, and the optimizer watch to start with the background work."""
    report = check_version(qdrant.url, qdrant.api_key)
    watch = OptimizerWatch(qdrant.url, collection, api_key=qdrant.api_key,
                           interval_s=qdrant.optimizer_poll_s,
                           warn_after_s=qdrant.optimizer_warn_after_s)
    return report, watch
