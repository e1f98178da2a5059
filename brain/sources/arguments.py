"""Checks of what a caller passes to the source tools; each bad value gets a typed error."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from brain.errors import InvalidArgument
from brain.sources.registry import TRIGGERS
from brain.trust.limits import MAX_LABEL_CHARS

MIN_INTERVAL_S = 10.0


def check_fields(
    trigger: str, max_scan_files: int | None, interval_s: float | None, name: str
) -> None:
    if trigger not in TRIGGERS:
        raise InvalidArgument(f"trigger must be one of {list(TRIGGERS)}, not {trigger!r}.")
    if not name or len(name) > MAX_LABEL_CHARS or "/" in name:
        raise InvalidArgument(
            f"name must be 1-{MAX_LABEL_CHARS} characters without '/'.", name=name
        )
    if max_scan_files is not None and max_scan_files < 1:
        raise InvalidArgument("max_scan_files must be at least 1 (or null for the default).")
    if interval_s is not None and interval_s < MIN_INTERVAL_S:
        raise InvalidArgument(f"interval_s must be at least {MIN_INTERVAL_S:g} seconds.")


def guard_home(home: Path, root: str, exclude: list[str]) -> list[str]:
    """Add the data dir to the excludes when it lies inside the source: never index it."""
    real_home = os.path.realpath(home)
    if real_home.startswith(root + os.sep):
        pattern = "/" + Path(os.path.relpath(real_home, root)).as_posix() + "/"
        if pattern not in exclude:
            exclude = [*exclude, pattern]
    return exclude


def rel_or_none(root: str, real: Path) -> str | None:
    """``real`` relative to the source root; None for the root itself."""
    rel = Path(os.path.relpath(real, root)).as_posix()
    return None if rel == "." else rel


def parse_ts(value: str | None) -> float | None:
    """Seconds since the epoch of an ISO 8601 date or time (UTC when it names no zone)."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidArgument(
            f"bad date {value!r}: use ISO 8601 like 2026-01-31 or 2026-01-31T12:00:00Z.",
            value=value,
        ) from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()
