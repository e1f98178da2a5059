"""The files worker: turns a queued upload into ready passages, one file at a time.

For each file: parse (or read back its stored, redacted text), chunk to the model's window,
embed in batches with retries, and write ``doc_chunk`` points as ``pending``; flip them to
``ready`` only when the whole file is in, so search never sees half a file. A failure
removes what was written and records the reason; a stop leaves the file ``processing`` to
resume at the next start (a bounded number of times). Every write of points happens under
the service's write lock after checking the record is still this generation, so a delete or
reprocess meanwhile leaves no stray points behind.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from brain.clock import Clock, iso
from brain.embedding.bm25 import BM25Encoder
from brain.embedding.lanes import Lanes
from brain.embedding.registry import Embedder
from brain.errors import BrainError, ParseError
from brain.files import deadline as file_deadline
from brain.files.parsers import (
    PARSE_BUDGET_S,
    ParsedDocument,
    page_for_offset,
    parse_document,
)
from brain.files.retention import Keeper, from_doc, redact_parsed, to_doc
from brain.files.store import BlobStore, FileRecords, TextStore
from brain.search.fusion import looks_like_code
from brain.sources.chunker import Chunk, chunk_text_ex
from brain.trust.redact import redact
from brain.vector_store import Filter, Match, Point, VectorStore
from config import FilesSettings

__all__ = ["FileWorker", "chunk_point_id", "chunks_of"]

log = logging.getLogger(__name__)
T = TypeVar("T")

# Tokens kept free under the model's max sequence length ([CLS]/[SEP] and counter drift).
SEQ_MARGIN = 8
_NAMESPACE = uuid.UUID("3d0e8f4a-5b7c-4e21-9a6d-1c2b3e4f5a6b")


def chunk_point_id(file_id: str, index: int) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{file_id}:{index}"))


def chunks_of(file_id: str) -> Filter:
    return Filter(must=(Match("kind", "doc_chunk"), Match("file_id", file_id)))


class _Interrupted(Exception):
    """The service is stopping; the file stays ``processing`` and resumes at next start."""


class _Failed(Exception):
    """The file cannot be indexed; the message is the reason recorded on it."""


class FileWorker:
    def __init__(
        self,
        *,
        store: VectorStore,
        embedder: Embedder,
        bm25: BM25Encoder,
        clock: Clock,
        model_id: str,
        records: FileRecords,
        blobs: BlobStore,
        texts: TextStore,
        keeper: Keeper,
        cfg: FilesSettings,
        redact_secrets: bool,
        write_lock: threading.RLock,
        stop: threading.Event,
        lanes: Lanes | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.bm25 = bm25
        self.clock = clock
        self.model_id = model_id
        self.records = records
        self.blobs = blobs
        self.texts = texts
        self.keeper = keeper
        self.cfg = cfg  # the live [files] section: read at each use
        self.redact_secrets = redact_secrets
        self.write_lock = write_lock
        self.stop = stop
        self.lanes = lanes or Lanes()  # tool calls first (brain/app.py shares the brain's)
        self._queue: queue.Queue[tuple[str, int] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._busy = threading.Event()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="brain-files", daemon=True)
        self._thread.start()

    def enqueue(self, file_id: str, generation: int) -> None:
        self._queue.put((file_id, generation))

    def close(self, timeout: float) -> None:
        """Stop after the file in hand (its state is kept); wait up to ``timeout`` s."""
        self.stop.set()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            if self._thread.is_alive():
                log.warning("files worker did not stop within %.0fs", timeout)
            self._thread = None

    def _run(self) -> None:
        while not self.stop.is_set():
            job = self._queue.get()
            if job is None:
                return
            self._busy.set()
            try:
                self.process(*job)
            except _Interrupted:
                return
            except Exception as exc:  # noqa: BLE001 - one bad file never stops the worker
                log.exception("processing file %s failed unexpectedly", job[0])
                self.fail(job[0], job[1], f"internal error: {type(exc).__name__}: {exc}")
            finally:
                self._busy.clear()

    def current(self, file_id: str, generation: int) -> dict[str, Any] | None:
        rec = self.records.get(file_id)
        if rec is None or rec["generation"] != generation or rec["status"] != "processing":
            return None
        return rec

    def process(self, file_id: str, generation: int) -> None:
        rec = self.current(file_id, generation)
        if rec is None:
            return
        started = time.monotonic()
        with self.write_lock:
            self.drop_points(file_id)  # leftovers of an interrupted run
        if not self._count_attempt(rec, generation):
            return
        timeout = self.cfg.process_timeout_s
        deadline = started + timeout
        try:
            parsed, redacted_before = self._parsed(rec, deadline, timeout)
            chunks, truncated = self._chunk(parsed.text)
            if not chunks:
                raise _Failed("no text could be extracted (a scanned PDF needs OCR first)")
            file_deadline.check(deadline, timeout)
            ids, redactions = self._write_chunks(rec, generation, parsed, chunks, deadline)
            redactions += redacted_before
        except (_Failed, file_deadline.DeadlinePassed) as exc:
            self.fail(file_id, generation, str(exc))
            return
        if ids is None:
            return  # deleted or reprocessed meanwhile
        with self.write_lock:
            if self.current(file_id, generation) is None:
                return
            self.store.set_payload(ids, {"file_status": "ready"})
            self.records.update(
                file_id, status="ready", chunks_count=len(ids), reason=None,
                format=parsed.format, pages=len(parsed.pages) or None, truncated=truncated,
                redactions=redactions, embed_model=self.model_id,
                processing_s=round(time.monotonic() - started, 3),
                updated_at=iso(self.clock.now()),
            )  # fmt: skip
        log.info("file %s (%s) ready: %d chunks", file_id, rec["file_name"], len(ids))

    def _parsed(
        self, rec: dict[str, Any], deadline: float, timeout: float
    ) -> tuple[ParsedDocument, int]:
        """The file's text and the secrets redacted from it: the stored text, or the raw
        bytes parsed, redacted and stored (after which the bytes go, unless kept)."""
        doc = self.texts.get(rec["id"])
        if doc is not None:
            return from_doc(doc)
        parsed = file_deadline.run_within(
            lambda: self._parse(rec, deadline), deadline, timeout, self.stop, _Interrupted
        )
        count = 0
        if self.redact_secrets:
            parsed, count = redact_parsed(parsed)
        self.texts.put(rec["id"], to_doc(parsed, count))
        self.keeper.drop_raw(rec)
        return parsed, count

    def _count_attempt(self, rec: dict[str, Any], generation: int) -> bool:
        """Count this start on the record; False (and the file failed) once a file left
        'processing' by crashes has used up its attempts, so it is not resumed forever."""
        attempts = int(rec.get("attempts") or 0) + 1
        if attempts > self.cfg.max_attempts:
            self.fail(rec["id"], generation, (
                f"processing did not finish in {self.cfg.max_attempts} attempts (the server "
                "stopped or crashed while on it each time); reprocess_file to try again"
            ))  # fmt: skip
            return False
        self.records.update(rec["id"], attempts=attempts)
        return True

    def _parse(self, rec: dict[str, Any], deadline: float = float("inf")) -> ParsedDocument:
        """The file parsed within its budget: the parsers' own (a PDF's) and what is left of
        the file's deadline, so a parse abandoned at the deadline stops too."""
        try:
            data = self.blobs.read(rec["storage_path"])
        except (FileNotFoundError, IsADirectoryError) as exc:
            raise _Failed("the stored bytes are missing; delete and upload the file again") from exc
        try:
            return parse_document(
                data, rec["file_name"], max_expanded_bytes=self.cfg.max_expanded_bytes,
                budget_s=max(0.0, min(PARSE_BUDGET_S, deadline - time.monotonic())),
            )
        except ParseError as exc:
            raise _Failed(exc.message) from exc

    def chunk_budget(self) -> tuple[int, int]:
        """(max_tokens, overlap_tokens) per chunk for the active model and settings."""
        max_tokens = self.cfg.chunk_tokens or max(
            16, int(self.embedder.record.max_seq_length) - SEQ_MARGIN
        )
        return max_tokens, min(self.cfg.overlap_tokens, max_tokens // 2)

    def _chunk(self, text: str) -> tuple[list[Chunk], bool]:
        max_tokens, overlap = self.chunk_budget()
        try:
            return chunk_text_ex(
                text, max_tokens, overlap, self._count_tokens, self.cfg.max_chunks,
                max_chars=self.cfg.max_chunk_chars,
            )  # fmt: skip
        except BrainError as exc:
            raise _Failed(f"could not chunk the text: {exc.message}") from exc

    def _write_chunks(
        self,
        rec: dict[str, Any],
        generation: int,
        parsed: ParsedDocument,
        chunks: list[Chunk],
        deadline: float = float("inf"),
    ) -> tuple[list[str] | None, int]:
        """Embed and write every chunk (not yet ready); None when the file went away."""
        ids: list[str] = []
        redactions = 0
        scrub = self.redact_secrets
        batch = self.cfg.embed_batch
        for start in range(0, len(chunks), batch):
            if self.stop.is_set():
                raise _Interrupted
            file_deadline.check(deadline, self.cfg.process_timeout_s)
            part = chunks[start : start + batch]
            texts = [c.text for c in part]
            # Tool calls first at every chunk: redaction and the BM25 vector are Python work,
            # and a thread that holds the GIL slows every call waiting for it.
            if scrub:
                scrubbed = [self._yielded(redact, t) for t in texts]
                texts = [r.text for r in scrubbed]
                redactions += sum(r.count for r in scrubbed)
            vectors = self._embed(texts)
            points = [
                self._yielded(self._point, rec, parsed, chunk, text, vec)
                for chunk, text, vec in zip(part, texts, vectors, strict=True)
            ]
            with self.write_lock:
                if self.current(rec["id"], generation) is None:
                    return None, redactions
                self.store.upsert(points)
            ids.extend(p.id for p in points)
        return ids, redactions

    def _yielded(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` after the tool calls in flight (the background lane's turn)."""
        self.lanes.turn("files", self.stop)
        return fn(*args)

    def _count_tokens(self, text: str) -> int:
        """The chunker's counter, yielding to tool calls between two counts."""
        self.lanes.turn("files", self.stop)
        return self.embedder.count_tokens(text)

    def _embed(self, texts: list[str]) -> np.ndarray:
        delay = self.cfg.retry_backoff_s
        attempts = self.cfg.embed_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                # The background lane: bounded batches, each after the tool calls in flight.
                vectors = self.lanes.embed("files", self.embedder.embed_documents, texts,
                                           limit=len(texts), stop=self.stop.is_set)
                if vectors is None:
                    raise _Interrupted
                if len(vectors) != len(texts):
                    raise ValueError(f"{len(vectors)} vectors for {len(texts)} texts")
                return vectors
            except _Interrupted:
                raise
            except Exception as exc:  # noqa: BLE001 - any embedder failure is retried
                if attempt == attempts:
                    raise _Failed(
                        f"embedding failed after {attempts} attempts: {type(exc).__name__}: "
                        f"{redact(str(exc)).text}"
                    ) from exc
                log.warning("embedding batch failed (attempt %d/%d): %s", attempt, attempts, exc)
                if self.stop.wait(delay):
                    raise _Interrupted from exc
                delay *= 2
        raise AssertionError("unreachable")

    def _point(
        self, rec: dict[str, Any], parsed: ParsedDocument, chunk: Chunk, text: str, vec: Any
    ) -> Point:
        page = page_for_offset(parsed.pages, chunk.start)
        page_end = page_for_offset(parsed.pages, max(chunk.start, chunk.end - 1))
        payload = {
            "kind": "doc_chunk",
            "file_id": rec["id"],
            "file_name": rec["file_name"],
            "user_id": rec["user_id"],
            "agent_id": rec["agent_id"],
            "visibility": rec["visibility"],
            "project": rec["project"],
            "chunk_index": chunk.index,
            "page": page,
            "page_end": page_end,
            "content": text,
            "is_code": looks_like_code(text),  # the fusion's weight reads it
            "content_hash": rec["content_hash"],
            "chunk_hash": hashlib.sha256(text.encode()).hexdigest()[:32],
            "embed_model": self.model_id,
            "file_status": "pending",
            "created_ts": self.clock.now().timestamp(),
        }
        return Point(
            id=chunk_point_id(rec["id"], chunk.index),
            payload=payload,
            dense=[float(x) for x in vec],
            sparse=self.bm25.document(text),
        )

    def fail(self, file_id: str, generation: int, reason: str) -> None:
        reason = redact(reason).text  # an error message may quote the document
        with self.write_lock:
            rec = self.current(file_id, generation)
            if rec is None:
                return
            self.drop_points(file_id)
            self.keeper.drop_raw(rec)  # a failed upload leaves no bytes behind
            self.records.update(
                file_id, status="failed", reason=reason, chunks_count=0,
                updated_at=iso(self.clock.now()),
            )  # fmt: skip
        log.warning("file %s failed: %s", file_id, reason)

    def drop_points(self, file_id: str) -> None:
        self.store.delete_by_filter(chunks_of(file_id))
