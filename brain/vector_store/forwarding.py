"""The store stack's one forwarding layer: a :class:`VectorStore` that hands every call to the
store beneath it, each method written out so the type checker sees the whole contract.

The brain's store is a stack assembled once by the composition root (brain/app.py): the
integrity guard over request stamping over the model switch's tracking over a backend (or the
degraded journal over the embedded stand-in). Each layer subclasses :class:`ForwardingStore`
and overrides only what it changes; nothing passes through by ``__getattr__``, so a method
the contract lacks is an error at type-check time, not a surprise at run time.

What only one backend offers (an embedded shard's files, its optimizer's bookkeeping) is not
forwarded: a caller asks :func:`backend_of` for the store at the bottom of the stack and tests
it against a capability Protocol (brain/vector_store/base.py: ``ShardFiles``, ``OptimizeSteps``,
``CancelsOptimize``, ``QuantizedSegments``, ``PayloadRewrites``, ``ServerCollection``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from brain.vector_store.base import (
    Filter,
    Hit,
    Hold,
    IndexState,
    Point,
    SparseVector,
    StoreInfo,
    VectorStore,
)


class ForwardingStore:
    """A :class:`VectorStore` that forwards every call to ``inner``."""

    def __init__(self, inner: VectorStore) -> None:
        self.inner = inner
        self.backend = inner.backend

    # lifecycle -------------------------------------------------------------------------
    def open(self, dimension: int) -> None:
        self.inner.open(dimension)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    def info(self) -> StoreInfo:
        return self.inner.info()

    # writes ----------------------------------------------------------------------------
    def upsert(self, points: Sequence[Point]) -> None:
        self.inner.upsert(points)

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        self.inner.set_payload(ids, payload)

    def delete(self, ids: Sequence[str]) -> None:
        self.inner.delete(ids)

    def delete_by_filter(self, flt: Filter) -> None:
        self.inner.delete_by_filter(flt)

    # reads -----------------------------------------------------------------------------
    def retrieve(self, ids: Sequence[str], with_vectors: bool = False,
                 with_payload: bool = True) -> list[Point]:
        return self.inner.retrieve(ids, with_vectors, with_payload)

    def query_dense(
        self, vector: Sequence[float], flt: Filter | None, limit: int, exact: bool = False,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        return self.inner.query_dense(vector, flt, limit, exact, fields)

    def query_sparse(
        self, vector: SparseVector, flt: Filter | None, limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        return self.inner.query_sparse(vector, flt, limit, fields)

    def scroll(
        self, flt: Filter | None, limit: int = 256, offset: str | None = None,
        with_vectors: bool = False,
    ) -> tuple[list[Point], str | None]:
        return self.inner.scroll(flt, limit, offset, with_vectors)

    def count(self, flt: Filter | None = None) -> int:
        return self.inner.count(flt)

    def flag_counts(self, ids: Sequence[str], field: str) -> tuple[int, int]:
        return self.inner.flag_counts(ids, field)

    def may_hold_flag(self, field: str) -> bool:
        return self.inner.may_hold_flag(field)

    # indexes ---------------------------------------------------------------------------
    def ensure_indexes(self) -> int:
        return self.inner.ensure_indexes()

    def index_state(self) -> IndexState:
        return self.inner.index_state()

    def declared_indexes(self) -> dict[str, str]:
        return self.inner.declared_indexes()

    def payload_indexes(self) -> dict[str, str]:
        return self.inner.payload_indexes()

    def rebuild_index(self, name: str) -> None:
        self.inner.rebuild_index(name)

    def quantization(self) -> str | None:
        return self.inner.quantization()

    def set_quantization(self, mode: str, hold: Hold | None = None) -> dict[str, Any]:
        return self.inner.set_quantization(mode, hold)

    def optimize(self, hold: Hold | None = None) -> bool:
        return self.inner.optimize(hold)


def backend_of(store: VectorStore) -> VectorStore:
    """The store at the bottom of a stack of forwarding layers (the backend itself)."""
    while isinstance(store, ForwardingStore):
        store = store.inner
    return store


def layers_of(store: VectorStore) -> list[VectorStore]:
    """Every layer of a stack, outermost first, the backend last."""
    out = [store]
    while isinstance(store, ForwardingStore):
        store = store.inner
        out.append(store)
    return out


__all__ = ["ForwardingStore", "backend_of", "layers_of"]
