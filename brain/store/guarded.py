"""The store as the brain uses it: the integrity guard, the outermost layer of the store stack.

Every write checks free space (brain/store/integrity.py ``SpaceGuard``), is serialised, keeps
the manifest's lower bound of the store's points and each note's recall key
(brain/store/recall_key.py), and can be held or paused (snapshots copy the files meanwhile).
Reads are forwarded (brain/vector_store/forwarding.py), and a point read with its payload
that answers none is damage (a truncated payload tracker: every point the brain writes has
one), refused with ``StoreDamaged`` naming the tracker instead of an untyped ``KeyError``
further up.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from brain.errors import StoreError
from brain.store import recall_key
from brain.store.integrity import Manifest, SpaceGuard, no_payload, store_bytes
from brain.store.meta import META_ID
from brain.vector_store.base import Filter, Hit, Hold, Point, SparseVector, VectorStore
from brain.vector_store.forwarding import ForwardingStore, backend_of

log = logging.getLogger(__name__)


class GuardedStore(ForwardingStore):
    """The store as the brain uses it: every write checks free space, is serialised, keeps the
    manifest's lower bound and each note's recall key, and can be paused (snapshots copy
    the files meanwhile)."""

    def __init__(self, inner: VectorStore, space: SpaceGuard, manifest: Manifest) -> None:
        super().__init__(inner)
        self.space = space
        self.manifest = manifest
        self._lock = threading.RLock()
        self.writes = 0  # write batches since open: a snapshot is skipped when nothing changed
        self.snapshot_writes: int | None = None  # ``writes`` at this process's last snapshot

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold every write while the block runs; a write already begun has finished."""
        with self._lock:
            yield

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold every write while the block runs, with the store flushed to its files."""
        with self.held():
            self.inner.flush()
            yield

    # -- reads: a point without its payload is damage, named ----------------------------
    def _whole(self, points: Any) -> Any:
        for p in points:
            if not p.payload:
                raise no_payload(self.space.path, self.inner, p.id)
        return points

    def retrieve(self, ids: Sequence[str], with_vectors: bool = False,
                 with_payload: bool = True) -> list[Point]:
        got = self.inner.retrieve(ids, with_vectors, with_payload)
        return self._whole(got) if with_payload else got

    def query_dense(self, vector: Sequence[float], flt: Filter | None, limit: int,
                    exact: bool = False, fields: Sequence[str] | None = None) -> list[Hit]:
        hits = self.inner.query_dense(vector, flt, limit, exact, fields)
        return self._whole(hits) if fields is None else hits

    def query_sparse(self, vector: SparseVector, flt: Filter | None, limit: int,
                     fields: Sequence[str] | None = None) -> list[Hit]:
        hits = self.inner.query_sparse(vector, flt, limit, fields)
        return self._whole(hits) if fields is None else hits

    def scroll(self, flt: Filter | None, limit: int = 256, offset: str | None = None,
               with_vectors: bool = False) -> tuple[list[Point], str | None]:
        points, nxt = self.inner.scroll(flt, limit, offset, with_vectors)
        return self._whole(points), nxt

    def _record(self, points: int) -> None:
        if points == self.manifest.points:
            return
        try:
            self.manifest.save(points, lazy=points > (self.manifest.points or 0))
        except OSError as exc:  # the record stays low: safe, only less precise
            log.warning("cannot update the store manifest: %s", exc)

    def _added(self, points: Sequence[Point]) -> int:
        """How many of ``points`` the store does not hold yet, found by id (ids only)."""
        ids = list({p.id for p in points})
        return len(ids) - len(self.inner.retrieve(ids, with_payload=False))

    def _wrote(self, known: int | None, change: int) -> None:
        """A write batch is done: count it, and move the record by ``change`` (with no record
        yet, to the store's count: the baseline)."""
        self.writes += 1
        if known is not None:
            self._record(known + change)
        elif self.manifest.location is not None:
            self._record(self.inner.count(None))

    def follow(self, manifest: Manifest) -> None:
        """Keep ``manifest`` from now on: the record of the generation a model switch made
        active (called with the writes held)."""
        self.manifest = manifest

    # writes ----------------------------------------------------------------------------
    def upsert(self, points: Sequence[Point]) -> None:
        if not points:
            return
        with self._lock:
            self.space.check_write("write to the store")
            # The record grows by the ids this write adds: counting the store after every
            # write read all its points (142 of 212 ms per add_memory at 1,000,000 notes).
            # Writes are serialised here, so the record stays a lower bound.
            known = self.manifest.points
            added = 0 if known is None else self._added(points)
            # Each note's recall key is computed from the payload it is written with, in the
            # same write: never stale, never set by a caller (brain/store/recall_key.py).
            self.inner.upsert(recall_key.stamped(points))
            self._wrote(known, added)

    def _delete(self, gone: Callable[[], int], run: Callable[[], None]) -> None:
        """A delete lowers the record by what it removes *before* the store removes it."""
        with self._lock:
            self.space.check_write("delete from the store")
            known = self.manifest.points
            change = 0
            if known is not None:
                change = -min(known, gone())
                try:
                    self.manifest.save(known + change)
                except OSError as exc:
                    raise StoreError(f"cannot record a delete in {self.manifest.path}: "
                                     f"{exc}") from exc
            run()
            self._wrote(known, change)

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if not ids:
            return
        with self._lock:
            self.space.check_write("update the store")
            if list(ids) == [META_ID]:  # bookkeeping (a worker's last run) is not a change
                self.inner.set_payload(ids, payload)
                return
            if recall_key.INPUTS.isdisjoint(payload) and recall_key.FIELD not in payload:
                self.inner.set_payload(ids, payload)
            else:
                self._set_keyed(ids, payload)
            self.writes += 1

    def _set_keyed(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        """A change to what a recall key is computed from: each point's new key goes in the
        same write as the change (a crash between two writes would leave a forgotten note
        findable), one write per distinct key."""
        payload = {k: v for k, v in payload.items() if k != recall_key.FIELD}
        groups: dict[tuple[str, ...], list[str]] = {}
        found = self.inner.retrieve(list(dict.fromkeys(ids)))
        for p in found:
            groups.setdefault(tuple(recall_key.keys({**p.payload, **payload})), []).append(p.id)
        for want, group in groups.items():
            self.inner.set_payload(group, {**payload, recall_key.FIELD: list(want)})
        held = {p.id for p in found}
        missing = [i for i in ids if i not in held]
        if missing:  # as the store answers a change to points it does not hold
            self.inner.set_payload(missing, payload)

    def rekey(self, points: Sequence[Point]) -> int:
        """Write the recall key of each of ``points`` (as just read) whose stored key is not
        the one its payload gives; returns how many. The caller holds the writes
        (:meth:`held`), so the payloads are still the stored ones."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for p in points:
            want = recall_key.keys(p.payload)
            if p.payload.get(recall_key.FIELD, []) != want:
                groups.setdefault(tuple(want), []).append(p.id)
        with self._lock:
            for key, group in groups.items():
                self.space.check_write("update the store")
                self.inner.set_payload(group, {recall_key.FIELD: list(key)})
        if groups:
            self.writes += 1
        return sum(len(g) for g in groups.values())

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        unique = list(set(ids))
        self._delete(lambda: len(self.inner.retrieve(unique, with_payload=False)),
                     lambda: self.inner.delete(ids))

    def delete_by_filter(self, flt: Filter) -> None:
        self._delete(lambda: int(self.inner.count(flt)), lambda: self.inner.delete_by_filter(flt))

    def ensure_indexes(self) -> int:
        with self._lock:
            self.space.check_write("index the store")
            return self.inner.ensure_indexes()

    def rebuild_index(self, name: str) -> None:
        with self._lock:
            self.space.check_write("index the store")
            self.inner.rebuild_index(name)

    def set_quantization(self, mode: str, hold: Hold | None = None) -> dict[str, Any]:
        """Like optimize: the rebuild works on a copy of an embedded shard."""
        self.space.require("rebuild the store", extra=store_bytes(backend_of(self)))
        return dict(self.inner.set_quantization(mode, hold or self.paused))

    def optimize(self, hold: Hold | None = None) -> bool:
        """Optimize with writes (and snapshots) held off only for its copy and swap steps."""
        # The copy of an embedded shard needs its size again on disk.
        self.space.require("optimize the store", extra=store_bytes(backend_of(self)))
        return bool(self.inner.optimize(hold or self.paused))

    def close(self) -> None:
        with self._lock:
            self.inner.close()
            try:
                self.manifest.flush()
            except OSError as exc:  # the file keeps a lower count: safe, only less precise
                log.warning("cannot update the store manifest: %s", exc)
