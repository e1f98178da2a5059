"""Conversions between brain's store types (brain/vector_store/base.py) and qdrant-edge-py
0.9.0's: filters, points, records, payload selectors, quantization and payload-index
parameters. Pure functions; the EdgeStore (edge.py) holds the shard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import qdrant_edge as qe

from brain.vector_store.base import (
    DENSE,
    INT8_QUANTILE,
    SPARSE,
    Filter,
    HasId,
    HasVector,
    Hit,
    Match,
    MatchAny,
    Point,
    Range,
    record_point,
    schema_of,
    schema_parts,
)

# qdrant-edge-py 0.9.0 never matches a boolean payload value (MatchValue(True) finds nothing,
# indexed or not). Every top-level boolean is mirrored into a keyword shadow field that filters
# use; the shadow is stripped on the way out, so callers never see it.
SHADOW = "_b_"


def shadow(payload: dict[str, Any]) -> dict[str, Any]:
    extra = {SHADOW + k: "true" if v else "false" for k, v in payload.items()
             if isinstance(v, bool)}
    return {**payload, **extra} if extra else payload


def unshadow(payload: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (payload or {}).items() if not k.startswith(SHADOW)}


def condition(cond: Any) -> Any:
    if isinstance(cond, Filter):
        return to_filter(cond)
    if isinstance(cond, Match):
        if isinstance(cond.value, bool):
            value = "true" if cond.value else "false"
            return qe.FieldCondition(key=SHADOW + cond.key, match=qe.MatchValue(value))
        return qe.FieldCondition(key=cond.key, match=qe.MatchValue(cond.value))
    if isinstance(cond, MatchAny):
        return qe.FieldCondition(key=cond.key, match=qe.MatchAny(list(cond.values)))
    if isinstance(cond, Range):
        rng = qe.RangeFloat(gte=cond.gte, gt=cond.gt, lte=cond.lte, lt=cond.lt)
        return qe.FieldCondition(key=cond.key, range=rng)
    if isinstance(cond, HasId):
        return qe.HasIdCondition(set(cond.ids))
    if isinstance(cond, HasVector):
        return qe.HasVectorCondition(cond.name)
    raise TypeError(f"unsupported filter condition {cond!r}")


def to_filter(flt: Filter | None) -> qe.Filter | None:
    if flt is None:
        return None
    return qe.Filter(
        must=[condition(c) for c in flt.must] or None,
        must_not=[condition(c) for c in flt.must_not] or None,
        should=[condition(c) for c in flt.should] or None,
    )


def vectors(point: Point) -> dict[str, Any]:
    vec: dict[str, Any] = {}
    if point.dense is not None:
        vec[DENSE] = [float(x) for x in point.dense]
    if point.sparse is not None and point.sparse.indices:
        vec[SPARSE] = qe.SparseVector(
            indices=list(point.sparse.indices), values=list(point.sparse.values)
        )
    return vec


# The binding hands point ids back as uuid.UUID objects, whose text costs ~0.8 us each in
# Python; a search's two legs return ~100 of them, mostly the same notes search after search.
# The text of the ids seen last is kept (~8 MB at most; emptied when full).
_ID_TEXT: dict[int, str] = {}
ID_TEXT_MAX = 32_768


def id_text(pid: Any) -> str:
    """A point id as text (``str(pid)``), from the recent ids' texts when seen."""
    key = getattr(pid, "int", None)
    if key is None:  # an id the binding gave as text or a number
        return str(pid)
    text = _ID_TEXT.get(key)
    if text is None:
        if len(_ID_TEXT) >= ID_TEXT_MAX:
            _ID_TEXT.clear()
        text = _ID_TEXT[key] = str(pid)
    return text


def hits(found: Sequence[Any], fields: Sequence[str] | None) -> list[Hit]:
    """The hits of a query; ``fields`` empty: no payload was read (nor converted)."""
    if fields is not None and not fields:
        return [Hit(id_text(p.id), float(p.score), {}) for p in found]
    return [Hit(id_text(p.id), float(p.score), unshadow(p.payload)) for p in found]


def from_record(rec: Any, with_vectors: bool) -> Point:
    return record_point(rec, with_vectors, unshadow(rec.payload), id_text(rec.id))


