"""Collection maintenance: what the store's structure lacks or has configured differently, and
the two actions that fix it (issue 15, part 5).

- ``report``: read-only. Payload indexes missing or with another schema than declared (see
  ``declared_indexes`` in brain/vector_store/base.py), the quantization mode of the store
  against ``[index] quantization`` and the store meta's record, and points missing their BM25
  vector (fixed by health_repair, the BM25 backfill).
- ``rebuild_indexes``: drop and create again, with its declared schema, every payload index
  the report lists (missing or different).
- ``apply_quantization``: switch the store to a mode (default: the setting) and record it in
  the store meta. On Qdrant Edge the segments are rebuilt out of process (a copy is optimized,
  then swapped in; brain/vector_store/edge.py); a server rebuilds them by itself; qdrant-client's
  local mode keeps no quantization (NotSupported says so).

Both actions are dry runs unless asked, run one at a time over the whole store (the health
service's lock), and never at startup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brain.embedding.bm25 import BM25Encoder
from brain.health.scan import VECTOR_KINDS, bm25_text
from brain.vector_store import SPARSE, Filter, HasVector, MatchAny, VectorStore
from brain.vector_store.base import QuantizedSegments
from brain.vector_store.forwarding import backend_of

BM25_EXAMINED = 10_000  # points without a BM25 vector the report looks at, at most


def index_differences(store: VectorStore) -> dict[str, Any]:
    want = store.declared_indexes()
    have = store.payload_indexes()
    missing = sorted(n for n in want if n not in have)
    different = [{"field": n, "have": have[n], "want": want[n]}
                 for n in sorted(want) if n in have and have[n] != want[n]]
    return {"declared": len(want), "present": len(have), "missing": missing,
            "different": different}


def quantization_state(store: VectorStore, setting: str, recorded: str | None) -> dict[str, Any]:
    mode = store.quantization()
    out: dict[str, Any] = {"setting": setting, "store": mode, "recorded": recorded,
                           "supported": mode is not None,
                           "differs": mode is not None and mode != setting}
    live = backend_of(store)
    if mode is not None and isinstance(live, QuantizedSegments):
        indexed, quantized = live.quantized_segments()
        out["indexed_segments"], out["quantized_segments"] = indexed, quantized
        # Configured but not rebuilt yet (a switch cut short): the action finishes it.
        out["incomplete"] = (mode == "int8" and quantized < indexed) or (
            mode == "none" and quantized > 0)
    if mode is None:
        out["note"] = ("this backend keeps no quantization (qdrant-client local mode searches "
                       "exactly); the setting is only recorded")
    return out


def bm25_missing(store: VectorStore, scope: tuple[Any, ...], bm25: BM25Encoder) -> dict[str, Any]:
    """Points (of the kinds that carry one) without a BM25 vector although their text has
    indexable words; at most BM25_EXAMINED looked at."""
    flt = Filter(must=(*scope, MatchAny("kind", VECTOR_KINDS)), must_not=(HasVector(SPARSE),))
    count = examined = 0
    offset: str | None = None
    while examined < BM25_EXAMINED:
        points, offset = store.scroll(flt, limit=min(512, BM25_EXAMINED - examined),
                                      offset=offset)
        examined += len(points)
        count += sum(1 for p in points if bm25_text(p.payload, bm25) is not None)
        if offset is None:
            break
    return {"count": count, "capped": offset is not None}


def report(store: VectorStore, scope: tuple[Any, ...], bm25: BM25Encoder, setting: str,
           recorded: str | None) -> dict[str, Any]:
    idx = index_differences(store)
    quant = quantization_state(store, setting, recorded)
    missing = bm25_missing(store, scope, bm25)
    fix: list[str] = []
    if idx["missing"] or idx["different"]:
        fix.append("health rebuild_indexes (brain health rebuild-indexes --apply)")
    if quant["differs"] or quant.get("incomplete"):
        fix.append("health quantization (brain health quantization --apply)")
    if missing["count"]:
        fix.append("health repair: re-encodes missing BM25 vectors (brain health repair --apply)")
    return {"backend": store.backend, "payload_indexes": idx, "quantization": quant,
            "bm25_missing": missing, "ok": not fix, "fix": fix}


def rebuild_indexes(store: VectorStore, dry_run: bool,
                    progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    diff = index_differences(store)
    todo = diff["missing"] + [d["field"] for d in diff["different"]]
    done: list[str] = []
    if not dry_run:
        for name in todo:
            store.rebuild_index(name)
            done.append(name)
            if progress is not None:
                progress(1)
    return {"dry_run": dry_run, "missing": diff["missing"], "different": diff["different"],
            "rebuilt": done, "count": len(todo)}
