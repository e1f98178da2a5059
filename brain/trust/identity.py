"""Who is calling: user and agent ids stamped on every point and used for isolation.

``current`` holds the caller of the running call. The HTTP front sets it from the bearer
token, the owner from a forwarded call, and the tool gate (mcp_server.call) from the
settings when nothing else did, so inside a tool it is always set; worker threads inherit
it because anyio copies the context into them. What a caller may see is decided in
brain/trust/tenancy.py.
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


@contextmanager
def acting_as(identity: Identity) -> Iterator[None]:
    token = current.set(identity)
    try:
        yield
    finally:
        current.reset(token)
