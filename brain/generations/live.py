"""The live side of a model switch: the gate, the embedder that can change model, and the
store wrapper that records what a target generation must take over.

- :class:`Gate` is a readers-writer lock. A tool call (mcp_server ``call``) holds it shared;
  the swap holds it alone, so no tool call straddles the swap: a search that embedded its
  query before it runs wholly against the generation of that model.
- :class:`SwitchableEmbedder` is the embedder every service holds; the swap points it at the
  new model. Each call notes, per thread, which swap epoch embedded the thread's last
  vectors.
- :class:`TrackedStore` is the store stack's layer over the backend (brain/app.py builds it
  once; the swap tells it which generation to serve): it forwards to the live generation, appends the ids of every write to the dirty log first, and, for
  work outside a tool call (sync, file indexing, enrichment), keeps the models apart on its
  own: a dense query from a thread whose last vectors came from the previous model runs on
  the previous generation (while it is open), and a point written with such vectors, or
  stamped with another model, is embedded again with the active model before it is stored.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from brain.generations.state import DirtyLog
from brain.store.meta import META_ID
from brain.vector_store import Filter, Hit, Point, VectorStore, scroll_all
from brain.vector_store.forwarding import ForwardingStore

_local = threading.local()


def _thread_epoch() -> int | None:
    return getattr(_local, "epoch", None)


def _note_epoch(epoch: int) -> None:
    _local.epoch = epoch


class Gate:
    """Many shared holders (re-entrant per thread) or one exclusive holder; a waiting
    exclusive holder goes before new shared ones."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting = 0
        self.entered = 0  # shared entries so far: a rebuild yields only to live traffic
        self._since: dict[int, float] = {}  # each holder's entry (monotonic): busy()

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(_local, "gate_depth", 0)
        if depth:  # already inside: never wait on a swap that waits for us
            _local.gate_depth = depth + 1
            try:
                yield
            finally:
                _local.gate_depth = depth
            return
        with self._cond:
            while self._writer or self._waiting:
                self._cond.wait()
            self._readers += 1
            self.entered += 1
            token = self.entered
            self._since[token] = time.monotonic()
        _local.gate_depth = 1
        try:
            yield
        finally:
            _local.gate_depth = 0
            with self._cond:
                self._readers -= 1
                self._since.pop(token, None)
                self._cond.notify_all()

    def busy(self, younger_than_s: float) -> int:
        """Tool calls in flight that entered less than ``younger_than_s`` ago: what heavy
        work yields to (brain/embedding/lanes.py)."""
        floor = time.monotonic() - younger_than_s
        with self._cond:
            return sum(1 for t in self._since.values() if t > floor)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class SwitchableEmbedder:
    """The embedder the services hold; :meth:`switch` changes its model at a swap. The model
    and its epoch change together (one tuple), so a call notes the epoch of the model that
    really embedded. Embeds never wait on the gate: a tool call may wait for a sync thread
    that embeds, and a swap waiting for that tool call must not hold the thread back."""

    def __init__(self, inner: Any, gate: Gate) -> None:
        self._cur: tuple[Any, int] = (inner, 0)
        self.record = inner.record
        self.gate = gate

    @property
    def inner(self) -> Any:
        return self._cur[0]

    # What some embedders offer beyond the Embedder protocol, asked for with getattr by
    # embedding_status and the search warnings (a remote model's budget and credential), and
    # the runtime a local model runs on: None where the model in use has none.
    @property
    def status(self) -> Callable[[], dict[str, Any]] | None:
        return getattr(self._cur[0], "status", None)

    @property
    def backend(self) -> str | None:
        return getattr(self._cur[0], "backend", None)

    @property
    def epoch(self) -> int:
        return self._cur[1]

    @property
    def dimension(self) -> int:
        return int(self._cur[0].dimension)

    def switch(self, inner: Any) -> None:
        """Called with the gate held alone."""
        self._cur = (inner, self._cur[1] + 1)
        self.record = inner.record

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        inner, epoch = self._cur
        _note_epoch(epoch)
        return inner.embed_documents(texts)  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> np.ndarray:
        inner, epoch = self._cur
        _note_epoch(epoch)
        return inner.embed_query(text)  # type: ignore[no-any-return]

    def count_tokens(self, text: str) -> int:
        return int(self._cur[0].count_tokens(text))


