"""qdrant-client backend: a Qdrant server or cluster by URL, or qdrant-client's local mode.

The local mode speaks the same client API and is what CI exercises (no server can run here).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from brain.errors import InvalidArgument, NotSupported, StoreError
from brain.vector_store.base import (
    DENSE,
    INT8_QUANTILE,
    QUANTIZATION_MODES,
    SPARSE,
    Filter,
    HasId,
    HasVector,
    Hit,
    Hold,
    IndexState,
    Match,
    MatchAny,
    Point,
    Range,
    SparseVector,
    StoreInfo,
    count_flags,
    declared_indexes,
    record_point,
)

_LOCAL_QUANTIZATION = (
    "qdrant-client's local mode searches exactly and keeps no quantization; set "
    "BRAIN__QDRANT__URL to a Qdrant server to use one (the setting is recorded meanwhile)")


def _quantization_config(mode: str) -> Any:
    if mode == "int8":
        return models.ScalarQuantization(scalar=models.ScalarQuantizationConfig(
            type=models.ScalarType.INT8, quantile=INT8_QUANTILE, always_ram=True))
    return None


def _mode_of(cfg: Any) -> str:
    if cfg is None:
        return "none"
    scalar = getattr(cfg, "scalar", None)
    if scalar is not None and str(getattr(scalar.type, "value", scalar.type)).lower() == "int8":
        return "int8"
    return "other"


def _index_params(schema: str) -> Any:
    return {
        "keyword:tenant": models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD,
                                                    is_tenant=True),
        "keyword": models.PayloadSchemaType.KEYWORD,
        "float": models.PayloadSchemaType.FLOAT,
        "bool": models.PayloadSchemaType.BOOL,
    }[schema]


def _schema_name(info: Any) -> str:
    name = str(getattr(info.data_type, "value", info.data_type)).lower()
    if name == "keyword" and getattr(info.params, "is_tenant", False):
        return "keyword:tenant"
    return name


def _condition(cond: Any) -> Any:
    if isinstance(cond, Filter):
        return _filter(cond)
    if isinstance(cond, Match):
        return models.FieldCondition(key=cond.key, match=models.MatchValue(value=cond.value))
    if isinstance(cond, MatchAny):
        return models.FieldCondition(key=cond.key, match=models.MatchAny(any=list(cond.values)))
    if isinstance(cond, Range):
        rng = models.Range(gte=cond.gte, gt=cond.gt, lte=cond.lte, lt=cond.lt)
        return models.FieldCondition(key=cond.key, range=rng)
    if isinstance(cond, HasId):
        return models.HasIdCondition(has_id=list(cond.ids))
    if isinstance(cond, HasVector):
        return models.HasVectorCondition(has_vector=cond.name)
    raise TypeError(f"unsupported filter condition {cond!r}")


def _filter(flt: Filter | None) -> models.Filter | None:
    if flt is None:
        return None
    return models.Filter(
        must=[_condition(c) for c in flt.must] or None,
        must_not=[_condition(c) for c in flt.must_not] or None,
        should=[_condition(c) for c in flt.should] or None,
    )


def _vectors(point: Point) -> dict[str, Any]:
    vec: dict[str, Any] = {}
    if point.dense is not None:
        vec[DENSE] = [float(x) for x in point.dense]
    if point.sparse is not None and point.sparse.indices:
        vec[SPARSE] = models.SparseVector(
            indices=list(point.sparse.indices), values=list(point.sparse.values)
        )
    return vec


def _from_record(rec: Any, with_vectors: bool) -> Point:
    return record_point(rec, with_vectors, dict(rec.payload or {}))


class QdrantClientStore:
    backend = "qdrant-client"

    def __init__(
        self,
        collection: str,
        url: str = "",
        api_key: str = "",
        prefer_grpc: bool = False,
        local_path: str = "",
        quantization: str = "none",
    ) -> None:
        if quantization not in QUANTIZATION_MODES:
            raise InvalidArgument(f"quantization={quantization!r} is not one of "
                                  f"{', '.join(QUANTIZATION_MODES)}", field="quantization")
        self.collection = collection
        self.create_quantization = quantization  # a new collection's; one that exists keeps its
        self._mode = "none"
        self._location = url or f"local:{local_path}"
        self._lock = threading.Lock()
        if url:
            # A bounded timeout: an unreachable server must not hold the start (degraded mode).
            self._client = QdrantClient(url=url, api_key=api_key or None, prefer_grpc=prefer_grpc,
                                        timeout=10, check_compatibility=False)
        elif local_path:
            self._client = QdrantClient(path=local_path)
        else:
            self._client = QdrantClient(location=":memory:")
        # Local mode keeps Python structures that are not safe to share between threads.
        self._local = not url

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            if self._local:
                with self._lock:
                    return fn(*args, **kwargs)
            return fn(*args, **kwargs)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"Qdrant ({self._location}) failed: {exc}") from exc

    def ping(self) -> None:
        """Raise StoreError unless the server (or local mode) answers."""
        self._call(self._client.get_collections)

    def open(self, dimension: int) -> None:
        if self._call(self._client.collection_exists, self.collection):
            self._mode = self.quantization() or "none"
            return
        self._call(
            self._client.create_collection,
            self.collection,
            vectors_config={DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            quantization_config=None if self._local else _quantization_config(
                self.create_quantization),
        )
        self._mode = "none" if self._local else self.create_quantization
        for name, schema in self.declared_indexes().items():
            self._call(self._client.create_payload_index, self.collection, name,
                       _index_params(schema))

    def flush(self) -> None:
        return None

    def declared_indexes(self) -> dict[str, str]:
        return {} if self._local else declared_indexes()  # local mode ignores payload indexes

    def payload_indexes(self) -> dict[str, str]:
        if self._local:
            return {}
        info = self._call(self._client.get_collection, self.collection)
        return {name: _schema_name(i) for name, i in (info.payload_schema or {}).items()}

    def rebuild_index(self, name: str) -> None:
        want = self.declared_indexes().get(name)
        if want is None:
            raise InvalidArgument(f"{name!r} is not a declared payload index"
                                  + (" (local mode keeps none)" if self._local else ""),
                                  field="name")
        if name in self.payload_indexes():
            self._call(self._client.delete_payload_index, self.collection, name, wait=True)
        self._call(self._client.create_payload_index, self.collection, name,
                   _index_params(want), wait=True)

    def ensure_indexes(self) -> int:
        have = self.payload_indexes()
        missing = [n for n in self.declared_indexes() if n not in have]
        for name in missing:
            self.rebuild_index(name)
        return len(missing)

    def quantization(self) -> str | None:
        if self._local:
            return None  # see _LOCAL_QUANTIZATION
        info = self._call(self._client.get_collection, self.collection)
        dense = info.config.params.vectors
        per_vector = dense.get(DENSE) if isinstance(dense, dict) else None
        if per_vector is not None and per_vector.quantization_config is not None:
            return _mode_of(per_vector.quantization_config)
        return _mode_of(info.config.quantization_config)

    def set_quantization(self, mode: str, hold: Hold | None = None) -> dict[str, Any]:  # noqa: ARG002
        """A server rebuilds its segments by itself after the change (in the background)."""
        if mode not in QUANTIZATION_MODES:
            raise InvalidArgument(f"quantization={mode!r} is not one of "
                                  f"{', '.join(QUANTIZATION_MODES)}", field="quantization")
        if self._local:
            raise NotSupported(_LOCAL_QUANTIZATION, backend=self.backend)
        before = self.quantization()
        config = _quantization_config(mode) or models.Disabled.DISABLED
        self._call(self._client.update_collection, self.collection, quantization_config=config)
        self._mode = mode
        return {"from": before, "to": mode, "rebuilt": False,
                "note": "the server re-optimizes its segments in the background"}

    def index_state(self) -> IndexState:
        if self._local:  # local mode keeps plain lists: nothing is indexed, nothing to do
            return IndexState(points=self.count(None))
        info = self._call(self._client.get_collection, self.collection)
        points = int(info.points_count or 0)
        indexed = info.indexed_vectors_count
        return IndexState(
            points=points,
            indexed=int(indexed) if indexed is not None else None,
            segments=int(info.segments_count) if info.segments_count is not None else None,
            optimizing=getattr(info.status, "value", info.status) == "yellow",  # optimizing
        )

    def optimize(self, hold: Hold | None = None) -> bool:  # noqa: ARG002 - nothing to hold
        return False  # a server optimizes in the background; local mode has no index

    def close(self) -> None:
        self._call(self._client.close)

    def info(self) -> StoreInfo:
        return StoreInfo(backend=self.backend, location=self._location, points=self.count(None))

    def upsert(self, points: Sequence[Point]) -> None:
        if not points:
            return
        structs = [models.PointStruct(id=p.id, vector=_vectors(p), payload=p.payload) for p in points]
        self._call(self._client.upsert, self.collection, structs, wait=True)

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if ids:
            self._call(self._client.set_payload, self.collection, payload, list(ids), wait=True)

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            selector = models.PointIdsList(points=list(ids))
            self._call(self._client.delete, self.collection, selector, wait=True)

    def delete_by_filter(self, flt: Filter) -> None:
        selector = models.FilterSelector(filter=_filter(flt) or models.Filter())
        self._call(self._client.delete, self.collection, selector, wait=True)

    def retrieve(self, ids: Sequence[str], with_vectors: bool = False,
                 with_payload: bool = True) -> list[Point]:
        if not ids:
            return []
        recs = self._call(
            self._client.retrieve, self.collection, list(ids), with_payload=with_payload,
            with_vectors=with_vectors,
        )
        return [_from_record(r, with_vectors) for r in recs]

    def _query(
        self, query: Any, using: str, flt: Filter | None, limit: int, exact: bool,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        res = self._call(
            self._client.query_points,
            self.collection,
            query=query,
            using=using,
            query_filter=_filter(flt),
            limit=limit,
            with_payload=True if fields is None else (list(fields) or False),
            search_params=self._search_params(exact),
        )
        return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in res.points]

    def _search_params(self, exact: bool) -> Any:
        if exact:
            return models.SearchParams(exact=True)
        if self._mode == "none" or self._local:
            return None
        return models.SearchParams(quantization=models.QuantizationSearchParams(rescore=True))

    def query_dense(
        self, vector: Sequence[float], flt: Filter | None, limit: int, exact: bool = False,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        return self._query([float(x) for x in vector], DENSE, flt, limit, exact, fields)

    def query_sparse(
        self, vector: SparseVector, flt: Filter | None, limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        if not vector.indices:
            return []
        sv = models.SparseVector(indices=list(vector.indices), values=list(vector.values))
        return self._query(sv, SPARSE, flt, limit, False, fields)

    def scroll(
        self,
        flt: Filter | None,
        limit: int = 256,
        offset: str | None = None,
        with_vectors: bool = False,
    ) -> tuple[list[Point], str | None]:
        recs, next_offset = self._call(
            self._client.scroll,
            self.collection,
            scroll_filter=_filter(flt),
            limit=limit,
            offset=offset,
            with_payload=True,
            with_vectors=with_vectors,
        )
        points = [_from_record(r, with_vectors) for r in recs]
        return points, (str(next_offset) if next_offset is not None else None)

    def count(self, flt: Filter | None = None) -> int:
        res = self._call(self._client.count, self.collection, count_filter=_filter(flt), exact=True)
        return int(res.count)

    def may_hold_flag(self, field: str) -> bool:
        # Other processes may write a server's collection: nothing is known between calls.
        return True

    def flag_counts(self, ids: Sequence[str], field: str) -> tuple[int, int]:
        return count_flags(self, ids, field)
