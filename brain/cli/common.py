"""What every ``brain`` command shares: a Brain opened for the length of the command, and
JSON on stdout."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def open_brain(**overrides: Any) -> Iterator[Any]:
    """A Brain on the configured data dir, closed on exit; config errors exit with code 2.

    Raises ``StoreLocked`` ("served by pid N; stop it or retry") while a server owns it.
    """
    from brain.app import Brain
    from brain.logs import setup_logging
    from config import load_settings

    try:
        settings = load_settings(**overrides)
    except ValueError as exc:
        print(f"brain: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    setup_logging(settings.home, settings.log.level)
    from brain.owner import exclusive

    # One process owns a data dir; a running server keeps it, and this says so (StoreLocked).
    with exclusive(settings.home, "cli"):
        brain = Brain(settings).open()
        try:
            yield brain
        finally:
            brain.close()


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))
