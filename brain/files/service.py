"""Brain files: upload documents, index them beside memory, search them by meaning.

``ingest`` checks the path and the size cap (by ``stat``, before reading a byte), hashes
the bytes, dedupes per user on the SHA-256, holds the bytes and returns a ``processing``
record at once. One background worker then parses, keeps the parsed text redacted (and
drops the raw bytes unless ``[files] keep_raw``; see ``brain/files/store.py``), chunks
(sized to the embedding model), embeds in batches with retries and writes ``doc_chunk``
points into the shared collection. Chunk points are written with ``file_status =
"pending"`` and flipped to "ready" only when the whole file is in, so search never sees
half a file (a keyword, not a bool: Qdrant Edge 0.9's MatchValue(True) matches nothing); a
failure removes what was written and records the reason. Reprocess and delete serialise
with the worker's writes (one lock), so neither leaves stray points behind.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import queue
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pathspec

from brain import tenancy
from brain.chunker import Chunk, chunk_text_ex
from brain.clock import iso
from brain.errors import BrainError, FileNotFound, FileTooLarge, InvalidArgument, ParseError
from brain.files import deadline as file_deadline
from brain.files.parsers import ParsedDocument, page_for_offset, parse_document
from brain.files.retention import Keeper, from_doc, redact_parsed, to_doc
from brain.files.store import BlobStore, DuplicateContent, FileRecords, TextStore
from brain.identity import Identity
from brain.limits import MAX_QUERY_CHARS, check_text
from brain.redact import redact
from brain.sources.filters import SECRET_EXCLUDES, is_floored
from brain.vector_store import Filter, Match, Point, scroll_all

__all__ = ["FilesService", "build", "chunk_point_id", "start", "stop"]

log = logging.getLogger(__name__)

STATUSES = ("processing", "ready", "failed")
MAX_SEARCH_LIMIT = 30
# Tokens kept free under the model's max sequence length ([CLS]/[SEP] and counter drift).
SEQ_MARGIN = 8
_NAMESPACE = uuid.UUID("3d0e8f4a-5b7c-4e21-9a6d-1c2b3e4f5a6b")
_SECRET_FILES = pathspec.GitIgnoreSpec.from_lines(list(SECRET_EXCLUDES))
_PUBLIC = (
    "id", "file_name", "file_size", "content_hash", "project", "status", "chunks_count",
    "reason", "format", "pages", "truncated", "redactions", "created_at", "updated_at",
    "processing_s", "embed_model", "visibility",
)  # fmt: skip


def chunk_point_id(file_id: str, index: int) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{file_id}:{index}"))


class _Interrupted(Exception):
    """The service is stopping; the file stays ``processing`` and resumes at next start."""


class _Failed(Exception):
    """The file cannot be indexed; the message is the reason recorded on it."""


class FilesService:
    def __init__(self, brain: Any, *, embedder: Any = None) -> None:
        self.brain = brain
        self.store = brain.store
        self.embedder = embedder or brain.embedder
        self.root = Path(brain.home) / "files"
        self.blobs = BlobStore(self.root)
        self.texts = TextStore(self.root)
        self.records = FileRecords(self.root / "files.db", tenancy.settings_identity(brain.settings))
        self.keeper = Keeper(self.blobs, self.texts, self.records, lambda: bool(self.cfg.keep_raw))
        # Held while checking a record and writing its points, and by reprocess/delete.
        self._write_lock = threading.RLock()
        self._queue: queue.Queue[tuple[str, int] | None] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy = threading.Event()
        self._closed = False

    @property
    def cfg(self) -> Any:
        return self.brain.settings.files

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        if self._thread is not None or self._closed:
            return
        self._stop.clear()
        self.keeper.check_at_start(self.root)
        self._thread = threading.Thread(target=self._run, name="brain-files", daemon=True)
        self._thread.start()
        for rec in self.records.list(status="processing"):
            self._queue.put((rec["id"], rec["generation"]))

    def close(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            if self._thread.is_alive():
                log.warning("files worker did not stop within %.0fs", timeout)
            self._thread = None
        if not self._closed:
            self._closed = True
            self.records.close()

    # ---------------------------------------------------------------- upload
    @property
    def caller(self) -> Identity:
        """Who is asking: every record and passage is filtered for it (brain/tenancy.py)."""
        return tenancy.resolve(self.brain.settings)

    def ingest(
        self, path: str | Path, project: str | None = None, visibility: str = tenancy.SHARED
    ) -> dict[str, Any]:
        """Store a document and queue it for indexing; returns its record at once."""
        who = self.caller
        owner = tenancy.owner_fields(who, visibility)
        scope = who.agent_id if visibility == tenancy.PRIVATE else ""
        file_path = self._check_path(path)
        size = file_path.stat().st_size
        self._check_size(size, file_path)
        with self.brain.paths.open_upload(file_path) as fh:  # O_NOFOLLOW, checked again
            data = fh.read(self.cfg.max_bytes + 1)
        self._check_size(len(data), file_path)  # the file may have grown since stat
        sha = hashlib.sha256(data).hexdigest()
        existing = self.records.by_hash(who.user_id, scope, sha)
        if existing is not None:
            return self._deduped(existing, data)
        file_id = uuid.uuid4().hex[:16]
        storage_path = self.keeper.stash(file_id, sha, data)
        now = iso(self.brain.clock.now())
        rec: dict[str, Any] = {
            "id": file_id,
            **owner,
            "dedupe_scope": scope,
            "file_name": file_path.name,
            "file_size": len(data),
            "content_hash": sha,
            "storage_path": storage_path,
            "project": project or self.brain.settings.memory.default_project,
            "status": "processing",
            "chunks_count": None,
            "reason": None,
            "generation": 1,
            "created_at": now,
            "updated_at": now,
        }
        try:
            self.records.insert(rec)
        except DuplicateContent:  # a concurrent upload of the same bytes won the race
            self.keeper.discard_stash(storage_path)
            raced = self.records.by_hash(who.user_id, scope, sha)
            if raced is None:
                raise
            return public(raced, deduped=True)
        self._enqueue(rec["id"], 1)
        return public(rec, deduped=False)

    def _check_path(self, path: str | Path) -> Path:
        if not str(path).strip():
            raise InvalidArgument("path is empty: pass the path of a document to upload")
        given = Path(path).expanduser()
        file_path = self.brain.paths.upload(path)  # the real path; Forbidden outside the roots
        if not file_path.exists():
            raise InvalidArgument(
                f"no such file: {file_path}; pass the path of an existing document",
                path=str(file_path),
            )
        if not file_path.is_file():
            raise InvalidArgument(
                f"{file_path} is not a regular file; pass a document, not a folder or device",
                path=str(file_path),
            )
        for candidate in {given, file_path}:
            rel = candidate.as_posix().lstrip("/")
            if is_floored(rel) or _SECRET_FILES.match_file(rel):
                raise InvalidArgument(
                    f"refusing to upload {file_path}: it looks like a credential or key file",
                    path=str(file_path),
                )
        return file_path

    def _check_size(self, size: int, file_path: Path) -> None:
        cap = self.cfg.max_bytes
        if size > cap:
            raise FileTooLarge(
                f"{file_path.name} is {size / 1048576:.1f} MB; the limit is "
                f"{cap / 1048576:.0f} MB (BRAIN__FILES__MAX_BYTES). Split or compress it.",
                size=size,
                max_bytes=cap,
            )

    # ---------------------------------------------------------------- records
    def get(self, file_id: str) -> dict[str, Any]:
        return public(self._owned(file_id))

    def list(self, status: str | None = None) -> list[dict[str, Any]]:
        if status is not None and status not in STATUSES:
            raise InvalidArgument(f"status must be one of {list(STATUSES)}", status=status)
        return [public(r) for r in self.records.list(self.caller, status)]

    def _owned(self, file_id: str) -> dict[str, Any]:
        """The caller's record; another's is reported exactly as a missing one."""
        rec = self.records.get(str(file_id).strip())
        if rec is None or not tenancy.visible(rec, self.caller):
            raise FileNotFound(
                f"no uploaded file {file_id!r}; list_files shows the ids", file_id=file_id
            )
        return rec

    def wait(self, file_id: str, timeout: float = 300.0) -> dict[str, Any]:
        """Block until the file leaves ``processing`` (or ``timeout`` s pass); its record."""
        deadline = time.monotonic() + timeout
        while True:
            rec = self._owned(file_id)
            if rec["status"] != "processing" or time.monotonic() >= deadline:
                return public(rec)
            time.sleep(0.02)

    def reprocess(self, file_id: str) -> dict[str, Any]:
        """Drop the file's chunks and index it again: parsed again from its raw bytes when
        they are kept, else re-chunked from its stored (redacted) text."""
        rec = self._owned(file_id)
        with self._write_lock:
            if self.blobs.has(rec["storage_path"]):
                self.texts.remove(rec["id"])  # parse the bytes again (a newer parser)
            elif not self.keeper.has_source(rec):
                raise InvalidArgument(
                    f"{rec['file_name']} cannot be reprocessed: its raw bytes were not kept "
                    "(files.keep_raw = false) and no parsed text was stored; upload it again",
                    file_id=rec["id"],
                )
            generation = int(rec["generation"]) + 1
            self._drop_points(rec["id"])
            updated = self.records.update(
                rec["id"], status="processing", chunks_count=None, reason=None,
                generation=generation, attempts=0, updated_at=iso(self.brain.clock.now()),
            )  # fmt: skip
        if updated is None:
            raise FileNotFound(f"file {file_id!r} was deleted meanwhile", file_id=file_id)
        self._enqueue(rec["id"], generation)
        return public(updated)

    def delete(self, file_id: str) -> dict[str, Any]:
        """Remove the record, its points and (when no other record shares it) the bytes."""
        rec = self._owned(file_id)
        with self._write_lock:
            self.records.delete(rec["id"])
            self._drop_points(rec["id"])
            self.texts.remove(rec["id"])
            if not rec["storage_path"].startswith("blobs/"):
                self.blobs.discard(rec["storage_path"])
            blob_removed = self.records.hash_users(rec["content_hash"]) == 0
            if blob_removed:
                self.blobs.remove(rec["content_hash"])
        return {"id": rec["id"], "file_name": rec["file_name"], "deleted": True,
                "blob_removed": blob_removed}  # fmt: skip

    def count_points(self, file_id: str) -> int:
        """doc_chunk points of a file, ready or not (tests and health checks)."""
        return self.store.count(_chunks_of(file_id))

    # ---------------------------------------------------------------- search
    def search(
        self,
        query: str,
        limit: int = 10,
        file_name: str | None = None,
        threshold: float = 0.5,
        project: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        check_text(query, "query", MAX_QUERY_CHARS)
        self._check_search(limit, threshold)
        qvec = self.embedder.embed_query(query)
        return self.search_with_vector(qvec, limit, file_name, threshold, project)

    def search_with_vector(
        self,
        qvec: Sequence[float] | np.ndarray,
        limit: int = 10,
        file_name: str | None = None,
        threshold: float = 0.5,
        project: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Passages of ready files nearest to an already-embedded query, best first."""
        self._check_search(limit, threshold)
        must: builtins.list[Any] = [
            Match("kind", "doc_chunk"),
            *tenancy.conditions(self.caller),
            Match("file_status", "ready"),
            Match("embed_model", self.brain.meta.model),
        ]
        if file_name:
            must.append(Match("file_name", file_name))
        if project:
            must.append(Match("project", project))
        flt = Filter(must=tuple(must))
        exact = self.store.count(flt) <= self.brain.settings.retrieval.exact_max_points
        vec = [float(x) for x in qvec]
        hits = self.store.query_dense(vec, flt, limit, exact=exact)
        return [_result(h.payload, h.score) for h in hits if h.score >= threshold]

    @staticmethod
    def _check_search(limit: int, threshold: float) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidArgument("limit must be an integer from 1 to 30", limit=limit)
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise InvalidArgument(f"limit must be from 1 to {MAX_SEARCH_LIMIT}", limit=limit)
        if not -1.0 <= float(threshold) <= 1.0:
            raise InvalidArgument("threshold is a cosine similarity, from -1 to 1",
                                  threshold=threshold)  # fmt: skip

    # ---------------------------------------------------------------- worker
    def _enqueue(self, file_id: str, generation: int) -> None:
        self.start()  # a service used before Brain.open's hook still gets its worker
        self._queue.put((file_id, generation))

    def _run(self) -> None:
        while not self._stop.is_set():
            job = self._queue.get()
            if job is None:
                return
            self._busy.set()
            try:
                self._process(*job)
            except _Interrupted:
                return
            except Exception as exc:  # noqa: BLE001 - one bad file never stops the worker
                log.exception("processing file %s failed unexpectedly", job[0])
                self._fail(job[0], job[1], f"internal error: {type(exc).__name__}: {exc}")
            finally:
                self._busy.clear()

    def _current(self, file_id: str, generation: int) -> dict[str, Any] | None:
        rec = self.records.get(file_id)
        if rec is None or rec["generation"] != generation or rec["status"] != "processing":
            return None
        return rec

    def _process(self, file_id: str, generation: int) -> None:
        rec = self._current(file_id, generation)
        if rec is None:
            return
        started = time.monotonic()
        with self._write_lock:
            self._drop_points(file_id)  # leftovers of an interrupted run
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
            self._fail(file_id, generation, str(exc))
            return
        if ids is None:
            return  # deleted or reprocessed meanwhile
        with self._write_lock:
            if self._current(file_id, generation) is None:
                return
            self.store.set_payload(ids, {"file_status": "ready"})
            self.records.update(
                file_id, status="ready", chunks_count=len(ids), reason=None,
                format=parsed.format, pages=len(parsed.pages) or None, truncated=truncated,
                redactions=redactions, embed_model=self.brain.meta.model,
                processing_s=round(time.monotonic() - started, 3),
                updated_at=iso(self.brain.clock.now()),
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
            lambda: self._parse(rec), deadline, timeout, self._stop, _Interrupted
        )
        count = 0
        if self.brain.settings.memory.redact_secrets:
            parsed, count = redact_parsed(parsed)
        self.texts.put(rec["id"], to_doc(parsed, count))
        self.keeper.drop_raw(rec)
        return parsed, count

    def _count_attempt(self, rec: dict[str, Any], generation: int) -> bool:
        """Count this start on the record; False (and the file failed) once a file left
        'processing' by crashes has used up its attempts, so it is not resumed forever."""
        attempts = int(rec.get("attempts") or 0) + 1
        if attempts > self.cfg.max_attempts:
            self._fail(rec["id"], generation, (
                f"processing did not finish in {self.cfg.max_attempts} attempts (the server "
                "stopped or crashed while on it each time); reprocess_file to try again"
            ))  # fmt: skip
            return False
        self.records.update(rec["id"], attempts=attempts)
        return True

    def _parse(self, rec: dict[str, Any]) -> ParsedDocument:
        try:
            data = self.blobs.read(rec["storage_path"])
        except (FileNotFoundError, IsADirectoryError) as exc:
            raise _Failed("the stored bytes are missing; delete and upload the file again") from exc
        try:
            return parse_document(
                data, rec["file_name"], max_expanded_bytes=self.cfg.max_expanded_bytes
            )
        except ParseError as exc:
            raise _Failed(exc.message) from exc

    def _deduped(self, existing: dict[str, Any], data: bytes) -> dict[str, Any]:
        """The same bytes again: the existing record, or, for a failed one whose bytes are
        gone, a new attempt with these bytes (else it could never be retried)."""
        if existing["status"] != "failed" or self.keeper.has_source(existing):
            return public(existing, deduped=True)
        with self._write_lock:
            generation = int(existing["generation"]) + 1
            path = self.keeper.stash(existing["id"], existing["content_hash"], data)
            updated = self.records.update(
                existing["id"], status="processing", chunks_count=None, reason=None,
                generation=generation, storage_path=path, updated_at=iso(self.brain.clock.now()),
            )  # fmt: skip
        if updated is None:
            raise FileNotFound(f"file {existing['id']!r} was deleted meanwhile")
        self._enqueue(existing["id"], generation)
        return public(updated, deduped=True)

    def chunk_budget(self) -> tuple[int, int]:
        """(max_tokens, overlap_tokens) per chunk for the active model and settings."""
        max_tokens = self.cfg.chunk_tokens or max(
            16, int(self.embedder.record.max_seq_length) - SEQ_MARGIN
        )
        return max_tokens, min(self.cfg.overlap_tokens, max_tokens // 2)

    def _chunk(self, text: str) -> tuple[builtins.list[Chunk], bool]:
        max_tokens, overlap = self.chunk_budget()
        try:
            return chunk_text_ex(
                text, max_tokens, overlap, self.embedder.count_tokens, self.cfg.max_chunks,
                max_chars=self.cfg.max_chunk_chars,
            )  # fmt: skip
        except BrainError as exc:
            raise _Failed(f"could not chunk the text: {exc.message}") from exc

    def _write_chunks(
        self,
        rec: dict[str, Any],
        generation: int,
        parsed: ParsedDocument,
        chunks: builtins.list[Chunk],
        deadline: float = float("inf"),
    ) -> tuple[builtins.list[str] | None, int]:
        """Embed and write every chunk (not yet ready); None when the file went away."""
        ids: builtins.list[str] = []
        redactions = 0
        scrub = self.brain.settings.memory.redact_secrets
        batch = self.cfg.embed_batch
        for start in range(0, len(chunks), batch):
            if self._stop.is_set():
                raise _Interrupted
            file_deadline.check(deadline, self.cfg.process_timeout_s)
            part = chunks[start : start + batch]
            texts = [c.text for c in part]
            if scrub:
                scrubbed = [redact(t) for t in texts]
                texts = [r.text for r in scrubbed]
                redactions += sum(r.count for r in scrubbed)
            vectors = self._embed(texts)
            points = [
                self._point(rec, parsed, chunk, text, vec)
                for chunk, text, vec in zip(part, texts, vectors, strict=True)
            ]
            with self._write_lock:
                if self._current(rec["id"], generation) is None:
                    return None, redactions
                self.store.upsert(points)
            ids.extend(p.id for p in points)
        return ids, redactions

    def _embed(self, texts: builtins.list[str]) -> np.ndarray:
        delay = self.cfg.retry_backoff_s
        attempts = self.cfg.embed_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                vectors = self.embedder.embed_documents(texts)
                if len(vectors) != len(texts):
                    raise ValueError(f"{len(vectors)} vectors for {len(texts)} texts")
                return vectors
            except Exception as exc:  # noqa: BLE001 - any embedder failure is retried
                if attempt == attempts:
                    raise _Failed(
                        f"embedding failed after {attempts} attempts: {type(exc).__name__}: "
                        f"{redact(str(exc)).text}"
                    ) from exc
                log.warning("embedding batch failed (attempt %d/%d): %s", attempt, attempts, exc)
                if self._stop.wait(delay):
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
            "content_hash": rec["content_hash"],
            "chunk_hash": hashlib.sha256(text.encode()).hexdigest()[:32],
            "embed_model": self.brain.meta.model,
            "file_status": "pending",
            "created_ts": self.brain.clock.now().timestamp(),
        }
        return Point(
            id=chunk_point_id(rec["id"], chunk.index),
            payload=payload,
            dense=[float(x) for x in vec],
            sparse=self.brain.bm25.document(text),
        )

    def _fail(self, file_id: str, generation: int, reason: str) -> None:
        reason = redact(reason).text  # an error message may quote the document
        with self._write_lock:
            rec = self._current(file_id, generation)
            if rec is None:
                return
            self._drop_points(file_id)
            self.keeper.drop_raw(rec)  # a failed upload leaves no bytes behind
            self.records.update(
                file_id, status="failed", reason=reason, chunks_count=0,
                updated_at=iso(self.brain.clock.now()),
            )  # fmt: skip
        log.warning("file %s failed: %s", file_id, reason)

    def _drop_points(self, file_id: str) -> None:
        self.store.delete_by_filter(_chunks_of(file_id))


def _chunks_of(file_id: str) -> Filter:
    return Filter(must=(Match("kind", "doc_chunk"), Match("file_id", file_id)))


def _result(payload: dict[str, Any], score: float) -> dict[str, Any]:
    return {
        "file_id": payload.get("file_id"),
        "file": payload.get("file_name"),
        "chunk": payload.get("chunk_index"),
        "page": payload.get("page"),
        "page_end": payload.get("page_end"),
        "similarity": round(float(score), 6),
        "excerpt": payload.get("content", ""),
        "project": payload.get("project"),
    }


def public(rec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The record as tools return it (no internal bookkeeping)."""
    out = {k: rec.get(k) for k in _PUBLIC if k in rec}
    out.update(extra)
    return out


def doc_chunks(store: Any, file_id: str) -> builtins.list[Point]:
    """Every doc_chunk point of one file (tests and diagnostics)."""
    return list(scroll_all(store, _chunks_of(file_id)))


# ---------------------------------------------------------------- Brain hooks
def build(brain: Any) -> FilesService:
    return FilesService(brain)


def start(brain: Any) -> None:
    brain.files.start()


def stop(brain: Any) -> None:
    service = brain.__dict__.get("files")  # never build the service just to stop it
    if service is not None:
        service.close()
