"""Request ids on notes: a call retried after its owner died can ask whether it was applied.

A forwarded call carries a request id made by the calling process (brain/process/owner.py).
While it runs, notes the owner writes are stamped with it, so a call retried after the owner
died mid-call can ask "was this applied?" instead of writing twice. The stamping layer is part
of the store stack the composition root (brain/app.py) assembles; with no request running it
changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar

from brain.vector_store.base import Point
from brain.vector_store.forwarding import ForwardingStore

current_request: ContextVar[str | None] = ContextVar("brain_request_id", default=None)
REQUEST_FIELD = "request_id"


class RequestStampingStore(ForwardingStore):
    """Stamps each new note written while a request runs with the request's id."""

    def upsert(self, points: Sequence[Point]) -> None:
        rid = current_request.get()
        if rid:
            points = [
                Point(p.id, {**p.payload, REQUEST_FIELD: rid}, p.dense, p.sparse)
                if p.payload.get("kind") == "note" and REQUEST_FIELD not in p.payload
                else p
                for p in points
            ]
        self.inner.upsert(points)


__all__ = ["REQUEST_FIELD", "RequestStampingStore", "current_request"]