def selector(fields: Sequence[str] | None) -> Any:
    """The whole payload (None), none (no fields), or the fields named."""
    if fields is None:
        return True
    return qe.PayloadSelector.Include(list(fields)) if fields else False


def quantization_config(mode: str) -> Any:
    if mode == "int8":
        # Memory-mapped beside the original vectors (cached: read in at a load, which the
        # store gives back, brain/heap.py); searches walk these and rescore with the originals.
        # Held on the heap instead (always_ram) they were 38 of the shard's 89 MB anonymous at
        # 100,000 notes, ~384 MB at 1,000,000, whether searched or not.
        return qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=INT8_QUANTILE,
                                           memory=qe.Memory.Cached)
    return None


def originals_on_disk(mode: str) -> bool:
    """Whether the original dense vectors stay on disk (memory-mapped, read to rescore the
    few candidates a search keeps) rather than in RAM. int8 does: its in-RAM copy is what
    searches walk, so RAM holds a quarter of the vectors. Measured on 100,000 MiniLM vectors
    (BENCHMARKS.md "Quantization"): a loaded, searched shard 378 MB f32 in RAM vs 200 MB."""
    return mode == "int8"


def mode_of(cfg: Any) -> str:
    """A persisted quantization config (edge_config.json) as a mode name."""
    if not cfg:
        return "none"
    scalar = cfg.get("scalar") if isinstance(cfg, dict) else None
    if isinstance(scalar, dict) and str(scalar.get("type", "")).lower() == "int8":
        return "int8"
    return "other"


_SCHEMA_NAMES = {"Keyword": "keyword", "Float": "float", "Bool": "bool", "Integer": "integer",
                 "Text": "text", "Datetime": "datetime", "Uuid": "uuid", "Geo": "geo"}


def schema_name(info: Any) -> str:
    """An index as Edge reports it, in base.py's notation (base schema and flags)."""
    kind = str(info.data_type).rsplit(".", 1)[-1]
    name = _SCHEMA_NAMES.get(kind, kind.lower())
    params = info.params
    if name == "keyword" and getattr(params, "is_tenant", False):
        name = "keyword:tenant"
    on_disk = (getattr(params, "memory", None) == qe.Memory.Cold
               or getattr(params, "on_disk", None) is True)
    return schema_of(name, on_disk, getattr(params, "enable_hnsw", None) is not False)


_PARAMS = {"keyword": qe.KeywordIndexParams, "keyword:tenant": qe.KeywordIndexParams,
           "float": qe.FloatIndexParams, "bool": qe.BoolIndexParams}
_PLAIN = {"keyword": qe.PayloadSchemaType.Keyword, "float": qe.PayloadSchemaType.Float,
          "bool": qe.PayloadSchemaType.Bool}


def index_params(schema: str) -> Any:
    base, on_disk, hnsw = schema_parts(schema)
    kw: dict[str, Any] = {}
    if base == "keyword:tenant":
        kw["is_tenant"] = True
    if on_disk:
        kw["memory"] = qe.Memory.Cold
    if not hnsw:
        kw["enable_hnsw"] = False
    return _PARAMS[base](**kw) if kw else _PLAIN[base]


def retiered(have: str, want: str) -> bool:
    """Whether an index differs from its declaration in where it is kept or in its HNSW
    links only: an older version's, which the store rebuilds by itself. One of another
    schema (damage, a hand-made index) is left to ``brain health rebuild-indexes``."""
    return have != want and schema_parts(have)[0] == schema_parts(want)[0]


def reconcile_indexes(shard: Any, declared: dict[str, str]) -> list[str]:
    """Drop and create again every index of ``shard`` that :func:`retiered` says differs
    from ``declared``, and create the declared ones it lacks; returns their names. On a large
    shard each one reads every point, so the store runs this on the copy an optimization
    works on (edge_swap's child)."""
    have = {name: schema_name(info) for name, info in shard.info().payload_schema.items()}
    done = []
    for name, want in declared.items():
        if name not in have:
            shard.update(qe.UpdateOperation.create_field_index(name, index_params(want)))
            done.append(name)
        elif retiered(have[name], want):
            shard.update(qe.UpdateOperation.delete_field_index(name))
            shard.update(qe.UpdateOperation.create_field_index(name, index_params(want)))
            done.append(name)
    return done
