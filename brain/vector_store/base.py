"""The vector store contract: a small Protocol, backend-neutral points, hits and filters.

Two backends implement it: Qdrant Edge (embedded, default) in ``edge.py`` and qdrant-client
(server, cluster, or its local mode in tests) in ``qdrant.py``. One contract test suite runs
against both. Point ids are UUID strings; payloads are JSON objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

DENSE = "dense"
SPARSE = "bm25"

# Payload fields that get an index, by schema type.
KEYWORD_FIELDS = (
    "kind", "project", "user_id", "agent_id", "memory_type", "note_kind", "tags", "zk_id",
    "source_id", "path", "category", "file_id", "embed_model", "visibility", "content_hash",
    "failure_signature", "chunk_hash", "parent_id", "cite_keys", "recall_key", "branch",
    "path_agent", "dirs", "file_status", "links",
)
# Keyword fields indexed as tenants: Qdrant keeps each value's points together, so a search
# scoped to one project reads one block (measured 8.0 -> 3.2 ms for a filtered dense query,
# 5,000 of 100,000 notes; bench/prof_hnsw.py).
TENANT_FIELDS = ("project",)
FLOAT_FIELDS = (
    "created_ts", "updated_ts", "last_accessed_ts", "salience", "salience_key", "forgotten_ts",
    "branch_open", "valid_to_ts", "valid_from_ts",
)
# is_code: a search counts the share of code among its candidates through this index
# (brain/search/fusion.py, stored_code_share) instead of reading every hit's payload.
BOOL_FIELDS = ("pinned", "forgotten", "is_code", "path_private")

# Dense vector quantization, chosen per store at creation (``[index] quantization``) and
# switched by a maintenance action: "none", or "int8" (scalar quantization, searched with
# rescoring on the original vectors). A store reports "other" for a mode it was given outside
# the brain, and None where the backend keeps none (qdrant-client local mode: exact search).
QUANTIZATION_MODES = ("none", "int8")
# The int8 quantile: the extreme 1% of values are clipped (Qdrant's recommended setting).
INT8_QUANTILE = 0.99


# Where a backend lets it choose (Qdrant Edge), every payload index is kept on disk,
# memory-mapped and read through the page cache, and only these fields' values get their own
# HNSW links (payload-aware HNSW: a search filtered to one project, one kind of point, one
# source walks links among those points). In RAM the indexes were most of a large store's
# resident memory (94 of the shard's 115 MB anonymous at 100,000 notes, ~950 MB at 1,000,000)
# for ~0.5 ms of a filtered dense leg; the links of every other field cost index time (the
# six float fields were ~80 of 165 s of a 100,000-note run) and memory, and no search needs
# them: recall_key covers nearly every note, the rest only narrow.
HNSW_FIELDS = ("project", "kind", "source_id")
ON_DISK = "on-disk"  # flags of a schema in the notation below
NO_HNSW = "no-hnsw"


def declared_indexes(bool_prefix: str = "", tiers: bool = False) -> dict[str, str]:
    """The payload indexes a store declares: field -> schema ("keyword", "keyword:tenant",
    "float", "bool"), with ``tiers`` followed by its flags (``"float on-disk no-hnsw"``: see
    HNSW_FIELDS). A backend that cannot match booleans indexes a keyword shadow field
    (``bool_prefix`` + name) instead."""
    out = {n: "keyword:tenant" if n in TENANT_FIELDS else "keyword" for n in KEYWORD_FIELDS}
    out.update({n: "float" for n in FLOAT_FIELDS})
    out.update({bool_prefix + n: "keyword" if bool_prefix else "bool" for n in BOOL_FIELDS})
    if tiers:
        out = {n: schema_of(s, on_disk=True, hnsw=n in HNSW_FIELDS) for n, s in out.items()}
    return out


def schema_of(base: str, on_disk: bool, hnsw: bool) -> str:
    return " ".join((base, *([ON_DISK] if on_disk else []), *([] if hnsw else [NO_HNSW])))


def schema_parts(schema: str) -> tuple[str, bool, bool]:
    """(base schema, on disk, with HNSW links) of a schema in the notation above."""
    base, *flags = schema.split()
    return base, ON_DISK in flags, NO_HNSW not in flags


@dataclass(frozen=True, slots=True)
class SparseVector:
    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(slots=True)
class Point:
    id: str
    payload: dict[str, Any]
    dense: list[float] | None = None
    sparse: SparseVector | None = None


def record_point(rec: Any, with_vectors: bool, payload: dict[str, Any],
                 pid: str | None = None) -> Point:
    """A :class:`Point` from a record of either backend (qdrant-client's and Qdrant Edge's
    name their vectors alike); ``payload`` is the record's, as the backend hands it back;
    ``pid`` its id as text when the caller has it."""
    dense = sparse = None
    if with_vectors and rec.vector:
        vec = rec.vector
        if DENSE in vec:
            dense = list(vec[DENSE])
        if SPARSE in vec:
            sv = vec[SPARSE]
            sparse = SparseVector(tuple(sv.indices), tuple(sv.values))
    return Point(id=pid if pid is not None else str(rec.id), payload=payload, dense=dense,
                 sparse=sparse)


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    score: float
    payload: dict[str, Any]


# ---- filters -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Match:
    key: str
    value: str | int | bool


@dataclass(frozen=True, slots=True)
class MatchAny:
    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Range:
    key: str
    gte: float | None = None
    gt: float | None = None
    lte: float | None = None
    lt: float | None = None


@dataclass(frozen=True, slots=True)
class HasId:
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HasVector:
    """The point holds the named vector (``DENSE`` or ``SPARSE``); in ``must_not``: lacks it."""

    name: str


Condition = Match | MatchAny | Range | HasId | HasVector


@dataclass(frozen=True, slots=True)
class Filter:
    must: tuple[Condition | Filter, ...] = ()
    must_not: tuple[Condition | Filter, ...] = ()
    should: tuple[Condition | Filter, ...] = ()

    def and_(self, *conds: Condition | Filter) -> Filter:
        return Filter(self.must + tuple(conds), self.must_not, self.should)

    def but_not(self, *conds: Condition | Filter) -> Filter:
        return Filter(self.must, self.must_not + tuple(conds), self.should)


def match_all(**fields: str | int | bool) -> Filter:
    return Filter(must=tuple(Match(k, v) for k, v in fields.items()))


@dataclass(slots=True)
class StoreInfo:
    backend: str
    location: str
    points: int
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IndexState:
    """How much of the store its index structures cover, as far as the backend tells.

    ``indexed`` / ``unindexed``: dense vectors inside / outside an HNSW index (a search reads
    the unindexed ones one by one). ``deleted_share``: deleted points still taking space, as a
    share of all points. None: the backend does not expose it."""

    points: int
    indexed: int | None = None
    unindexed: int | None = None
    segments: int | None = None
    deleted_share: float | None = None
    optimizing: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "points": self.points, "indexed": self.indexed, "unindexed": self.unindexed,
            "segments": self.segments, "deleted_share": self.deleted_share,
            "optimizing": self.optimizing,
        }


# Held around the parts of an optimization that must see no write (the copy, the swap).
Hold = Callable[[], AbstractContextManager[None]]


class VectorStore(Protocol):
    """What the brain needs from a vector store. Methods are blocking; call from threads."""

    backend: str

    def open(self, dimension: int) -> None:
        """Create the collection if missing (dense + BM25 sparse, payload indexes)."""

    def upsert(self, points: Sequence[Point]) -> None: ...

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        """Merge ``payload`` into each point's payload."""

    def delete(self, ids: Sequence[str]) -> None: ...

    def delete_by_filter(self, flt: Filter) -> None: ...

    # ``with_payload=False``: ids (and vectors) only, e.g. to learn which of ``ids`` exist.
    def retrieve(self, ids: Sequence[str], with_vectors: bool = False,
                 with_payload: bool = True) -> list[Point]: ...

    # ``fields``: the payload keys to return with each hit (None: the whole payload; empty:
    # none). Hybrid search asks for none or a few, then reads whole payloads only for the
    # hits it returns.
    def query_dense(
        self, vector: Sequence[float], flt: Filter | None, limit: int, exact: bool = False,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]: ...

    def query_sparse(
        self, vector: SparseVector, flt: Filter | None, limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]: ...

    def scroll(
        self,
        flt: Filter | None,
        limit: int = 256,
        offset: str | None = None,
        with_vectors: bool = False,
    ) -> tuple[list[Point], str | None]: ...

    def count(self, flt: Filter | None = None) -> int: ...

    # (true, false): how many of the points ``ids`` hold the boolean ``field`` true, false
    # (a point without it is in neither), counted through its payload index.
    def flag_counts(self, ids: Sequence[str], field: str) -> tuple[int, int]: ...

    # False only when the store knows no point holds the boolean ``field`` true (so
    # flag_counts would find none true); True when some may.
    def may_hold_flag(self, field: str) -> bool: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def info(self) -> StoreInfo: ...

    def ensure_indexes(self) -> int:
        """Create missing payload indexes; returns how many were created."""

    def index_state(self) -> IndexState:
        """Points, indexed and unindexed vectors, segments, deleted share (where exposed)."""

    def declared_indexes(self) -> dict[str, str]:
        """The payload indexes this store should have: field -> schema (see
        :func:`declared_indexes`); empty where the backend keeps none."""

    def payload_indexes(self) -> dict[str, str]:
        """The payload indexes the store has, in the same notation."""

    def rebuild_index(self, name: str) -> None:
        """Drop the field's index (when present) and create it with its declared schema."""

    def quantization(self) -> str | None:
        """The dense vectors' quantization mode as the store keeps it ("none", "int8",
        "other"), or None where the backend keeps none."""

    def set_quantization(self, mode: str, hold: Hold | None = None) -> dict[str, Any]:
        """Switch the quantization mode and rebuild what it covers; raises NotSupported where
        the backend cannot."""

    def optimize(self, hold: Hold | None = None) -> bool:
        """Build index structures now (Edge runs no background optimizer); True when anything
        changed. Reads and writes keep answering meanwhile; ``hold`` (when given) is entered
        around the short steps that must see no write. A backend with nothing to do returns
        False."""


