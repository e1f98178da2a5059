"""Upkeep of a source's index: embed it again (estimated first), delete orphaned points."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

from brain.sources.indexer import SOURCE_KINDS, Indexer
from brain.sources.queue import SyncQueue
from brain.sources.registry import Registry, SourceRecord
from brain.sources.walker import read_text_capped, resolve_in_source
from brain.trust import tenancy
from brain.trust.identity import Identity
from brain.vector_store import Filter, Match, MatchAny, VectorStore, scroll_all


def reembed(
    rec: SourceRecord,
    registry: Registry,
    queue: SyncQueue,
    indexer: Indexer,
    path: str | None,
    confirm: bool,
    sample: int,
) -> dict[str, Any]:
    """Queue a re-embedding of ``rec`` (or a folder or file of it) when ``confirm``; else
    only estimate how long it would take, from a sample."""
    scope = None
    if path:
        real = resolve_in_source(Path(rec.root), path)
        scope = Path(os.path.relpath(real, rec.root)).as_posix()
        scope = None if scope == "." else scope
    states = registry.file_states(rec.id)
    chosen = {
        r: s for r, s in states.items() if scope is None or r == scope or r.startswith(scope + "/")
    }
    chunks = sum(s.n_chunks for s in chosen.values())
    if not confirm:
        per_chunk = sample_seconds(indexer, rec, list(chosen), sample)
        low, high = chunks * per_chunk * 0.7, chunks * per_chunk * 1.6
        return {
            "source": rec.name,
            "scope": scope or "/",
            "files": len(chosen),
            "chunks": chunks,
            "estimate_s": [round(low, 1), round(high, 1)],
            "confirm_required": True,
            "note": "nothing was embedded; call again with confirm=true to run",
        }
    job = queue.submit(rec.id, rec.project, "reembed", scope=scope, reason="reembed")
    return {
        "source": rec.name,
        "scope": scope or "/",
        "files": len(chosen),
        "chunks": chunks,
        "job": job.to_dict(),
    }


def sample_seconds(indexer: Indexer, rec: SourceRecord, rels: list[str], n: int) -> float:
    """Seconds per chunk: chunk and embed a random sample of files in scope."""
    if not rels:
        return 0.0
    texts: list[str] = []
    for rel in random.Random(0).sample(rels, min(n, len(rels))):
        try:
            text, _ = read_text_capped(Path(rec.root) / rel, 20_000, root=rec.root)
        except OSError:
            continue
        if text and text.strip():
            texts.extend(p.text for p in indexer.chunk(text)[:4])
    if not texts:
        return 0.0
    texts = texts[:32]
    t0 = time.perf_counter()
    indexer.embedder.embed_documents(texts)
    return (time.perf_counter() - t0) / len(texts) * 1.15  # + indexing overhead


def repair_orphans(
    store: VectorStore, registry: Registry, caller: Identity, dry_run: bool
) -> dict[str, Any]:
    """Points of sources that no longer exist: count them, delete unless ``dry_run``."""
    known = tuple(r.id for r in registry.list())
    mine = tenancy.conditions(caller)  # only the caller's orphans, seen or deleted
    flt = Filter(
        must=(MatchAny("kind", SOURCE_KINDS), *mine),
        must_not=(MatchAny("source_id", known),) if known else (),
    )
    by_source: dict[str, int] = {}
    for p in scroll_all(store, Filter(must=(Match("kind", "file"), *mine), must_not=flt.must_not)):
        sid = str(p.payload.get("source_id"))
        by_source[sid] = by_source.get(sid, 0) + 1
    points = store.count(flt)
    if not dry_run and points:
        store.delete_by_filter(flt)
    return {
        "dry_run": dry_run,
        "orphan_points": points,
        "orphan_files_by_source": by_source,
        "deleted": 0 if dry_run else points,
    }
