"""The Qdrant server checks (seed 000): the version warning at start and the
vector.optimizer.completed log lines, against a loopback stand-in of exactly the two REST
endpoints they read (``GET /`` and ``GET /collections/{name}/optimizations``), since no
Qdrant server runs here. The stand-in answers in the shapes of Qdrant 1.17's API reference."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from brain.vector_store.journal import Probe
from brain.vector_store.server_checks import (
    OPTIMIZER_LOG,
    OptimizerWatch,
    at_start,
    check_version,
    version_gap,
)
from config import QdrantSettings
from tests.timing import HANG_S

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)


class StandIn:
    """``version``: what ``GET /`` reports; ``completed`` / ``running``: the optimizer runs;
    ``optimizations``: False answers 404 (a server before 1.17)."""

    def __init__(self) -> None:
        self.version = "1.20.1"
        self.completed: list[dict[str, Any]] = []
        self.running: list[dict[str, Any]] = []
        self.optimizations = True
        self.seen: list[tuple[str, dict[str, str]]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.path == "/":
                    self._send(200, {"title": "qdrant - vector search engine",
                                     "version": fake.version, "commit": "0" * 40})
                elif self.path.startswith("/collections/brain_g1/optimizations?") and \
                        fake.optimizations:
                    self._send(200, {"result": {
                        "summary": {"queued_optimizations": 0, "queued_segments": 0,
                                    "queued_points": 0, "idle_segments": 3},
                        "running": fake.running, "completed": fake.completed},
                        "status": "ok", "time": 0.0001})
                else:
                    self._send(404, {"status": {"error": "Not found"}})

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def run(uuid: str, optimizer: str = "indexing", status: Any = "done",
        points: tuple[int, ...] = (1200, 800), started: datetime = T0,
        duration: float | None = 4.25) -> dict[str, Any]:
    progress: dict[str, Any] = {"name": "Segment Optimizing", "started_at": started.isoformat()}
    if duration is not None:
        progress |= {"finished_at": (started + timedelta(seconds=duration)).isoformat(),
                     "duration_sec": duration}
    return {"uuid": uuid, "optimizer": optimizer, "status": status,
            "segments": [{"uuid": f"{uuid}-s{i}", "points_count": n}
                         for i, n in enumerate(points)], "progress": progress}


@pytest.fixture
def qdrant() -> Iterator[StandIn]:
    fake = StandIn()
    yield fake
    fake.close()


def test_versions_more_than_one_minor_apart_warn(qdrant: StandIn,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="brain.vector_store.server_checks")
    near = check_version(qdrant.url, "secret-qdrant-key", client="1.20.0")
    assert near == {"server_version": "1.20.1", "client_version": "1.20.0",
                    "version_warning": None}
    assert check_version(qdrant.url, client="1.21.3")["version_warning"] is None  # one minor
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    qdrant.version = "1.17.0"
    far = check_version(qdrant.url, client="1.20.0")
    assert "Qdrant server 1.17.0 and qdrant-client 1.20.0 are 3 minor versions apart" \
        in far["version_warning"]
    assert far["version_warning"] in caplog.text
    qdrant.version = "2.0.0"
    assert "major versions differ" in check_version(qdrant.url, client="1.20.0")[
        "version_warning"]
    assert qdrant.seen[0][1]["api-key"] == "secret-qdrant-key"
    assert "secret-qdrant-key" not in caplog.text


def test_an_unreachable_server_gives_no_version_and_no_error() -> None:
    gone = StandIn()
    gone.close()
    out = check_version(gone.url, client="1.20.0", timeout_s=1.0)
    assert out["server_version"] is None and out["version_warning"] is None


def test_the_gap_rule() -> None:
    assert version_gap("1.12.4", "1.13.0") is None
    assert version_gap("1.14.0", "1.12.9") == "2 minor versions apart"
    assert version_gap("v1.12.0", "1.12.0") is None
    assert version_gap("dev", "1.12.0") is None  # unknown: nothing to say


def test_each_finished_run_is_logged_once_after_the_baseline(
    qdrant: StandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="brain.vector_store.server_checks")
    qdrant.completed = [run("old-1"), run("old-2", "merge")]
    now = [T0 + timedelta(minutes=1)]
    watch = OptimizerWatch(qdrant.url, lambda: "brain_g1", now=lambda: now[0])
    assert watch.poll() == []  # finished before the first look: the baseline
    qdrant.completed = [run("new-1", "merge", points=(300, 200, 100), duration=12.5),
                        *qdrant.completed]
    qdrant.running = [run("slow-1", "vacuum", status="optimizing", duration=None,
                          started=T0)]
    [new] = watch.poll()
    assert (new.kind, new.points, new.segments, new.duration_s) == ("merge", 600, 3, 12.5)
    lines = [r.getMessage() for r in caplog.records if OPTIMIZER_LOG in r.getMessage()]
    assert lines == [f"{OPTIMIZER_LOG} collection=brain_g1 kind=merge status=done points=600 "
                     "segments=3 duration_s=12.500"]
    assert watch.poll() == []  # the same list again: nothing new
    assert "still going" not in caplog.text  # one minute in
    now[0] = T0 + timedelta(minutes=11)
    qdrant.completed.insert(0, run("bad-1", status={"error": "disk full"}, duration=0.5))
    [bad] = watch.poll()
    assert bad.status == "error"
    warnings = [r.getMessage() for r in caplog.records if "still going" in r.getMessage()]
    assert len(warnings) == 1 and "slow-1 (vacuum" in warnings[0]
    watch.poll()
    assert len([r for r in caplog.records if "still going" in r.getMessage()]) == 1  # once
    assert watch.reported == 2
    assert "with=completed" in qdrant.seen[-1][0]


def test_a_server_without_the_endpoint_is_asked_once(qdrant: StandIn) -> None:
    qdrant.optimizations = False
    watch = OptimizerWatch(qdrant.url, lambda: "brain_g1")
    assert watch.poll() == [] and watch.supported is False
    asked = len(qdrant.seen)
    watch.poll()
    assert len(qdrant.seen) == asked


def test_the_start_wires_both_and_the_watch_polls_on_its_interval(
    qdrant: StandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="brain.vector_store.server_checks")
    qdrant.version = "1.10.0"
    settings = QdrantSettings(url=qdrant.url, optimizer_poll_s=0.05)
    report, watch = at_start(settings, lambda: "brain_g1")
    assert report["server_version"] == "1.10.0" and report["version_warning"]
    probe = Probe(qdrant.url, lambda: None)
    probe.server, probe.watch = report, watch
    assert probe.state("qdrant-client")["version_warning"] == report["version_warning"]
    probe.start()
    try:
        time.sleep(0.3)  # the baseline poll, then a few more
        qdrant.completed = [run("live-1", "indexing", points=(5000,), duration=2.0)]
        deadline = time.monotonic() + HANG_S
        while OPTIMIZER_LOG not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        probe.stop()
    assert f"{OPTIMIZER_LOG} collection=brain_g1 kind=indexing status=done points=5000 " \
           "segments=1 duration_s=2.000" in caplog.text
    polls = [p for p, _ in qdrant.seen if "optimizations" in p]
    assert len(polls) >= 3
    stopped = len(qdrant.seen)
    time.sleep(0.2)
    assert len(qdrant.seen) == stopped  # stopped with the probe
