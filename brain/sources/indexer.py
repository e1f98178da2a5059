"""Sync of one source into the store: walk, diff, chunk, embed, upsert, delete.

Points (one collection with everything else, told apart by ``kind``):

- ``file``: one per file; ``content`` holds its first 200k characters (BM25 and filter
  mode); its dense vector is the first chunk's (no extra embedding).
- ``chunk``: one per chunk, cut along paragraphs/lines to the model's window with overlap.

Ids are deterministic: uuid5(source_id, path) for a file, uuid5(source_id, path, index)
for a chunk, so a re-run overwrites instead of duplicating and a cancelled run converges.

What is skipped:

- a file whose size and mtime match the sync state is not read at all;
- a file whose content hash matches what the store holds only gets a payload refresh;
- a chunk whose hash the store already holds for this path (any index: an insertion at
  the top shifts indexes) keeps its vector, copied with ``retrieve(with_vectors)``;
- a new file whose content hash matches another indexed file of the source (a rename or
  a copy) takes every vector from it: 0 chunks embedded;
- a .jsonl/.ndjson file whose stored text is an exact prefix of the new text (checked by
  hashing that prefix) embeds only the new tail.

Token counting: with a sentence-transformers model, chunks are cut with a cheap
regex estimate scaled by 1.3 (real/estimate was at most 1.5 and at p99 1.28 on spans
of this project's site-packages), then every chunk is checked with the model's real
tokenizer and any chunk over the window is cut again with the real counter. So no chunk
exceeds the window, at a fraction of the cost of running the tokenizer inside the
chunker's searches (3 ms per chunk measured here).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from brain.bm25 import BM25Encoder
from brain.chunker import chunk_text_ex
from brain.embedder import Embedder
from brain.redact import redact
from brain.sources.categories import categorize, parse_frontmatter
from brain.sources.filters import SourceFilter, holds_credentials
from brain.sources.registry import FileState, Registry, SourceRecord
from brain.sources.walker import (
    APPEND_SUFFIXES,
    MAX_APPEND_FILE_BYTES,
    MAX_INDEXED_CHARS,
    FileEntry,
    entry_for,
    read_text_capped,
    walk_source,
)
from brain.vector_store import Filter, Match, MatchAny, Point, VectorStore, scroll_all

log = logging.getLogger(__name__)

NAMESPACE = uuid.UUID("2d8f6a0e-5b1c-4f7e-9a33-6c0b1e7d4f25")
SOURCE_KINDS = ("file", "chunk")
HEAD_CHARS = MAX_INDEXED_CHARS
_MAX_CHUNKS = 100_000
_MD = (".md", ".mdx", ".markdown")
_RUN = re.compile(r"[A-Za-z]+|[0-9]|[^\sA-Za-z0-9]")
_SCALE = 1.3
CANCEL_BUDGET_S = 0.8


def file_point_id(source_id: str, rel: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{source_id}\0{rel}"))


def chunk_point_id(source_id: str, rel: str, index: int) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{source_id}\0{rel}\0{index}"))


def estimate_tokens(text: str) -> int:
    """Cheap word-piece estimate: a letter run of n > 6 counts 1 + (n - 3) // 4 pieces."""
    n = 0
    for m in _RUN.finditer(text):
        size = m.end() - m.start()
        n += 1 if size <= 6 else 1 + (size - 3) // 4
    return math.ceil(n * _SCALE)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Control(Protocol):
    cancel: threading.Event
    progress: dict[str, Any]


@dataclass(slots=True)
class RunStats:
    mode: str = "sync"
    files_walked: int = 0
    capped: bool = False
    files_unchanged: int = 0
    files_indexed: int = 0
    files_refreshed: int = 0
    files_renamed: int = 0
    files_appended: int = 0
    files_deleted: int = 0
    files_unindexed: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    cancelled: bool = False
    escalated: bool = False
    elapsed_s: float = 0.0
    embed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(slots=True)
class _Piece:
    index: int
    text: str
    start: int
    end: int
    line_start: int
    line_end: int
    hash: str
    vector: list[float] | None = None


