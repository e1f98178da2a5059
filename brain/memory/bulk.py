"""Bulk import: many notes at once, batch-embedded and batch-upserted.

The payload of every note is exactly the shape ``MemoryService.add`` writes (same fields,
heuristic enrichment, redaction, embedding stamp), so bulk-imported notes are
indistinguishable from notes added one by one. Two differences, on purpose:

- no auto-linking: a permanent note added one by one is linked to similar notes; a bulk
  import skips that (it would cost one search per note). Links can be added later.
- listeners are not called per note (the enrichment queue and mirrors are not fed); the
  caller gets the list of payloads and may emit what it needs.

Used by the benchmarks at 10k / 100k notes, and by ``brain import`` (brain/maintenance/service.py),
whose notes arrive with their payloads and ids: :func:`note_points` and :func:`write` are the
batch steps both share (one embedding call and one upsert per batch of :data:`BATCH` notes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from brain.errors import InvalidArgument
from brain.memory import (
    MemoryService,
    keyword_text,
)
from brain.notes import new_zk_id, point_id
from brain.vector_store import Point

# Notes per embedding call and upsert, the bulk path's and the import's.
BATCH = 512  # the speed bench's batch; the import ran 64 at a time before


@dataclass(slots=True)
class BulkNote:
    """One note to import; the fields mean what the add_memory arguments mean."""

    content: str
    project: str | None = None
    memory_type: str = "permanent"
    note_kind: str = "general"
    tags: Sequence[str] = ()
    pinned: bool = False
    visibility: str = "shared"
    extra: dict[str, Any] = field(default_factory=dict)
    # The note's dense vector when it is already known (an export of a store on the same
    # model, a benchmark's cached embeddings): what this store's embedder gives for the
    # note's text. Checked for size and finiteness; ignored when redaction changed the text
    # (the vector would encode what was removed), and then the note is embedded here.
    vector: Sequence[float] | None = None


@dataclass(slots=True)
class BulkResult:
    zk_ids: list[str]
    redacted: int = 0


def build_payload(memory: MemoryService, note: BulkNote, now: str, ts: float) -> dict[str, Any]:
    """The payload ``MemoryService.add`` would write for ``note`` (without links)."""
    extra = dict(note.extra or {})
    context = extra.pop("context", None)
    payload, _ = memory.new_payload(
        note.content, note.project, note.memory_type, note.note_kind, list(note.tags or []),
        note.pinned, note.visibility, context, extra)
    payload.update(zk_id=new_zk_id(), created=now, updated=now, created_ts=ts, updated_ts=ts)
    return memory.keyed(payload)  # created_ts moved: the salience key follows


def _unique_ids(memory: MemoryService, payloads: list[dict[str, Any]], seen: set[str]) -> None:
    """Re-draw ids that collide in this import or in the store (32-bit ids: at 100k notes a
    collision is likely, and an upsert would silently overwrite)."""
    while True:
        clash = {p["zk_id"] for p in payloads if p["zk_id"] in seen}
        ids = [point_id(p["zk_id"]) for p in payloads]
        stored = {pt.payload.get("zk_id") for pt in memory.store.retrieve(ids)}
        batch_seen: set[str] = set()
        for p in payloads:
            z = p["zk_id"]
            if z in clash or z in stored or z in batch_seen:
                p["zk_id"] = new_zk_id()
                clash.add("retry")
            batch_seen.add(p["zk_id"])
        if "retry" not in clash:
            seen.update(batch_seen)
            return


def _given_vector(memory: MemoryService, note: BulkNote, payload: dict[str, Any]) -> list[float] | None:
    """``note.vector`` checked, as a list; None when the note must be embedded here."""
    if note.vector is None or payload["content"] != note.content:
        return None  # no vector, or redaction changed the text the vector encodes
    vec = np.asarray(note.vector, dtype=np.float32).reshape(-1)
    dim = memory.embedder.dimension
    if vec.shape[0] != dim or not np.isfinite(vec).all():
        raise InvalidArgument(
            f"a bulk note's vector has {vec.shape[0]} values (or non-finite ones); this store's "
            f"model gives {dim} finite values: pass vectors from the same model, or none and "
            "let the import embed the notes")
    return vec.tolist()


def note_points(
    memory: MemoryService,
    ids: Sequence[str],
    payloads: Sequence[dict[str, Any]],
    given: Sequence[list[float] | None] | None = None,
    keyword_fn: Callable[[dict[str, Any]], str] = keyword_text,
) -> list[Point]:
    """The points of one batch of notes: each note's given dense vector, else embedded here
    (the notes without one, in one call), and its BM25 vector."""
    dense = list(given) if given is not None else [None] * len(payloads)
    todo = [i for i, v in enumerate(dense) if v is None]
    if todo:
        fresh = memory.embed_notes([payloads[i] for i in todo])
        for row, i in enumerate(todo):
            dense[i] = fresh[row].tolist()
    return [Point(pid, p, dense[i], memory.bm25.document(keyword_fn(p)))
            for i, (pid, p) in enumerate(zip(ids, payloads, strict=True))]


def write(memory: MemoryService, points: Sequence[Point]) -> None:
    """Upsert one batch of note points and their nodes in the link graph, under the
    service's write lock (adds and updates made meanwhile wait for the batch, not the
    import)."""
    with memory._write_lock:
        # Before the write: a crash before the graph's cache is saved leaves the cache's
        # number behind the store's, and the next start rebuilds the links (an import of an
        # export brings its notes' links). Notes without links are new nodes all the same:
        # unmarked, the cache was never saved with them, and after a restart every such note
        # was "missing from the graph" to a health scan (ok: false on a sound store).
        memory.meta.mark_graph_dirty()
        memory.store.upsert(list(points))
        for pt in points:
            p = pt.payload
            if p.get("links"):
                memory.graph.set_links(p["zk_id"], list(p["links"]), dict(p.get("link_types") or {}))
            else:
                memory.graph.upsert_node(p["zk_id"])


def bulk_add(
    memory: MemoryService,
    notes: Iterable[BulkNote | str],
    *,
    batch: int = BATCH,
    project: str | None = None,
    keyword_fn: Callable[[dict[str, Any]], str] = keyword_text,
) -> BulkResult:
    """Add ``notes`` (BulkNote or plain strings) in batches; returns their ids in order.

    Every note is validated before its batch is written, so a bad note in a batch leaves
    that batch unwritten (earlier batches stay). Auto-linking is skipped (see module doc).
    ``keyword_fn`` (what BM25 indexes) is replaceable for the benchmark's ablations only.
    """
    if batch < 1:
        raise ValueError("batch must be >= 1")
    result = BulkResult([])
    pending: list[BulkNote] = []
    seen: set[str] = set()

    def flush() -> None:
        if not pending:
            return
        now, ts = memory._now()
        payloads = [build_payload(memory, n, now, ts) for n in pending]
        _unique_ids(memory, payloads, seen)
        given = [_given_vector(memory, n, p) for n, p in zip(pending, payloads, strict=True)]
        write(memory, note_points(memory, [point_id(p["zk_id"]) for p in payloads], payloads,
                                  given, keyword_fn))
        result.zk_ids.extend(p["zk_id"] for p in payloads)
        pending.clear()

    for item in notes:
        note = BulkNote(item, project=project) if isinstance(item, str) else item
        if project and note.project is None:
            note.project = project
        pending.append(note)
        if len(pending) >= batch:
            flush()
    flush()
    ensure = getattr(memory.store, "ensure_indexes", None)
    if ensure is not None:
        # A store that grew by a bulk import gets its payload indexes now, not at next open.
        ensure()
    return result
