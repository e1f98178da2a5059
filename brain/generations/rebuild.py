"""Carry a generation's points into another: each point's dense text embedded again with the
target model; payload and BM25 vector kept as they are.

A note's dense text is what memory embeds (``embed_text``, pooled over the model's window
like ``embed_passages``); a source chunk, a file's head or a document chunk embeds its
``content``; a HyPE point its question. A point without a dense vector (the meta record, bookkeeping) is copied as is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.embedding.registry import Embedder, embed_passages
from brain.generations.state import DirtyLog, GenerationState, Rebuild, save
from brain.memory.core import embed_text
from brain.memory.hype import HYPE
from brain.store import recall_key
from brain.store.meta import META_ID
from brain.vector_store import Point, VectorStore

log = logging.getLogger(__name__)


def dense_text(payload: dict[str, Any]) -> str | None:
    """The text a point's dense vector encodes, or None when it has none to rebuild from."""
    kind = payload.get("kind", "note")
    if kind == "note" and isinstance(payload.get("content"), str):
        return embed_text(payload)
    if kind == HYPE:  # a note's hypothetical question (brain/memory/hype.py)
        question = payload.get("question")
        return question if isinstance(question, str) else None
    content = payload.get("content")
    return content if isinstance(content, str) else None


@dataclass
class Reembedder:
    """Embeds points again with one model and stamps it on them (and the recall key that
    names it: brain/store/recall_key.py)."""

    embedder: Embedder
    model: str
    pool_long_text: bool = True
    texts_embedded: int = 0

    def __call__(self, points: list[Point]) -> list[Point]:
        out: list[Point] = []
        todo: list[tuple[int, str]] = []
        for p in points:
            payload = dict(p.payload)
            if "embed_model" in payload:
                payload["embed_model"] = self.model
            q = Point(p.id, recall_key.stamp(payload), p.dense, p.sparse)
            text = dense_text(payload) if p.dense is not None else None
            if text is not None:
                todo.append((len(out), text))
            elif p.dense is not None:
                q.dense = None  # no text to rebuild from: never keep another model's vector
            out.append(q)
        if todo:
            vecs = embed_passages(self.embedder, [t for _, t in todo], self.pool_long_text)
            self.texts_embedded += len(todo)
            for (i, _), vec in zip(todo, vecs, strict=True):
                out[i].dense = [float(x) for x in vec]
        return out


def take_over(ids: list[str], source: VectorStore, target: VectorStore,
              reembed: Reembedder) -> int:
    """Bring ``ids`` from ``source`` to ``target``: re-embedded when their dense text changed,
    the payload alone when it did not, deleted when gone. Returns how many were embedded."""
    ids = [i for i in ids if i != META_ID]
    if not ids:
        return 0
    live = {p.id: p for p in source.retrieve(ids, with_vectors=True)}
    have = {p.id: p for p in target.retrieve(ids, with_vectors=True)}
    gone = [i for i in ids if i not in live]
    fresh: list[Point] = []
    copied: list[Point] = []
    for i, p in live.items():
        old = have.get(i)
        if (old is not None and old.dense is not None and p.dense is not None
                and dense_text(old.payload) == dense_text(p.payload)):
            payload = dict(p.payload)
            if "embed_model" in payload:
                payload["embed_model"] = reembed.model
            copied.append(Point(i, recall_key.stamp(payload), old.dense, p.sparse))
        else:
            fresh.append(p)
    before = reembed.texts_embedded
    out = reembed(fresh) + copied
    if out:
        target.upsert(out)
    if gone:
        target.delete(gone)
    return reembed.texts_embedded - before


IDLE_BATCH = 256


@dataclass
class Pace:
    """Points per batch, and the pause after a batch. ``activity`` (the gate's count of tool
    calls) makes the pause conditional: a batch after which no tool call came in is followed
    by the next at once, so an idle brain rebuilds at full speed and a busy one yields.

    While tool calls come in, the pause is at least ``pause_s`` and at least the batch's own
    time x (1 - busy_share) / busy_share: the rebuild then works ``busy_share`` of the time,
    whatever a batch costs on this machine. That is what keeps live searches' median: a
    search overlaps a batch about busy_share of the time, so at a share well under a half
    the median search runs beside no batch. ``pause_s = 0`` never yields."""

    batch: int
    pause_s: float
    activity: Callable[[], int] | None = None
    busy_share: float = 1.0
    # Points per batch while no tool call comes in (0 = ``batch``): a bigger batch embeds
    # faster (the embedder sorts a batch by length, so less padding) and is checkpointed less
    # often. The product uses IDLE_BATCH.
    idle_batch: int = 0

    def batch_for(self, busy: bool) -> int:
        return self.batch if busy else max(self.batch, self.idle_batch)

    def pause_after(self, batch_s: float) -> float:
        if self.pause_s <= 0:
            return 0.0
        share = min(max(self.busy_share, 1e-3), 1.0)
        return max(self.pause_s, batch_s * (1.0 - share) / share)


