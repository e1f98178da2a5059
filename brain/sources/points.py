"""What one file of a source becomes in the store: its ids, hashes, payloads and state.

Ids are deterministic: uuid5(source_id, path) for a file, uuid5(source_id, path, index)
for a chunk, so a re-run overwrites instead of duplicating and a cancelled run converges.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from brain.embedding.bm25 import BM25Encoder
from brain.search.fusion import looks_like_code
from brain.sources.categories import manifest_fields, parse_frontmatter
from brain.sources.registry import FileState, SourceRecord
from brain.sources.walker import MAX_INDEXED_CHARS, FileEntry
from brain.trust import tenancy
from brain.vector_store import Point

NAMESPACE = uuid.UUID("2d8f6a0e-5b1c-4f7e-9a33-6c0b1e7d4f25")
SOURCE_KINDS = ("file", "chunk")
HEAD_CHARS = MAX_INDEXED_CHARS
_MD = (".md", ".mdx", ".markdown")


def file_point_id(source_id: str, rel: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{source_id}\0{rel}"))


def chunk_point_id(source_id: str, rel: str, index: int) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{source_id}\0{rel}\0{index}"))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(slots=True)
class Piece:
    """One chunk of a file's text, with the vector it has (reused) or will get."""

    index: int
    text: str
    start: int
    end: int
    line_start: int
    line_end: int
    hash: str
    vector: list[float] | None = None


@dataclass(slots=True)
class Work:
    """A file read and chunked, waiting in the batch for its missing vectors."""

    entry: FileEntry
    text: str
    content_hash: str
    category: str
    capture: dict[str, Any]
    tags: list[str]
    created_ts: float
    pieces: list[Piece] = field(default_factory=list)
    keep_below: int = 0  # chunk indexes below this are kept as stored (append)
    old_n: int = 0
    file_vector: list[float] | None = None
    kind: str = "indexed"  # indexed | renamed | appended
    reused: int = 0


@dataclass(slots=True)
class Old:
    """What the sync state (or, without one, the store) says of a file's last indexing."""

    content_hash: str
    text_len: int
    n_chunks: int
    created_ts: float
    embed_model: str
    size: int = -1
    mtime_ns: int = -1


def file_state(w: Work, text_len: int, n_chunks: int, model_id: str) -> FileState:
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
        model_id,
    )


def base_payload(w: Work, rec: SourceRecord, model_id: str, user_id: str) -> dict[str, Any]:
    e = w.entry
    parts = e.rel.split("/")
    return {
        "source_id": rec.id,
        "project": rec.project,
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
        "embed_model": model_id,
        # The source's owner, so store queries can filter for the caller (tenancy.py).
        "user_id": rec.user_id or user_id,
        "agent_id": rec.agent_id,
        "visibility": rec.visibility,
        # An agent's private agent-core/<agentId>/ subtree: the owner marker (tenancy.py).
        **tenancy.path_fields(e.rel),
        **manifest_fields(e.rel, w.text),  # a package manifest's usability flag
    }


def points_of(
    w: Work, rec: SourceRecord, model_id: str, user_id: str, bm25: BM25Encoder
) -> list[Point]:
    """The file's chunk points and its file point (whose vector is the first chunk's)."""
    if not w.pieces:
        return []
    base = base_payload(w, rec, model_id, user_id)
    out = []
    for p in w.pieces:
        payload = {
            **base,
            "kind": "chunk",
            "content": p.text,
            "is_code": looks_like_code(p.text),  # the fusion's weight reads it
            "chunk_hash": p.hash,
            "chunk_index": p.index,
            "line_start": p.line_start,
            "line_end": p.line_end,
            "char_start": p.start,
            "char_end": p.end,
        }
        out.append(
            Point(
                chunk_point_id(rec.id, w.entry.rel, p.index),
                payload,
                dense=p.vector,
                sparse=bm25.document(p.text),
            )
        )
    head = w.text[:HEAD_CHARS]
    n = w.pieces[-1].index + 1
    first = w.file_vector if w.keep_below else w.pieces[0].vector
    payload = {
        **base,
        "kind": "file",
        "content": head,
        "is_code": looks_like_code(head),
        "text_len": len(w.text),
        "n_chunks": n,
        "truncated": len(w.text) > HEAD_CHARS,
        "line_start": 1,
        "line_end": w.text.count("\n") + 1,
    }
    out.append(
        Point(
            file_point_id(rec.id, w.entry.rel),
            payload,
            dense=first,
            sparse=bm25.document(head),
        )
    )
    return out


def tags_of(rel: str, text: str) -> list[str]:
    """The ``tags`` of a Markdown file's front matter, bounded; none for other files."""
    if not rel.lower().endswith(_MD):
        return []
    raw = parse_frontmatter(text).get("tags")
    if isinstance(raw, str):
        raw = [t.strip() for t in raw.split(",")]
    if not isinstance(raw, list):
        return []
    return [str(t)[:100] for t in raw if isinstance(t, (str, int)) and str(t).strip()][:50]
