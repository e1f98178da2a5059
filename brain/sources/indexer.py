"""Sync of one source into the store: walk, diff, chunk, embed, upsert, delete.

Points (one collection with everything else, told apart by ``kind``):

- ``file``: one per file; ``content`` holds its first 200k characters (BM25 and filter
  mode); its dense vector is the first chunk's (no extra embedding).
- ``chunk``: one per chunk, cut along paragraphs/lines to the model's window with overlap.

A run goes through phases, each in its own module over one shared :class:`~brain.sources.run.Run`:

- reconcile.py: walk the source (or look at the named paths) and plan: what to index, what
  vanished; record the snapshot at the end;
- changes.py: diff each file against the sync state and do the least work that catches up
  (skip, refresh the payload, take vectors of a rename, embed only an appended tail);
- writer.py: embed the batch, upsert points, delete what vanished;
- points.py: what a file becomes in the store (deterministic ids, payloads, state).

Token counting: with a sentence-transformers model, chunks are cut with a cheap
regex estimate scaled by 1.3 (real/estimate was at most 1.5 and at p99 1.28 on spans
of this project's site-packages), then every chunk is checked with the model's real
tokenizer and any chunk over the window is cut again with the real counter. So no chunk
exceeds the window, at a fraction of the cost of running the tokenizer inside the
chunker's searches (3 ms per chunk measured here).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from brain.embedding.bm25 import BM25Encoder
from brain.embedding.lanes import Lanes
from brain.embedding.registry import Embedder
from brain.sources.chunker import chunk_text_ex
from brain.sources.points import (
    HEAD_CHARS,
    NAMESPACE,
    SOURCE_KINDS,
    Piece,
    chunk_point_id,
    file_point_id,
    sha,
)
from brain.sources.reconcile import Reconcile
from brain.sources.registry import Registry, SourceRecord
from brain.sources.run import Control, Run, RunStats
from brain.vector_store import VectorStore

log = logging.getLogger(__name__)

__all__ = [
    "CANCEL_BUDGET_S",
    "HEAD_CHARS",
    "NAMESPACE",
    "SOURCE_KINDS",
    "Control",
    "Indexer",
    "RunStats",
    "chunk_point_id",
    "estimate_tokens",
    "file_point_id",
    "sha",
]

_MAX_CHUNKS = 100_000
_RUN = re.compile(r"[A-Za-z]+|[0-9]|[^\sA-Za-z0-9]")
_SCALE = 1.3
CANCEL_BUDGET_S = 0.8


def estimate_tokens(text: str) -> int:
    """Cheap word-piece estimate: a letter run of n > 6 counts 1 + (n - 3) // 4 pieces."""
    n = 0
    for m in _RUN.finditer(text):
        size = m.end() - m.start()
        n += 1 if size <= 6 else 1 + (size - 3) // 4
    return math.ceil(n * _SCALE)


# (project, source id, path, owner fields of the source): the hot-file counter (brain/health).
FileWritten = Callable[[str, str, str, dict[str, str]], None]
# (source id, paths written or deleted by one run): the citations' re-check (brain/citations).
FilesChanged = Callable[[str, set[str]], object]


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
        on_file_written: FileWritten | None = None,
        on_files_changed: FilesChanged | None = None,
        lanes: Lanes | None = None,
    ) -> None:
        self.store = store
        self.lanes = lanes or Lanes()  # tool calls first (brain/app.py shares the brain's)
        self._on_file_written = on_file_written
        self._on_files_changed = on_files_changed
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
        run = Run(self, rec, ctl, mode, scope)
        plan = Reconcile(run)
        try:
            if paths is None:
                plan.full()
            else:
                plan.targeted(set(paths))
        finally:
            run.stats.elapsed_s = time.perf_counter() - t0
            run.stats.cancelled = ctl.cancel.is_set()
            self._files_changed(rec, run.touched)
        return run.stats

    def _files_changed(self, rec: SourceRecord, rels: set[str]) -> None:
        if self._on_files_changed is None or not rels:
            return
        try:
            self._on_files_changed(rec.id, rels)
        except Exception:  # noqa: BLE001 - a re-check never breaks a sync
            log.exception("citation re-check failed")

    # ------------------------------------------------------------------ pieces
    def chunk(
        self, text: str, offset: int = 0, first_index: int = 0, line_offset: int = 0
    ) -> list[Piece]:
        chunks, _ = chunk_text_ex(text, self.max_tokens, self.overlap, self._count, _MAX_CHUNKS)
        spans: list[tuple[str, int, int]] = []
        for c in chunks:
            if self._verify and self._real_count(c.text) > self.max_tokens:
                sub, _ = chunk_text_ex(c.text, self.max_tokens, self.overlap, self._real_count)
                spans.extend((s.text, c.start + s.start, c.start + s.end) for s in sub)
            else:
                spans.append((c.text, c.start, c.end))
        pieces: list[Piece] = []
        line, pos = line_offset + 1, 0
        for i, (chunk_text, start, end) in enumerate(spans):
            line += text.count("\n", pos, start)
            pos = start
            last = line + chunk_text.count("\n")
            pieces.append(
                Piece(
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

    def file_written(self, rec: SourceRecord, rel: str) -> None:
        if self._on_file_written is None:
            return
        owner = {"user_id": rec.user_id or self.user_id, "agent_id": rec.agent_id,
                 "visibility": rec.visibility}
        try:
            self._on_file_written(rec.project, rec.id, rel, owner)
        except Exception:  # noqa: BLE001 - counting never breaks a sync
            log.exception("hot-file count failed")

    def embed(self, texts: list[str], ctl: Control) -> list[list[float]] | None:
        """Embed in the background lane (brain/embedding/lanes.py): batches of at most
        ``embed_batch`` chunks and about ``lanes.budget_s`` of work (well under
        CANCEL_BUDGET_S), each after the tool calls in flight, with a cancel checked between
        them; None when cancelled."""

        def one(batch: Sequence[str]) -> np.ndarray:
            t0 = time.perf_counter()
            vecs = self.embedder.embed_documents(batch)
            self.embed_seconds_total += time.perf_counter() - t0
            self.chunks_embedded_total += len(batch)
            if self.on_embed is not None:
                self.on_embed(list(batch))
            return vecs

        vecs = self.lanes.embed("sources", one, texts, limit=self.embed_batch,
                                stop=ctl.cancel.is_set)
        return None if vecs is None else vecs.tolist()

    def pause(self) -> None:
        """Let the tool calls in flight go first (between files: reading, redacting and
        chunking a file is work too)."""
        self.lanes.turn("sources")