class Rebuilder:
    """The scroll pass and the dirty ids of one rebuild, in a thread, checkpointed per batch."""

    def __init__(
        self, home: Path, state: GenerationState, live: VectorStore, target: VectorStore,
        reembed: Reembedder, dirty: DirtyLog, pace: Pace, now: Callable[[], str],
        swap: Callable[[Rebuilder], None],
        hold: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> None:
        assert state.rebuild is not None
        self.home = home
        self.state = state
        self.rb: Rebuild = state.rebuild
        self.live = live
        self.target = target
        self.reembed = reembed
        self.dirty = dirty
        self.pace = pace
        self.pauses = 0  # pauses taken for live traffic
        self._activity = pace.activity() if pace.activity is not None else None
        self.now = now
        self.swap = swap
        # Holds the live store's writes. A write logs its ids first and then stores them (a
        # crash between the two leaves an id to take over, never a write missed), so the log
        # is read with no write between the two: else an id read before its write landed
        # would be taken over as gone and consumed, and the write would miss the target.
        self.hold = hold
        self.stop = threading.Event()
        self.lock = threading.Lock()  # the state, between this thread and status readers
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="model-rebuild", daemon=True)
        self.thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def _save(self, **fields: Any) -> None:
        with self.lock:
            for k, v in fields.items():
                setattr(self.rb, k, v)
            self.rb.updated_at = self.now()
            save(self.home, self.state)

    def _run(self) -> None:
        try:
            self._save(status="running", reason="")
            if not self.rb.scrolled:
                self.scroll_pass()
            while not self.stop.is_set():
                if self.drain(small=self.pace.batch):
                    self.swap(self)
                    return
        except Exception as exc:  # noqa: BLE001 - a failed rebuild pauses, the live one serves
            log.exception("model rebuild failed")
            self._save(status="paused", reason=f"failed: {type(exc).__name__}: {exc}"[:500])
            return
        if self.rb.status == "running":
            self._save(status="paused", reason="stopped")

    def scroll_pass(self) -> None:
        offset = self.rb.checkpoint
        busy = True  # the first batch is a small one
        while not self.stop.is_set():
            t0 = time.monotonic()
            points, nxt = self.live.scroll(None, limit=self.pace.batch_for(busy), offset=offset,
                                           with_vectors=True)
            points = [p for p in points if p.id != META_ID]
            before = self.reembed.texts_embedded
            rebuilt = self.reembed(points)
            if rebuilt:
                self.target.upsert(rebuilt)
            kinds = dict(self.rb.by_kind)
            for p in points:
                kind = str(p.payload.get("kind", "note"))
                kinds[kind] = kinds.get(kind, 0) + 1
            offset = nxt
            self._save(checkpoint=nxt, done=self.rb.done + len(points), by_kind=kinds,
                       embedded=self.rb.embedded + self.reembed.texts_embedded - before,
                       scrolled=nxt is None,
                       elapsed_s=self.rb.elapsed_s + time.monotonic() - t0)
            if nxt is None:
                return
            seen = self.pace.activity() if self.pace.activity is not None else None
            busy = seen is None or seen != self._activity
            pause = self.pace.pause_after(time.monotonic() - t0)
            if pause > 0 and busy:
                self.pauses += 1
                self.stop.wait(pause)
            self._activity = seen

    def drain(self, small: int = 0) -> bool:
        """Take over the dirty ids, a batch at a time; True when at most ``small`` are left."""
        while not self.stop.is_set():
            with self.hold():
                ids, upto = self.dirty.read()
            if len(ids) <= small:
                return True
            t0 = time.monotonic()
            for i in range(0, len(ids), self.pace.batch):
                n = take_over(ids[i : i + self.pace.batch], self.live, self.target, self.reembed)
                self._save(embedded=self.rb.embedded + n,
                           elapsed_s=self.rb.elapsed_s + time.monotonic() - t0)
                t0 = time.monotonic()
                if self.stop.is_set():
                    return False
            self.dirty.consume(upto)
        return False

    def drain_all(self) -> None:
        """Under the swap's hold: nothing is written meanwhile, so this ends."""
        ids, upto = self.dirty.read()
        for i in range(0, len(ids), self.pace.batch):
            n = take_over(ids[i : i + self.pace.batch], self.live, self.target, self.reembed)
            self.rb.embedded += n
        self.dirty.consume(upto)

