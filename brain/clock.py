"""Time as a dependency: workers and decay read ``Clock.now()`` so tests can move it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class Clock:
    """Wall clock in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock(Clock):
    """A clock tests set and advance by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, **kwargs: float) -> datetime:
        with self._lock:
            self._now += timedelta(**kwargs)
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_iso(value: str) -> datetime | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
