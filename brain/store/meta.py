"""The store's own record: which model built it, and the graph's sequence number.

Kept as a payload-only point (``kind = meta``) inside the collection, so it travels with the
store (Edge directory or server collection) and never disagrees with it.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from brain.vector_store import Point, VectorStore

META_ID = str(uuid.UUID("00000000-0000-4000-8000-00000000b7a1"))


class StoreMeta:
    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self.data: dict[str, Any] = {}
        self._graph_dirty = False

    def load_or_init(self, model: str, dimension: int, created: str,
                     quantization: str | None = None) -> bool:
        """Read the record; write one for a new store. True when the store is new.
        ``quantization``: the mode the new store was created with (None: not recorded)."""
        pts = self.store.retrieve([META_ID])
        if pts:
            self.data = dict(pts[0].payload)
            return False
        self.data = {"kind": "meta", "model": model, "dimension": dimension, "created": created,
                     "generation": 1, "graph_seq": 0}
        if quantization is not None:
            self.data["quantization"] = quantization
        self.store.upsert([Point(META_ID, self.data)])
        return True

    @property
    def model(self) -> str:
        return str(self.data.get("model", ""))

    @property
    def dimension(self) -> int:
        return int(self.data.get("dimension", 0))

    @property
    def quantization(self) -> str | None:
        """The quantization mode recorded at creation or by the last switch."""
        q = self.data.get("quantization")
        return str(q) if q is not None else None

    @property
    def salience_half_life_days(self) -> float | None:
        """The salience half-life every note's ``salience_key`` is computed with (recorded
        by the decay worker's re-key pass; brain/memory/salience.py). None: not recorded yet."""
        h = self.data.get("salience_half_life_days")
        return float(h) if h else None

    @property
    def graph_seq(self) -> int:
        return int(self.data.get("graph_seq", 0))

    def mark_graph_dirty(self) -> None:
        """Bump the sequence once per batch of link changes, before the cache is rewritten:
        a crash in between leaves the cache's number behind the store's, so it is rebuilt."""
        with self._lock:
            if self._graph_dirty:
                return
            self.data["graph_seq"] = self.graph_seq + 1
            self.store.set_payload([META_ID], {"graph_seq": self.data["graph_seq"]})
            self._graph_dirty = True

    def graph_saved(self) -> int:
        with self._lock:
            self._graph_dirty = False
            return self.graph_seq

    @property
    def graph_dirty(self) -> bool:
        return self._graph_dirty

    def set(self, **fields: Any) -> None:
        with self._lock:
            self.data.update(fields)
            self.store.set_payload([META_ID], fields)
