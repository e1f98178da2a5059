"""Degraded mode: the embedded stand-in for an unreachable Qdrant server, and the durable
journal that carries what was written meanwhile back to the server.

When ``BRAIN__QDRANT__URL`` does not answer at start, the brain serves from an Edge shard in
the data dir (``store/degraded_<collection>``) instead of failing, wrapped in a
:class:`JournaledStore`: every write is appended to ``degraded_journal.jsonl`` (fsync'd before
the write is applied, so an acknowledged write is in the journal) and then applied to the
shard. At the next start that reaches the server, :func:`replay` applies the journal to the
server's collection in order, then retires it. Every operation is idempotent (points are
written by id, payloads set by id, deletes by id or filter), so a replay cut short by a crash
is run again whole, and each write arrives exactly once in effect: no loss, no duplicates.

:class:`Probe` re-checks the server every 30 s and logs loss and recovery; the state it keeps
is what ``brain_stats`` reports as ``backend_state``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from brain.errors import StoreError
from brain.vector_store import base
from brain.vector_store.base import Filter, Point, SparseVector, VectorStore
from brain.vector_store.forwarding import ForwardingStore

log = logging.getLogger("brain.degraded")

JOURNAL = "degraded_journal.jsonl"


# ------------------------------------------------------------------------------ encoding
def _encode_filter(node: Any) -> Any:
    if isinstance(node, Filter):
        return {"filter": {k: [_encode_filter(c) for c in getattr(node, k)]
                           for k in ("must", "must_not", "should")}}
    if is_dataclass(node):
        return {"cond": type(node).__name__,
                "args": {f.name: (list(v) if isinstance(v := getattr(node, f.name), tuple)
                                  else v) for f in fields(node)}}
    raise TypeError(f"cannot journal filter part {node!r}")


def _decode_filter(data: Any) -> Any:
    if "filter" in data:
        return Filter(**{k: tuple(_decode_filter(c) for c in v)
                         for k, v in data["filter"].items()})
    cls = getattr(base, data["cond"])
    args = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data["args"].items()}
    return cls(**args)


def _encode_point(p: Point) -> dict[str, Any]:
    return {"id": p.id, "payload": p.payload, "dense": p.dense,
            "sparse": None if p.sparse is None else [list(p.sparse.indices),
                                                     list(p.sparse.values)]}


def _decode_point(d: dict[str, Any]) -> Point:
    sparse = d.get("sparse")
    return Point(d["id"], d["payload"], d.get("dense"),
                 None if sparse is None else SparseVector(tuple(sparse[0]), tuple(sparse[1])))


# ------------------------------------------------------------------------------ journal
class WriteJournal:
    """Append-only JSON lines, each fsync'd before the write it records is applied."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, op: dict[str, Any]) -> None:
        line = (json.dumps(op, separators=(",", ":")) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def entries(self) -> Iterator[dict[str, Any]]:
        """The recorded operations in order; a torn last line (a crash mid-append, so never
        acknowledged) is skipped."""
        try:
            with self.path.open("rb") as fh:
                for raw in fh:
                    if not raw.endswith(b"\n"):
                        log.warning("degraded journal: ignoring a torn last line")
                        return
                    yield json.loads(raw)
        except FileNotFoundError:
            return

    def pending(self) -> int:
        return sum(1 for _ in self.entries())


class JournaledStore(ForwardingStore):
    """A store whose writes are journaled first (see the module docstring)."""

    def __init__(self, inner: VectorStore, journal: WriteJournal,
                 skip_ids: frozenset[str] | set[str] = frozenset()) -> None:
        super().__init__(inner)
        self.journal = journal
        # The store's own meta record (model, dimension, graph sequence): the stand-in's
        # must never replace the server's.
        self.skip_ids = frozenset(skip_ids)

    def upsert(self, points: Sequence[Point]) -> None:
        keep = [p for p in points if p.id not in self.skip_ids]
        if keep:
            self.journal.append({"op": "upsert", "points": [_encode_point(p) for p in keep]})
        self.inner.upsert(points)

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        keep = [i for i in ids if i not in self.skip_ids]
        if keep:
            self.journal.append({"op": "set_payload", "ids": keep, "payload": payload})
        self.inner.set_payload(ids, payload)

    def delete(self, ids: Sequence[str]) -> None:
        self.journal.append({"op": "delete", "ids": list(ids)})
        self.inner.delete(ids)

    def delete_by_filter(self, flt: Filter) -> None:
        self.journal.append({"op": "delete_by_filter", "filter": _encode_filter(flt)})
        self.inner.delete_by_filter(flt)


def replay(journal: WriteJournal, target: VectorStore) -> int:
    """Apply the journal to ``target`` in order, then retire it; the operations applied.
    Idempotent: a replay cut short is run again whole at the next start."""
    applied = 0
    for op in journal.entries():
        kind = op.get("op")
        if kind == "upsert":
            target.upsert([_decode_point(p) for p in op["points"]])
        elif kind == "set_payload":
            # A point the server never had cannot take a payload; its upsert, if it was
            # made while degraded, came earlier in the journal.
            present = {p.id for p in target.retrieve(op["ids"])}
            if present:
                target.set_payload([i for i in op["ids"] if i in present], op["payload"])
        elif kind == "delete":
            target.delete(op["ids"])
        elif kind == "delete_by_filter":
            target.delete_by_filter(_decode_filter(op["filter"]))
        else:
            raise StoreError(f"degraded journal {journal.path}: unknown operation {kind!r}")
        applied += 1
    target.flush()
    if journal.path.exists():
        done = journal.path.with_name(f"{journal.path.name}.replayed-{int(time.time())}")
        os.replace(journal.path, done)
        log.info("degraded journal: %d writes replayed into the server; kept as %s",
                 applied, done.name)
    return applied


# ------------------------------------------------------------------------------ probe
class Probe:
    """Whether the Qdrant server answers: checked at start and every ``interval_s``."""

    def __init__(self, url: str, check: Callable[[], None], interval_s: float = 30.0,
                 degraded: bool = False) -> None:
        self.url = url
        self.check = check
        self.interval_s = interval_s
        self.degraded = degraded
        self.reachable: bool | None = None
        self.last_checked_at: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The start's checks of a reachable server (brain/vector_store/server_checks.py):
        # its version against the client's, and the watch of its optimizer runs.
        self.server: dict[str, Any] = {}
        self.watch: Any = None

    def run_once(self) -> bool:
        try:
            self.check()
            ok = True
        except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
            ok = False
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        before, self.reachable = self.reachable, ok
        self.last_checked_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if before is not False and not ok:
            log.warning("Qdrant server %s is unreachable (%s)%s", self.url, reason,
                        "; serving from the embedded stand-in" if self.degraded else "")
        elif before is False and ok:
            log.warning("Qdrant server %s is reachable again%s", self.url,
                        "; restart the brain to replay the degraded journal into it"
                        if self.degraded else "")
        return ok

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.interval_s):
                self.run_once()

        self._thread = threading.Thread(target=loop, name="qdrant-probe", daemon=True)
        self._thread.start()
        if self.watch is not None:
            self.watch.start()

    def stop(self) -> None:
        self._stop.set()
        if self.watch is not None:
            self.watch.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def state(self, backend: str) -> dict[str, Any]:
        return {"backend": backend, "degraded": self.degraded,
                "qdrant_reachable": self.reachable, "last_checked_at": self.last_checked_at,
                **self.server}

    @staticmethod
    def state_of(probe: Probe | None, backend: str) -> dict[str, Any]:
        """{backend, degraded, qdrant_reachable, last_checked_at}: no probe (no server
        configured) is an embedded store, never degraded, with nothing to reach."""
        if probe is not None:
            return probe.state(backend)
        return {"backend": backend, "degraded": False, "qdrant_reachable": None,
                "last_checked_at": None}