# Re-embeds points (their payloads) with the active model and stamps it: (points) -> points.
Reembed = Callable[[list[Point]], list[Point]]


class TrackedStore(ForwardingStore):
    """The live generation, with every write's ids logged for the target generation.

    Built once by the composition root (brain/app.py) as a layer of the store stack; the model
    switch never replaces it, it tells it what to do: :meth:`log_to` a target generation's
    dirty log, :meth:`serve` another generation at a swap, :meth:`forget_previous`."""

    def __init__(
        self, inner: VectorStore, dirty: DirtyLog | None = None, *, epoch: int = 0,
        model: str = "", reembed: Reembed | None = None, previous: VectorStore | None = None,
    ) -> None:
        super().__init__(inner)
        self.dirty = dirty
        self.epoch = epoch  # the embedder epoch whose model built this generation
        self.model = model
        self.reembed = reembed
        self.previous = previous  # the generation before the swap, while it is open

    def log_to(self, dirty: DirtyLog | None) -> None:
        """Log the ids of every write from now on to ``dirty`` (None: log nothing)."""
        self.dirty = dirty

    def serve(self, generation: VectorStore, dirty: DirtyLog | None, *, epoch: int, model: str,
              reembed: Reembed | None, previous: VectorStore | None) -> None:
        """Forward to ``generation`` from now on (the swap, with the gate and writes held)."""
        self.inner, self.backend = generation, generation.backend
        self.dirty, self.epoch, self.model = dirty, epoch, model
        self.reembed, self.previous = reembed, previous

    def forget_previous(self) -> None:
        """The generation before the swap is closed or dropped: answer every query here."""
        self.previous = None

    def _log(self, ids: Sequence[str]) -> None:
        if self.dirty is not None:
            self.dirty.add(i for i in ids if i != META_ID)

    # writes -----------------------------------------------------------------------------
    def upsert(self, points: Sequence[Point]) -> None:
        points = self._current_model(list(points))
        self._log([p.id for p in points])
        self.inner.upsert(points)

    def _current_model(self, points: list[Point]) -> list[Point]:
        """Points whose vectors may come from another model, embedded again."""
        if self.reembed is None:
            return points
        stale_thread = _thread_epoch() not in (None, self.epoch)
        stale = [i for i, p in enumerate(points) if p.dense is not None and (
            stale_thread or p.payload.get("embed_model", self.model) != self.model)]
        if not stale:
            return points
        fixed = self.reembed([points[i] for i in stale])
        for i, p in zip(stale, fixed, strict=True):
            points[i] = p
        return points

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        self._log(ids)
        self.inner.set_payload(ids, payload)

    def delete(self, ids: Sequence[str]) -> None:
        self._log(ids)
        self.inner.delete(ids)

    def delete_by_filter(self, flt: Filter) -> None:
        if self.dirty is not None:
            self._log([p.id for p in scroll_all(self.inner, flt)])
        self.inner.delete_by_filter(flt)

    # reads -------------------------------------------------------------------------------
    def query_dense(
        self, vector: Sequence[float], flt: Filter | None, limit: int, exact: bool = False,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        epoch = _thread_epoch()
        if epoch is not None and epoch != self.epoch and self.previous is not None:
            # Embedded by the model of the generation before the swap: answered there.
            return self.previous.query_dense(vector, flt, limit, exact, fields)
        return self.inner.query_dense(vector, flt, limit, exact, fields)

    def retrieve(self, ids: Sequence[str], with_vectors: bool = False,
                 with_payload: bool = True) -> list[Point]:
        if with_vectors:
            _note_epoch(self.epoch)
        return self.inner.retrieve(ids, with_vectors, with_payload)

    def scroll(
        self, flt: Filter | None, limit: int = 256, offset: str | None = None,
        with_vectors: bool = False,
    ) -> tuple[list[Point], str | None]:
        if with_vectors:
            _note_epoch(self.epoch)
        return self.inner.scroll(flt, limit, offset, with_vectors)
