"""stub: transport marker only (tests first)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

transport: ContextVar[str] = ContextVar("brain_transport", default="local")


@contextmanager
def via(kind: str) -> Iterator[None]:
    token = transport.set(kind)
    try:
        yield
    finally:
        transport.reset(token)
