"""The integrity scan: one read-only pass over the store, checked against the records kept
outside it (the graph cache, the sources state in sources.db, the files table).

Findings, each reported as a count and a sample of ids (never content):

- ``orphan_chunks``: source chunks whose source is gone, whose file point is missing, or
  whose file sources.db no longer lists (they go with their file point);
- ``orphan_files``: source file points whose source is gone or whose file sources.db no
  longer lists;
- ``orphan_doc_chunks``: passages of uploaded documents missing from the files table;
- ``orphan_hype``: hypothetical questions (HyPE, brain/memory/hype.py) whose note is gone,
  forgotten, no longer permanent, or whose embedding model is not the active one (derived
  data: the note's next HyPE job writes them again);
- ``dangling_links``: notes whose ``links`` name ids that are neither a note nor a tombstone;
- ``notes_missing_from_graph`` / ``graph_nodes_missing_from_store`` (the second only in a
  scan over everyone: a graph node carries no owner);
- ``other_model``: points whose ``embed_model`` is not the store's active model;
- ``missing_dense`` / ``missing_bm25``: points without their dense vector, or without a BM25
  vector although their text has indexable words;
- ``missing_fields``: payloads without a field their kind requires;
- ``stale_recall_keys``: points whose ``recall_key`` is not the one their payload gives
  (brain/store/recall_key.py), checked once the store trusts its keys: an older version's write
  leaves a key as it was, and a search trusts it.

The orphan kinds are what GC deletes (gc.py); links, graph and vectors are what repair fixes
(repair.py), recall keys included.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from brain.embedding.bm25 import BM25Encoder
from brain.memory.core import keyword_text
from brain.notes import REQUIRED_FIELDS, point_id
from brain.store import recall_key
from brain.vector_store import (
    DENSE,
    SPARSE,
    Filter,
    HasVector,
    Match,
    MatchAny,
    VectorStore,
    scroll_all,
)

ORPHANS = ("orphan_chunks", "orphan_files", "orphan_doc_chunks", "orphan_hype")
FINDINGS = (
    *ORPHANS, "dangling_links", "notes_missing_from_graph", "graph_nodes_missing_from_store",
    "other_model", "missing_dense", "missing_bm25", "missing_fields", "stale_recall_keys",
)
# Kinds that carry vectors (meta and tombstones do not).
VECTOR_KINDS = ("note", "file", "chunk", "doc_chunk", "hype")
SOURCE_FIELDS = ("source_id", "path", "project", "content", "user_id", "embed_model")
REQUIRED_BY_KIND: dict[str, tuple[str, ...]] = {
    "note": tuple(REQUIRED_FIELDS),
    "file": SOURCE_FIELDS,
    "chunk": (*SOURCE_FIELDS, "chunk_index"),
    "doc_chunk": ("file_id", "project", "content", "user_id", "chunk_index", "embed_model"),
    "hype": ("parent_id", "project", "user_id", "question", "embed_model"),
}
PAGE = 1024


@dataclass(slots=True)
class Records:
    """What the scan checks the store against (service.py reads it from the services)."""

    source_ids: set[str]  # every source sources.db knows (any owner: an id names one source)
    source_files: Callable[[str], set[str]]  # a source's file paths in sources.db
    file_ids: set[str]  # every uploaded document of the files table
    graph_nodes: set[str]  # the graph cache's note ids
    model: str  # the store's active embedding model
    # Whether sources.db's file list of a source is whole. It is not while the states were
    # reset (the next sync compares every file) or a first sync runs: a file point missing
    # from an unfinished list is not an orphan, or GC would delete what the next sync keeps.
    states_complete: Callable[[str], bool] = lambda sid: True
    # Whether searches trust the recall keys (brain/store/recall_key.py: every note was keyed for
    # this generation). Only then is a key that its payload does not give a finding: a store
    # still being keyed has notes without one by design.
    keys_trusted: bool = False


@dataclass(slots=True)
class Finding:
    count: int = 0
    sample: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # point ids (GC and repair act on them)

    def add(self, shown: str, pid: str, sample: int) -> None:
        self.count += 1
        if len(self.sample) < sample:
            self.sample.append(shown)
        self.ids.append(pid)


@dataclass(slots=True)
class ScanResult:
    points: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    by_model: Counter[str] = field(default_factory=Counter)
    findings: dict[str, Finding] = field(default_factory=lambda: {k: Finding() for k in FINDINGS})
    # note zk_id -> the ids its links name that exist nowhere (repair drops them)
    dangling: dict[str, list[str]] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def report(self) -> dict[str, Any]:
        found = {k: {"count": f.count, "sample": f.sample} for k, f in self.findings.items()}
        return {
            "ok": not any(f.count for f in self.findings.values()),
            "points": self.points,
            "by_kind": dict(self.by_kind),
            "by_model": dict(self.by_model),
            "findings": found,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def _kind(payload: dict[str, Any]) -> str:
    kind = payload.get("kind")
    if isinstance(kind, str) and kind:
        return kind
    return "note" if payload.get("zk_id") else "unknown"


def _shown(pid: str, payload: dict[str, Any]) -> str:
    zk = payload.get("zk_id")
    return zk if isinstance(zk, str) and zk else pid


def scan(
    store: VectorStore,
    records: Records,
    scope: tuple[Any, ...],
    bm25: BM25Encoder,
    *,
    sample: int = 20,
    everyone: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ScanResult:
    """Scan the points matching the ``scope`` conditions (the caller's, maybe one project)."""
    t0 = time.perf_counter()
    res = ScanResult()
    f = res.findings
    notes: dict[str, list[str]] = {}  # zk_id -> links
    note_pid: dict[str, str] = {}
    known_zk: set[str] = set()
    file_points: set[tuple[str, str]] = set()
    chunks: list[tuple[str, str, str]] = []  # (point id, source_id, path)
    live: set[str] = set()  # permanent, not forgotten notes: what may have HyPE questions
    questions: list[tuple[str, str]] = []  # (point id, parent zk_id) of HyPE points
    files_of: dict[str, set[str]] = {}

    def source_files(sid: str) -> set[str]:
        if sid not in files_of:
            files_of[sid] = records.source_files(sid)
        return files_of[sid]

    flt = Filter(must=scope) if scope else None
    for n, p in enumerate(scroll_all(store, flt, page=PAGE), 1):
        if progress is not None and n % PAGE == 0:
            progress(PAGE)
        pl = p.payload
        kind = _kind(pl)
        res.points += 1
        res.by_kind[kind] += 1
        if kind == "meta":
            continue
        model = pl.get("embed_model")
        if kind in VECTOR_KINDS and isinstance(model, str):
            res.by_model[model] += 1
            if model != records.model:
                f["other_model"].add(_shown(p.id, pl), p.id, sample)
        if records.keys_trusted and recall_key.patch(pl) is not None:
            # A key another writer left stale (an older version's forget or visibility
            # change): a search would show a forgotten note or another user's private one.
            f["stale_recall_keys"].add(_shown(p.id, pl), p.id, sample)
        missing = [k for k in REQUIRED_BY_KIND.get(kind, ()) if k not in pl]
        if missing:
            f["missing_fields"].add(f"{_shown(p.id, pl)}: {', '.join(missing[:5])}", p.id, sample)
        if kind in ("note", "retired"):
            zk = pl.get("zk_id")
            if isinstance(zk, str):
                known_zk.add(zk)
                if kind == "note":
                    if pl.get("memory_type") == "permanent" and not pl.get("forgotten"):
                        live.add(zk)
                    links = pl.get("links")
                    notes[zk] = [x for x in links if isinstance(x, str)] if isinstance(
                        links, list) else []
                    note_pid[zk] = p.id
        elif kind in ("file", "chunk"):
            sid, path = str(pl.get("source_id", "")), str(pl.get("path", ""))
            gone = sid not in records.source_ids
            if kind == "file":
                file_points.add((sid, path))
                if gone or (records.states_complete(sid) and path not in source_files(sid)):
                    f["orphan_files"].add(p.id, p.id, sample)
            elif gone:
                f["orphan_chunks"].add(p.id, p.id, sample)
            else:
                chunks.append((p.id, sid, path))
        elif kind == "doc_chunk" and str(pl.get("file_id", "")) not in records.file_ids:
            f["orphan_doc_chunks"].add(p.id, p.id, sample)
        elif kind == "hype":
            if pl.get("embed_model") != records.model:
                f["orphan_hype"].add(p.id, p.id, sample)
            else:
                questions.append((p.id, str(pl.get("parent_id", ""))))
    for pid, sid, path in chunks:  # a chunk of an orphan (or missing) file point goes with it
        if (sid, path) not in file_points or (records.states_complete(sid)
                                              and path not in source_files(sid)):
            f["orphan_chunks"].add(pid, pid, sample)
    _questions(store, questions, live, known_zk, res, sample)
    _links(store, notes, known_zk, note_pid, res, sample)
    for zk in sorted(notes):
        if zk not in records.graph_nodes:
            f["notes_missing_from_graph"].add(zk, note_pid[zk], sample)
    if everyone:
        for zk in sorted(records.graph_nodes - known_zk):
            f["graph_nodes_missing_from_store"].add(zk, zk, sample)
    _vectors(store, scope, bm25, res, sample)
    res.elapsed_s = time.perf_counter() - t0
    return res


def _questions(store: VectorStore, questions: list[tuple[str, str]], live: set[str],
               scanned: set[str], res: ScanResult, sample: int) -> None:
    """A HyPE point is an orphan unless its note is a live permanent note (looked up by id
    when the scan's scope did not hold it)."""
    outside = sorted({z for _, z in questions if z and z not in scanned})
    for i in range(0, len(outside), 256):
        for p in store.retrieve([point_id(z) for z in outside[i : i + 256]]):
            pl = p.payload
            if (_kind(pl) == "note" and pl.get("memory_type") == "permanent"
                    and not pl.get("forgotten")):
                live.add(str(pl.get("zk_id")))
    for pid, parent in questions:
        if parent not in live:
            res.findings["orphan_hype"].add(pid, pid, sample)


def _links(store: VectorStore, notes: dict[str, list[str]], known: set[str],
           note_pid: dict[str, str], res: ScanResult, sample: int) -> None:
    """Links to ids outside the scanned scope (another project) are looked up by id."""
    unknown = sorted({z for links in notes.values() for z in links if z not in known})
    exists: set[str] = set()
    for i in range(0, len(unknown), 256):
        part = unknown[i : i + 256]
        by_pid = {point_id(z): z for z in part}
        for p in store.retrieve(list(by_pid)):
            if _kind(p.payload) in ("note", "retired"):
                exists.add(by_pid.get(p.id, ""))
    for zk in sorted(notes):
        bad = [z for z in notes[zk] if z not in known and z not in exists]
        if bad:
            res.dangling[zk] = bad
            res.findings["dangling_links"].add(f"{zk} -> {', '.join(bad[:3])}", note_pid[zk],
                                               sample)


def _vectors(store: VectorStore, scope: tuple[Any, ...], bm25: BM25Encoder, res: ScanResult,
             sample: int) -> None:
    kinds = MatchAny("kind", VECTOR_KINDS)
    for p in scroll_all(store, Filter(must=(*scope, kinds), must_not=(HasVector(DENSE),))):
        res.findings["missing_dense"].add(_shown(p.id, p.payload), p.id, sample)
    for p in scroll_all(store, Filter(must=(*scope, kinds), must_not=(HasVector(SPARSE),))):
        if bm25_text(p.payload, bm25) is not None:
            res.findings["missing_bm25"].add(_shown(p.id, p.payload), p.id, sample)


def bm25_text(payload: dict[str, Any], bm25: BM25Encoder) -> str | None:
    """The text a point's BM25 vector indexes, when it has indexable words."""
    try:
        text = keyword_text(payload) if _kind(payload) == "note" else str(payload["content"])
    except KeyError:
        return None
    return text if bm25.document(text).indices else None


def note_filter(ids: Iterable[str]) -> Filter:
    return Filter(must=(Match("kind", "note"), MatchAny("zk_id", tuple(ids))))