# What only an embedded store (Qdrant Edge, brain/vector_store/edge.py) offers beyond
# VectorStore, one small capability each. A caller finds the backend under the store stack
# (brain/vector_store/forwarding.py ``backend_of``) and tests it with ``isinstance``.
@runtime_checkable
class ShardFiles(Protocol):
    """The store's files on disk."""

    path: Path  # the shard's directory

    @property
    def aside_path(self) -> Path:
        """Where an interrupted swap left the previous shard."""


@runtime_checkable
class OptimizeSteps(Protocol):
    """The optimizer's bookkeeping (it runs in a child process on a copy)."""

    last_optimize: dict[str, float]  # seconds (and counts) per step of the last optimization


@runtime_checkable
class CancelsOptimize(Protocol):
    def cancel_optimize(self) -> None:
        """Give up an optimization in progress; the store stays as it was before it."""


@runtime_checkable
class QuantizedSegments(Protocol):
    def quantized_segments(self) -> tuple[int, int]:
        """(indexed segments, of which quantized)."""


@runtime_checkable
class PayloadRewrites(Protocol):
    """Payloads and payload indexes an optimization rewrites in its copy."""

    payload_rewrite: str | None  # a rewrite of every payload the next optimization makes
    rewrites_done: set[str]  # the rewrites an optimization has swapped in
    indexes_stale: bool  # payload indexes built otherwise than declared, or not yet built

    def ensure_indexes(self, in_place: bool = False) -> int: ...


@runtime_checkable
class EmbeddedShard(ShardFiles, OptimizeSteps, CancelsOptimize, QuantizedSegments,
                    PayloadRewrites, Protocol):
    """Every capability above: an embedded (Qdrant Edge) store."""


@runtime_checkable
class ServerCollection(Protocol):
    """A store kept by a Qdrant server (or qdrant-client's local mode): its collection."""

    collection: str


def count_flags(store: VectorStore, ids: Sequence[str], field: str) -> tuple[int, int]:
    """:meth:`VectorStore.flag_counts` as two filtered counts (any backend)."""
    among = HasId(tuple(ids))
    return (store.count(Filter(must=(among, Match(field, True)))),
            store.count(Filter(must=(among, Match(field, False)))))


def scroll_all(
    store: VectorStore, flt: Filter | None, page: int = 512, with_vectors: bool = False
) -> Iterator[Point]:
    """Every point matching ``flt``, page by page: no hidden cap."""
    offset: str | None = None
    while True:
        points, offset = store.scroll(flt, limit=page, offset=offset, with_vectors=with_vectors)
        yield from points
        if offset is None:
            return