@dataclass(slots=True)
class _Work:
    entry: FileEntry
    text: str
    content_hash: str
    category: str
    capture: dict[str, Any]
    tags: list[str]
    created_ts: float
    pieces: list[_Piece] = field(default_factory=list)
    keep_below: int = 0  # chunk indexes below this are kept as stored (append)
    old_n: int = 0
    file_vector: list[float] | None = None
    kind: str = "indexed"  # indexed | renamed | appended
    reused: int = 0


@dataclass(slots=True)
class _Old:
    content_hash: str
    text_len: int
    n_chunks: int
    created_ts: float
    embed_model: str
    size: int = -1
    mtime_ns: int = -1


class Indexer:
    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        bm25: BM25Encoder,
        registry: Registry,
        *,
        model_id: str,
        user_id: str,
        embed_batch: int = 128,
        max_scan_files: int = 200_000,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.bm25 = bm25
        self.registry = registry
        self.model_id = model_id
        self.user_id = user_id
        self.embed_batch = max(1, embed_batch)
        self.max_scan_files = max_scan_files
        window = int(getattr(embedder.record, "max_seq_length", 256) or 256)
        self.max_tokens = max(16, window - 2)  # [CLS] and [SEP] take two of the window
        self.overlap = min(32, self.max_tokens // 8)
        self._real_count = embedder.count_tokens
        fast = getattr(embedder.record, "provider", "") == "sentence-transformers"
        self._count = estimate_tokens if fast else embedder.count_tokens
        self._verify = fast
        # Counters for tests and benchmarks.
        self.chunks_embedded_total = 0
        self._per_chunk_s = 0.0
        self.embed_seconds_total = 0.0
        self.on_embed: Callable[[list[str]], None] | None = None

    # ------------------------------------------------------------------ entry point
    def run(
        self,
        rec: SourceRecord,
        ctl: Control,
        *,
        paths: Iterable[str] | None = None,
        mode: str = "sync",
        scope: str | None = None,
    ) -> RunStats:
        """Reconcile ``rec``: every file (``paths`` None) or exactly ``paths``.

        ``mode``: ``sync`` (mtime shortcut), ``rescan`` (read every file again) or
        ``reembed`` (embed every file in ``scope`` again, changed or not).
        """
        t0 = time.perf_counter()
        run = _Run(self, rec, ctl, mode, scope)
        try:
            if paths is None:
                run.full()
            else:
                run.targeted(set(paths))
        finally:
            run.stats.elapsed_s = time.perf_counter() - t0
            run.stats.cancelled = ctl.cancel.is_set()
        return run.stats

    # ------------------------------------------------------------------ pieces
    def chunk(
        self, text: str, offset: int = 0, first_index: int = 0, line_offset: int = 0
    ) -> list[_Piece]:
        chunks, _ = chunk_text_ex(text, self.max_tokens, self.overlap, self._count, _MAX_CHUNKS)
        spans: list[tuple[str, int, int]] = []
        for c in chunks:
            if self._verify and self._real_count(c.text) > self.max_tokens:
                sub, _ = chunk_text_ex(c.text, self.max_tokens, self.overlap, self._real_count)
                spans.extend((s.text, c.start + s.start, c.start + s.end) for s in sub)
            else:
                spans.append((c.text, c.start, c.end))
        pieces: list[_Piece] = []
        line, pos = line_offset + 1, 0
        for i, (chunk_text, start, end) in enumerate(spans):
            line += text.count("\n", pos, start)
            pos = start
            last = line + chunk_text.count("\n")
            pieces.append(
                _Piece(
                    first_index + i,
                    chunk_text,
                    start + offset,
                    end + offset,
                    line,
                    last,
                    sha(chunk_text),
                )
            )
        return pieces

    def embed(self, texts: list[str], ctl: Control) -> list[list[float]] | None:
        """Embed in batches, checking for a cancel between them; None when cancelled.

        A batch is at most ``embed_batch`` chunks and at most about CANCEL_BUDGET_S of
        work at the measured speed, so a cancel lands within about a second even on a
        slow or busy machine.
        """
        out: list[list[float]] = []
        i = 0
        while i < len(texts):
            if ctl.cancel.is_set():
                return None
            size = self.embed_batch
            if self._per_chunk_s > 0:
                size = max(4, min(size, int(CANCEL_BUDGET_S / self._per_chunk_s)))
            batch = texts[i : i + size]
            i += len(batch)
            t0 = time.perf_counter()
            vecs = self.embedder.embed_documents(batch)
            took = time.perf_counter() - t0
            per = took / len(batch)
            self._per_chunk_s = (
                per if not self._per_chunk_s else 0.7 * self._per_chunk_s + 0.3 * per
            )
            self.embed_seconds_total += took
            self.chunks_embedded_total += len(batch)
            if self.on_embed is not None:
                self.on_embed(batch)
            out.extend(vecs.tolist())
        return out


class _Run:
    """One run over one source; holds the batch of files waiting for their vectors."""

    def __init__(
        self, ix: Indexer, rec: SourceRecord, ctl: Control, mode: str, scope: str | None
    ) -> None:
        self.ix = ix
        self.rec = rec
        self.ctl = ctl
        self.mode = mode
        self.scope = scope.strip("/") if scope else None
        self.root = Path(rec.root)
        self.flt = SourceFilter(self.root, rec.exclude, rec.include, rec.use_gitignore)
        self.stats = RunStats(mode=mode)
        self.states = ix.registry.file_states(rec.id)
        self.batch: list[_Work] = []
        self.batch_texts = 0
        self.progress = ctl.progress

    # ------------------------------------------------------------------ drivers
    def full(self) -> None:
        rec, ix = self.rec, self.ix
        cfg = self.flt.config_hash()
        trusted = rec.state_complete and rec.config_hash == cfg
        if rec.config_hash and rec.config_hash != cfg and self.mode == "sync":
            # The filters or the redaction changed since the last complete run: read every
            # file again (unchanged content keeps its vectors), so nothing indexed under the
            # old rules stays unredacted.
            self.mode = "rescan"
        ix.registry.patch(rec.id, state_complete=False)
        self.progress.update(phase="walk")
        cap = rec.max_scan_files or ix.max_scan_files
        walk = walk_source(self.root, self.flt, cap, cancel=self.ctl.cancel)
        self.stats.files_walked, self.stats.capped = len(walk.files), walk.capped
        if walk.cancelled:
            return
        entries = [e for e in walk.files if self._in_scope(e.rel)]
        known = set(self.states)
        if not trusted:
            known |= self._store_paths()
        seen = {e.rel for e in entries}
        vanished = {r for r in known - seen if self._in_scope(r)}
        self._index(entries)
        if self.ctl.cancel.is_set():
            return
        self._delete(vanished)
        if self.ctl.cancel.is_set():
            return
        indexed = ix.registry.count_states(rec.id)
        snapshot = {
            "indexed": indexed,
            "unindexed": max(0, len(walk.files) - indexed),
            "total": len(walk.files),
            "capped": walk.capped,
            "total_display": f"{len(walk.files)}+" if walk.capped else str(len(walk.files)),
        }
        ix.registry.patch(rec.id, state_complete=True, config_hash=cfg, snapshot=snapshot)

    def targeted(self, paths: set[str]) -> None:
        was_complete = self.rec.state_complete
        self.ix.registry.patch(self.rec.id, state_complete=False)
        entries: list[FileEntry] = []
        vanished: set[str] = set()
        for rel in sorted(paths):
            rel = rel.strip("/")
            if not rel:
                continue
            if rel == ".gitignore" or rel.endswith("/.gitignore"):
                return self._escalate()
            got = entry_for(self.root, rel, self.flt)
            if got == "dir":
                return self._escalate()
            if isinstance(got, FileEntry):
                entries.append(got)
                continue
            prefix = rel + "/"
            vanished |= {r for r in self.states if r == rel or r.startswith(prefix)}
            if rel not in self.states and self.ix.store.retrieve([file_point_id(self.rec.id, rel)]):
                vanished.add(rel)
        self.stats.files_walked = len(entries)
        self._index(entries)
        if not self.ctl.cancel.is_set():
            self._delete(vanished)
        if not self.ctl.cancel.is_set():
            snap = dict(self.rec.snapshot)
            indexed = self.ix.registry.count_states(self.rec.id)
            unindexed = int(snap.get("unindexed", 0))
            snap.update(
                indexed=indexed, total=indexed + unindexed, total_display=str(indexed + unindexed)
            )
            self.ix.registry.patch(self.rec.id, state_complete=was_complete, snapshot=snap)

    def _escalate(self) -> None:
        self.stats.escalated = True
        self.full()

    def _in_scope(self, rel: str) -> bool:
        return self.scope is None or rel == self.scope or rel.startswith(self.scope + "/")

    def _store_paths(self) -> set[str]:
        flt = Filter(must=(Match("kind", "file"), Match("source_id", self.rec.id)))
        return {str(p.payload.get("path")) for p in scroll_all(self.ix.store, flt)}

    # ------------------------------------------------------------------ indexing
    def _index(self, entries: list[FileEntry]) -> None:
        self.progress.update(
            phase="index",
            files_total=len(entries),
            files_done=0,
            chunks_embedded=0,
            chunks_reused=0,
        )
        force = self.mode == "reembed"
        for start in range(0, len(entries), 64):
            if self.ctl.cancel.is_set():
                return
            group = entries[start : start + 64]
            todo = [e for e in group if force or self.mode == "rescan" or not self._unchanged(e)]
            self.stats.files_unchanged += len(group) - len(todo)
            olds = self._olds([e.rel for e in todo])
            for entry in todo:
                if self.ctl.cancel.is_set():
                    return
                self._prepare(entry, olds.get(entry.rel), force)
                if self.batch_texts >= self.ix.embed_batch:
                    self._flush()
            self.progress["files_done"] = start + len(group)
        self._flush()

    def _unchanged(self, e: FileEntry) -> bool:
        st = self.states.get(e.rel)
        return (
            st is not None
            and st.size == e.size
            and st.mtime_ns == e.mtime_ns
            and st.embed_model == self.ix.model_id
        )

    def _olds(self, rels: list[str]) -> dict[str, _Old]:
        out: dict[str, _Old] = {}
        missing = []
        for rel in rels:
            st = self.states.get(rel)
            if st is not None:
                out[rel] = _Old(
                    st.content_hash,
                    st.text_len,
                    st.n_chunks,
                    st.created_ts,
                    st.embed_model,
                    st.size,
                    st.mtime_ns,
                )
            else:
                missing.append(rel)
        if missing:
            ids = [file_point_id(self.rec.id, r) for r in missing]
            for p in self.ix.store.retrieve(ids):
                pl = p.payload
                out[str(pl["path"])] = _Old(
                    str(pl.get("content_hash", "")),
                    int(pl.get("text_len", 0)),
                    int(pl.get("n_chunks", 0)),
                    float(pl.get("created_ts", 0.0)),
                    str(pl.get("embed_model", "")),
                )
        return out

    def _read(self, entry: FileEntry) -> str | None:
        limit = MAX_APPEND_FILE_BYTES if entry.rel.endswith(APPEND_SUFFIXES) else HEAD_CHARS
        try:
            text, _ = read_text_capped(entry.path, limit, root=self.root)
        except OSError:
            return None
        return text

    def _prepare(self, entry: FileEntry, old: _Old | None, force: bool) -> None:
        text = self._read(entry)
        if text is not None and holds_credentials(entry.rel, text):
            text = None  # a credential file under an innocent name: never indexed
        if text is not None:
            # Everything stored for a file (chunks, head, hashes, offsets) is of the redacted
            # text; keep_lines keeps line numbers true to the file on disk.
            text = redact(text, keep_lines=True).text
        if text is None:
            self.stats.files_unindexed += 1
            if old is not None:  # now binary or unreadable: its old text is stale
                self._delete({entry.rel})
            return
        content_hash = sha(text)
        category, capture = categorize(entry.rel, text)
        work = _Work(
            entry,
            text,
            content_hash,
            category,
            capture,
            _tags(entry.rel, text),
            old.created_ts if old and old.created_ts else entry.mtime_ns / 1e9,
        )
        work.old_n = old.n_chunks if old else 0
        same_model = old is not None and old.embed_model == self.ix.model_id
        if not force and same_model and old is not None and old.content_hash == content_hash:
            return self._refresh(work, old)
        if not text.strip():
            return self._finish([work])
        if not force and same_model and old is not None and self._try_append(work, old):
            return
        donor = None if force else self._donor(entry.rel, content_hash)
        work.pieces = self.ix.chunk(text)
        if not force and (old is not None or donor is not None):
            self._reuse(work, [entry.rel] + ([donor] if donor else []))
        if donor is not None and all(p.vector is not None for p in work.pieces):
            work.kind = "renamed"
        self._queue(work)

    def _refresh(self, work: _Work, old: _Old) -> None:
        """Content unchanged: refresh the payload only (mtime, size, category)."""
        e = work.entry
        ids = [file_point_id(self.rec.id, e.rel)]
        ids += [chunk_point_id(self.rec.id, e.rel, i) for i in range(old.n_chunks)]
        if old.size != e.size or old.mtime_ns != e.mtime_ns:
            self.ix.store.set_payload(
                ids,
                {
                    "mtime_ns": e.mtime_ns,
                    "size": e.size,
                    "updated_ts": e.mtime_ns / 1e9,
                    "category": work.category,
                    "tags": work.tags,
                    "frontmatter": work.capture,
                },
            )
        self.stats.files_refreshed += 1
        self.ix.registry.put_states(self.rec.id, [self._state(work, len(work.text), old.n_chunks)])

    def _try_append(self, work: _Work, old: _Old) -> bool:
        rel, text = work.entry.rel, work.text
        if not rel.endswith(APPEND_SUFFIXES) or not 0 < old.text_len < len(text):
            return False
        if old.n_chunks < 1 or sha(text[: old.text_len]) != old.content_hash:
            return False
        head = self.ix.store.retrieve([file_point_id(self.rec.id, rel)], with_vectors=True)
        if not head or head[0].dense is None:
            return False
        work.file_vector = head[0].dense
        lines = text.count("\n", 0, old.text_len)
        work.pieces = self.ix.chunk(text[old.text_len :], old.text_len, old.n_chunks, lines)
        work.keep_below = old.n_chunks
        work.kind = "appended"
        self._queue(work)
        return True

    def _donor(self, rel: str, content_hash: str) -> str | None:
        flt = Filter(
            must=(
                Match("kind", "file"),
                Match("source_id", self.rec.id),
                Match("content_hash", content_hash),
                Match("embed_model", self.ix.model_id),
            ),
            must_not=(Match("path", rel),),
        )
        points, _ = self.ix.store.scroll(flt, limit=1)
        return str(points[0].payload["path"]) if points else None

    def _reuse(self, work: _Work, paths: list[str]) -> None:
        by_hash: dict[str, list[float]] = {}
        hashes = tuple({p.hash for p in work.pieces})
        flt = Filter(
            must=(
                Match("kind", "chunk"),
                Match("source_id", self.rec.id),
                MatchAny("path", tuple(paths)),
                Match("embed_model", self.ix.model_id),
                MatchAny("chunk_hash", hashes),
            )
        )
        for p in scroll_all(self.ix.store, flt, with_vectors=True):
            if p.dense is not None:
                by_hash.setdefault(str(p.payload.get("chunk_hash")), p.dense)
        for piece in work.pieces:
            piece.vector = by_hash.get(piece.hash)

    def _queue(self, work: _Work) -> None:
        missing = sum(1 for p in work.pieces if p.vector is None)
        work.reused = len(work.pieces) - missing
        self.batch.append(work)
        self.batch_texts += missing
        if missing == 0:
            self._flush()

    def _flush(self) -> None:
        if not self.batch:
            return
        batch, self.batch, self.batch_texts = self.batch, [], 0
        need = [p for w in batch for p in w.pieces if p.vector is None]
        if need:
            self.progress["phase"] = "embed"
            t0 = time.perf_counter()
            vecs = self.ix.embed([p.text for p in need], self.ctl)
            self.stats.embed_s += time.perf_counter() - t0
            if vecs is None:
                return  # cancelled: these files stay for the next run
            for piece, vec in zip(need, vecs, strict=True):
                piece.vector = vec
            self.stats.chunks_embedded += len(need)
            self.progress["chunks_embedded"] = self.stats.chunks_embedded
            self.progress["phase"] = "index"
        self._finish(batch)

    def _finish(self, works: Sequence[_Work]) -> None:
        points: list[Point] = []
        stale: list[str] = []
        states: list[FileState] = []
        for w in works:
            points.extend(self._points(w))
            n = (w.pieces[-1].index + 1) if w.pieces else 0
            stale.extend(chunk_point_id(self.rec.id, w.entry.rel, i) for i in range(n, w.old_n))
            if not w.pieces:
                stale.append(file_point_id(self.rec.id, w.entry.rel))
            states.append(self._state(w, len(w.text), n))
            self.stats.chunks_reused += w.reused
            if w.kind == "renamed":
                self.stats.files_renamed += 1
            elif w.kind == "appended":
                self.stats.files_appended += 1
            else:
                self.stats.files_indexed += 1
        for i in range(0, len(points), 512):
            self.ix.store.upsert(points[i : i + 512])
        self.ix.store.delete(stale)
        self.ix.registry.put_states(self.rec.id, states)
        self.progress["chunks_reused"] = self.stats.chunks_reused

    def _state(self, w: _Work, text_len: int, n_chunks: int) -> FileState:
        e = w.entry
        return FileState(
            e.rel,
            e.size,
            e.mtime_ns,
            w.content_hash,
            text_len,
            n_chunks,
            w.category,
            w.created_ts,
            self.ix.model_id,
        )

    def _base(self, w: _Work) -> dict[str, Any]:
        e = w.entry
        parts = e.rel.split("/")
        return {
            "source_id": self.rec.id,
            "project": self.rec.project,
            "path": e.rel,
            "name": parts[-1],
            "dirs": ["/".join(parts[: i + 1]) for i in range(len(parts) - 1)],
            "category": w.category,
            "frontmatter": w.capture,
            "tags": w.tags,
            "content_hash": w.content_hash,
            "size": e.size,
            "mtime_ns": e.mtime_ns,
            "updated_ts": e.mtime_ns / 1e9,
            "created_ts": w.created_ts,
            "embed_model": self.ix.model_id,
            # The source's owner, so store queries can filter for the caller (tenancy.py).
            "user_id": self.rec.user_id or self.ix.user_id,
            "agent_id": self.rec.agent_id,
            "visibility": self.rec.visibility,
        }

    def _points(self, w: _Work) -> list[Point]:
        if not w.pieces:
            return []
        base = self._base(w)
        out = []
        for p in w.pieces:
            payload = {
                **base,
                "kind": "chunk",
                "content": p.text,
                "chunk_hash": p.hash,
                "chunk_index": p.index,
                "line_start": p.line_start,
                "line_end": p.line_end,
                "char_start": p.start,
                "char_end": p.end,
            }
            out.append(
                Point(
                    chunk_point_id(self.rec.id, w.entry.rel, p.index),
                    payload,
                    dense=p.vector,
                    sparse=self.ix.bm25.document(p.text),
                )
            )
        head = w.text[:HEAD_CHARS]
        n = w.pieces[-1].index + 1
        first = w.file_vector if w.keep_below else w.pieces[0].vector
        payload = {
            **base,
            "kind": "file",
            "content": head,
            "text_len": len(w.text),
            "n_chunks": n,
            "truncated": len(w.text) > HEAD_CHARS,
            "line_start": 1,
            "line_end": w.text.count("\n") + 1,
        }
        out.append(
            Point(
                file_point_id(self.rec.id, w.entry.rel),
                payload,
                dense=first,
                sparse=self.ix.bm25.document(head),
            )
        )
        return out

    # ------------------------------------------------------------------ deletion
    def _delete(self, rels: set[str]) -> None:
        doomed = []
        for rel in sorted(rels):
            # A capped walk does not see every file: only drop what is really gone.
            if self.stats.capped and isinstance(entry_for(self.root, rel, self.flt), FileEntry):
                continue
            doomed.append(rel)
        self.progress["phase"] = "delete"
        for i in range(0, len(doomed), 256):
            if self.ctl.cancel.is_set():
                return
            group = tuple(doomed[i : i + 256])
            self.ix.store.delete_by_filter(
                Filter(
                    must=(
                        Match("source_id", self.rec.id),
                        MatchAny("kind", SOURCE_KINDS),
                        MatchAny("path", group),
                    )
                )
            )
            self.ix.registry.delete_states(self.rec.id, group)
            self.stats.files_deleted += len(group)


def _tags(rel: str, text: str) -> list[str]:
    if not rel.lower().endswith(_MD):
        return []
    raw = parse_frontmatter(text).get("tags")
    if isinstance(raw, str):
        raw = [t.strip() for t in raw.split(",")]
    if not isinstance(raw, list):
        return []
    return [str(t)[:100] for t in raw if isinstance(t, (str, int)) and str(t).strip()][:50]
