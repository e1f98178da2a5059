"""What every ``brain`` command shares: a Brain opened for the length of the command, and
JSON on stdout."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.errors import Conflict

if TYPE_CHECKING:
    from brain.process.owner import OwnerInfo


@contextmanager
def open_brain(**overrides: Any) -> Iterator[Any]:
    """A Brain on the configured data dir, closed on exit; config errors exit with code 2.

    Raises ``StoreLocked`` ("served by pid N; stop it or retry") while a server owns it.
    """
    from brain.app import Brain
    from brain.process.logs import setup_logging
    from config import load_settings

    try:
        settings = load_settings(**overrides)
    except ValueError as exc:
        print(f"brain: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    setup_logging(settings.home, settings.log.level)
    from brain.process.owner import exclusive

    # One process owns a data dir; a running server keeps it, and this says so (StoreLocked).
    with exclusive(settings.home, "cli"):
        brain = Brain(settings).open()
        try:
            yield brain
        finally:
            brain.close()


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def running_owner(home: Path) -> tuple[OwnerInfo, str] | None:
    """The live server that owns ``home`` and its owner token, or None when none runs."""
    from brain.process import owner as own

    info = own.read_info(home)
    token = own.read_owner_token(home)
    if info is not None and info.alive and info.address and token:
        return info, token
    return None


def ask_owner(owner: tuple[OwnerInfo, str], route: str, body: dict[str, Any],
              timeout_s: float | None = 120.0) -> dict[str, Any]:
    """POST ``body`` to ``route`` of the owner's status endpoint (owner token only); a
    refusal raises Conflict carrying the owner's error code and message."""
    import httpx

    info, token = owner
    transport = httpx.HTTPTransport(uds=info.address)
    with httpx.Client(transport=transport, timeout=timeout_s) as http:
        res = http.post(f"http://localhost{route}", json=body,
                        headers={"Authorization": f"Bearer {token}"})
        data: dict[str, Any] = res.json()
        if res.status_code == 409:
            raise Conflict(f"[{data.get('error')}] {data.get('message')}")
        res.raise_for_status()
        return data
