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

The worker is brain/files/worker.py; what of an upload is kept, brain/files/retention.py.
app.py builds the service from :class:`FilesDeps` and the ``[files]`` settings section.
"""

from __future__ import annotations

import builtins
import hashlib
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from brain.clock import Clock, iso
from brain.embedding.bm25 import BM25Encoder
from brain.embedding.credential import query_vector
from brain.embedding.registry import Embedder
from brain.errors import (
    FileNotFound,
    FileTooLarge,
    InvalidArgument,
    StoreDamaged,
    disk_full,
    is_no_space,
)
from brain.files.retention import Keeper
from brain.files.store import BlobStore, DuplicateContent, FileRecords, TextStore
from brain.files.worker import FileWorker, chunk_point_id, chunks_of
from brain.search.fusion import matched_by
from brain.search.policy import SearchPolicy, rank
from brain.sources.filters import SECRET_EXCLUDES, is_floored
from brain.trust import tenancy
from brain.trust.globs import compile_spec
from brain.trust.identity import Identity
from brain.trust.limits import MAX_QUERY_CHARS, check_text
from brain.trust.paths import PathPolicy
from brain.trust.redact import redact_tree
from brain.vector_store import Filter, Match, Point, VectorStore, scroll_all
from config import FilesSettings

__all__ = ["FilesDeps", "FilesService", "chunk_point_id", "clamp_limit", "start", "stop"]

STATUSES = ("processing", "ready", "failed")
MAX_SEARCH_LIMIT = 30
_SLACK = 1 << 20  # an upload leaves at least this free beyond its own bytes (temp file, fsync)
_SECRET_FILES = compile_spec(SECRET_EXCLUDES)
_PUBLIC = (
    "id", "file_name", "file_size", "content_hash", "project", "status", "chunks_count",
    "reason", "format", "pages", "truncated", "redactions", "created_at", "updated_at",
    "processing_s", "embed_model", "visibility",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FilesDeps:
    """Everything the files service touches besides its ``[files]`` section (app.py)."""

    store: VectorStore
    embedder: Embedder
    bm25: BM25Encoder
    paths: PathPolicy  # every uploaded path goes through it
    clock: Clock
    identity: Identity  # who acts outside a tool call (the settings identity)
    model_id: str  # the model that built the store: stamped on every point
    home: Path  # the data dir: files/ lives in it
    default_project: str  # of an upload that names none
    redact_secrets: bool  # [memory] redact_secrets: scrub the text before it is stored
    exact_max_points: int  # [retrieval]: below this many candidates search is exact
    policy: SearchPolicy  # [retrieval]: how every search ranks (brain/search/policy.py)


class FilesService:
    def __init__(self, deps: FilesDeps, cfg: FilesSettings) -> None:
        self.deps = deps
        self.cfg = cfg  # the live [files] section: read at each use
        self.store = deps.store
        self.embedder = deps.embedder
        self.root = Path(deps.home) / "files"
        self.blobs = BlobStore(self.root)
        self.texts = TextStore(self.root)
        self.records = FileRecords(self.root / "files.db", deps.identity)
        self.keeper = Keeper(self.blobs, self.texts, self.records, lambda: bool(self.cfg.keep_raw))
        # Held while checking a record and writing its points, and by reprocess/delete.
        self._write_lock = threading.RLock()
        self._stop = threading.Event()
        self._closed = False
        self.worker = FileWorker(
            store=deps.store, embedder=deps.embedder, bm25=deps.bm25, clock=deps.clock,
            model_id=deps.model_id, records=self.records, blobs=self.blobs, texts=self.texts,
            keeper=self.keeper, cfg=cfg, redact_secrets=deps.redact_secrets,
            write_lock=self._write_lock, stop=self._stop,
        )  # fmt: skip

    def use_model(self, model_id: str) -> None:
        """After a model switch's swap: stamp, and search, the new model's points."""
        self.deps = replace(self.deps, model_id=model_id)
        self.worker.model_id = model_id

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        if self.worker.running or self._closed:
            return
        self._stop.clear()
        self.keeper.check_at_start(self.root)
        self.worker.start()
        for rec in self.records.list(status="processing"):
            self.worker.enqueue(rec["id"], rec["generation"])

    def close(self, timeout: float = 60.0) -> None:
        self.worker.close(timeout)
        if not self._closed:
            self._closed = True
            self.records.close()

    def chunk_budget(self) -> tuple[int, int]:
        """(max_tokens, overlap_tokens) per chunk for the active model and settings."""
        return self.worker.chunk_budget()

    # ---------------------------------------------------------------- upload
    @property
    def caller(self) -> Identity:
        """Who is asking: every record and passage is filtered for it (brain/trust/tenancy.py)."""
        return tenancy.caller(self.deps.identity)

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
        with self.deps.paths.open_upload(file_path) as fh:  # O_NOFOLLOW, checked again
            data = fh.read(self.cfg.max_bytes + 1)
        self._check_size(len(data), file_path)  # the file may have grown since stat
        sha = hashlib.sha256(data).hexdigest()
        existing = self.records.by_hash(who.user_id, scope, sha)
        if existing is not None:
            return self._deduped(existing, data)
        file_id = uuid.uuid4().hex[:16]
        storage_path = self._stash(file_id, sha, data, file_path.name)
        now = iso(self.deps.clock.now())
        rec: dict[str, Any] = {
            "id": file_id,
            **owner,
            "dedupe_scope": scope,
            "file_name": file_path.name,
            "file_size": len(data),
            "content_hash": sha,
            "storage_path": storage_path,
            "project": project or self.deps.default_project,
            "status": "processing",
            "chunks_count": None,
            "reason": None,
            "generation": 1,
            "created_at": now,
            "updated_at": now,
        }
        try:
            self.records.insert(rec)
        except sqlite3.OperationalError as exc:  # "database or disk is full"
            self.keeper.discard_stash(storage_path)
            if "full" in str(exc) or is_no_space(exc.__context__ or exc):
                raise disk_full(f"record the upload {file_path.name}",
                                str(self.keeper.blobs.root), needed=len(data)) from None
            raise
        except DuplicateContent:  # a concurrent upload of the same bytes won the race
            self.keeper.discard_stash(storage_path)
            raced = self.records.by_hash(who.user_id, scope, sha)
            if raced is None:
                raise
            return public(raced, deduped=True)
        self._enqueue(rec["id"], 1)
        return public(rec, deduped=False)

    def _stash(self, file_id: str, sha: str, data: bytes, name: str) -> str:
        """The upload's bytes on disk, or DISK_FULL (free and needed figures) when they do
        not fit: checked first, and an ENOSPC met while writing is the same error (the
        partial copy is removed by write_whole), never an untyped ``[Errno 28]``."""
        root = str(self.keeper.blobs.root)
        what = f"store the upload {name}"
        if shutil.disk_usage(_existing(self.keeper.blobs.root)).free < len(data) + _SLACK:
            raise disk_full(what, root, needed=len(data))
        try:
            return self.keeper.stash(file_id, sha, data)
        except OSError as exc:
            if is_no_space(exc):
                raise disk_full(what, root, needed=len(data)) from None
            raise

    def _check_path(self, path: str | Path) -> Path:
        if not str(path).strip():
            raise InvalidArgument("path is empty: pass the path of a document to upload")
        given = Path(path).expanduser()
        file_path = self.deps.paths.upload(path)  # the real path; Forbidden outside the roots
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
                f"no uploaded file {file_id!r}; 'brain files list' (the files tool's list "
                "action) shows the ids", file_id=file_id
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
            self._check_source(rec)
            if self.blobs.has(rec["storage_path"]):
                self.texts.remove(rec["id"])  # parse the bytes again (a newer parser)
            elif not self.keeper.has_source(rec):
                raise InvalidArgument(
                    f"{rec['file_name']} cannot be reprocessed: its raw bytes were not kept "
                    "(files.keep_raw = false) and no parsed text was stored; upload it again",
                    file_id=rec["id"],
                )
            generation = int(rec["generation"]) + 1
            self.worker.drop_points(rec["id"])
            updated = self.records.update(
                rec["id"], status="processing", chunks_count=None, reason=None,
                generation=generation, attempts=0, updated_at=iso(self.deps.clock.now()),
            )  # fmt: skip
        if updated is None:
            raise FileNotFound(f"file {file_id!r} was deleted meanwhile", file_id=file_id)
        self._enqueue(rec["id"], generation)
        return public(updated)

    def _check_source(self, rec: dict[str, Any]) -> None:
        """A reprocess drops the file's chunks before it indexes the file again: refuse it,
        keeping the chunks, when what it would index from is damaged (kept bytes whose hash
        is not the upload's, a stored text that fails its digest or does not parse)."""
        fault, where = None, ""
        if self.blobs.has(rec["storage_path"]):
            where = str(self.blobs.root / rec["storage_path"])
            data = self.blobs.read(rec["storage_path"])
            if rec.get("content_hash") and hashlib.sha256(data).hexdigest() != rec["content_hash"]:
                fault = "its bytes no longer match the hash recorded at upload"
        else:
            where = str(self.texts.path(rec["id"]))
            fault = self.texts.damage(rec["id"])
        if fault is not None:
            raise StoreDamaged(
                f"{rec['file_name']} cannot be reprocessed: its stored copy {where} is "
                f"damaged ({fault}). Its {rec.get('chunks_count') or 0} chunks were kept and "
                "still answer search_files; upload the file again to index it anew, or "
                "restore a snapshot (`brain snapshots`, `brain restore NAME`).",
                file_id=rec["id"], path=where)

    def restore(self, rec: dict[str, Any], text: dict[str, Any] | None,
                raw: bytes | None) -> bool:
        """An upload from an export (brain/maintenance/portable.py): its record (owner included), parsed
        text and kept bytes, replacing one of the same id; indexed again by the worker.
        False when this home already holds the same bytes for the same owner."""
        generation = int(rec.get("generation") or 1)
        # An export is outside input: its text is redacted again, and raw bytes are kept
        # only where this home keeps raw uploads (files.keep_raw), as for an upload.
        text = redact_tree(text) if text is not None else None
        raw = raw if self.cfg.keep_raw else None
        with self._write_lock:
            if self.records.get(rec["id"]) is not None:
                self.records.delete(rec["id"])
                self.worker.drop_points(rec["id"])
            storage = self.blobs.put(rec["content_hash"], raw) if raw is not None else ""
            if text is not None:
                self.texts.put(rec["id"], text)
            usable = raw is not None or text is not None
            new = {**rec, "storage_path": storage, "chunks_count": None,
                   "status": "processing" if usable else "failed",
                   "reason": None if usable else "imported without its text or bytes; "
                                                 "upload it again",
                   "generation": generation, "attempts": 0,
                   "updated_at": iso(self.deps.clock.now())}
            try:
                self.records.insert(new)
            except DuplicateContent:
                return False
        if usable:
            self._enqueue(rec["id"], generation)
        return True

    def delete(self, file_id: str) -> dict[str, Any]:
        """Remove the record, its points and (when no other record shares it) the bytes."""
        rec = self._owned(file_id)
        with self._write_lock:
            self.records.delete(rec["id"])
            self.worker.drop_points(rec["id"])
            self.texts.remove(rec["id"])
            if not rec["storage_path"].startswith("blobs/"):
                self.blobs.discard(rec["storage_path"])
            blob_removed = self.records.hash_users(rec["content_hash"]) == 0
            if blob_removed:
                self.blobs.remove(rec["content_hash"])
        return {"id": rec["id"], "file_name": rec["file_name"], "deleted": True,
                "blob_removed": blob_removed}  # fmt: skip

    def chunks(self, file_id: str, cap: int) -> builtins.list[dict[str, Any]]:
        """The caller's document's passages (at most ``cap``) in their order: the web
        explorer's document page. Another's document is reported as a missing one."""
        rec = self._owned(file_id)
        flt = chunks_of(rec["id"])
        flt = Filter(must=(*flt.must, *tenancy.conditions(self.caller)))
        found: builtins.list[dict[str, Any]] = []
        offset: str | None = None
        while len(found) < cap:
            pts, offset = self.store.scroll(flt, limit=256, offset=offset)
            found.extend(p.payload for p in pts)
            if offset is None:
                break
        found.sort(key=lambda c: int(c.get("chunk_index") or 0))
        return found

    def count_points(self, file_id: str) -> int:
        """doc_chunk points of a file, ready or not (tests and health checks)."""
        return self.store.count(chunks_of(file_id))

    # ---------------------------------------------------------------- search
    def search(
        self,
        query: str,
        limit: int = 10,
        file_name: str | None = None,
        threshold: float | None = None,
        project: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Passages of ready files for ``query``, best first, ranked by the search policy
        every search shares (brain/search/policy.py). A limit above MAX_SEARCH_LIMIT is
        clamped (:func:`clamp_limit`); ``threshold``, when given, is a minimum cosine
        similarity the caller asks for (a passage only BM25 found has none and is dropped)."""
        check_text(query, "query", MAX_QUERY_CHARS)
        self._check_search(limit, threshold)
        qvec = query_vector(self.embedder, query)  # None: keywords alone (embedding/credential.py)
        return self.search_with_vector(qvec, query, limit, file_name, threshold, project)

    def search_with_vector(
        self,
        qvec: Sequence[float] | np.ndarray | None,
        query: str,
        limit: int = 10,
        file_name: str | None = None,
        threshold: float | None = None,
        project: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """The same as :meth:`search` with the query already embedded."""
        self._check_search(limit, threshold)
        limit, _ = clamp_limit(limit)
        must: builtins.list[Any] = [
            Match("kind", "doc_chunk"),
            *tenancy.conditions(self.caller),
            Match("file_status", "ready"),
            Match("embed_model", self.deps.model_id),
        ]
        if file_name:
            must.append(Match("file_name", file_name))
        if project:
            must.append(Match("project", project))
        flt = Filter(must=tuple(must))
        exact = self.store.count(flt) <= self.deps.exact_max_points
        vec = [float(x) for x in qvec] if qvec is not None else None
        cands = rank(self.store, vec, self.deps.bm25.query(query), flt, limit, self.deps.policy,
                     exact=exact, query=query, text=_passage_text,
                     absolute=threshold is None)
        if threshold is not None:
            cands = [c for c in cands if c.similarity is not None and c.similarity >= threshold]
        return [{**_result(c.payload, c.score, c.similarity), "matched": matched_by(c),
                 **({"rerank_score": round(c.rerank, 6)} if c.rerank is not None else {})}
                for c in cands]

    @staticmethod
    def _check_search(limit: int, threshold: float | None) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument(
                f"limit must be a positive integer (at most {MAX_SEARCH_LIMIT} are returned)",
                limit=limit,
            )
        if threshold is not None and not -1.0 <= float(threshold) <= 1.0:
            raise InvalidArgument("threshold is a cosine similarity, from -1 to 1",
                                  threshold=threshold)  # fmt: skip

    # ---------------------------------------------------------------- worker
    def _enqueue(self, file_id: str, generation: int) -> None:
        self.start()  # a service used before Brain.open's hook still gets its worker
        self.worker.enqueue(file_id, generation)

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
                generation=generation, storage_path=path, updated_at=iso(self.deps.clock.now()),
            )  # fmt: skip
        if updated is None:
            raise FileNotFound(f"file {existing['id']!r} was deleted meanwhile")
        self._enqueue(existing["id"], generation)
        return public(updated, deduped=True)


def _existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def clamp_limit(limit: int) -> tuple[int, str | None]:
    """(the limit search_files uses, a note saying it was clamped or None)."""
    if limit > MAX_SEARCH_LIMIT:
        return MAX_SEARCH_LIMIT, (
            f"limit {limit} is above the maximum {MAX_SEARCH_LIMIT}: "
            f"at most {MAX_SEARCH_LIMIT} passages are returned"
        )
    return limit, None


def _passage_text(payload: dict[str, Any]) -> str:
    """What a reranker reads of a passage."""
    return str(payload.get("content", ""))


def _result(payload: dict[str, Any], score: float, similarity: float | None) -> dict[str, Any]:
    return {
        "file_id": payload.get("file_id"),
        "file": payload.get("file_name"),
        "chunk": payload.get("chunk_index"),
        "page": payload.get("page"),
        "page_end": payload.get("page_end"),
        "score": round(float(score), 6),
        "similarity": None if similarity is None else round(float(similarity), 6),
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
    return list(scroll_all(store, chunks_of(file_id)))


# ---------------------------------------------------------------- Brain hooks
class _HasFiles(Protocol):
    """The application as its start and stop hooks see it."""

    __dict__: dict[str, Any]

    @property
    def files(self) -> FilesService: ...


def start(brain: _HasFiles) -> None:
    brain.files.start()


def stop(brain: _HasFiles) -> None:
    service = brain.__dict__.get("files")  # never build the service just to stop it
    if service is not None:
        service.close()
