"""Who is calling: user and agent ids stamped on every point and used for isolation.

Defaults come from settings (stdio: one identity per process). A transport that knows the
caller per request (HTTP with per-caller tokens) sets ``current`` for that request; worker
threads inherit it because anyio copies the context into them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Identity:
    user_id: str
    agent_id: str


current: ContextVar[Identity | None] = ContextVar("brain_identity", default=None)


def resolve(default_user: str, default_agent: str) -> Identity:
    ident = current.get()
    return ident if ident is not None else Identity(default_user, default_agent)


@contextmanager
def acting_as(identity: Identity) -> Iterator[None]:
    token = current.set(identity)
    try:
        yield
    finally:
        current.reset(token)
