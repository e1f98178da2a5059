"""Repair what an integrity scan found that can be rebuilt from what the store still holds.

- dangling links: the missing ids are dropped from the note's ``links`` / ``link_types``
  and from the graph cache;
- notes missing from the graph cache: added with their links; graph nodes without a note
  (a scan over everyone only) are removed;
- stale recall keys: each written again from its payload (brain/store/recall_key.py);
- points missing their BM25 vector: encoded again from their text (the BM25 backfill);
- points missing their dense vector, or stamped with another model: embedded again with the
  active model, when the embedder is that model (else reported, never mixed).

Missing payload fields are reported with their fix (``brain migrate memory-schema``, or a
re-sync of the source). A run handles at most ``limit`` points in batches of ``BATCH``, each
batch written before the next is read, so a killed run keeps what it wrote and the next run
(which scans again) carries on with what is still missing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from brain.embedding.bm25 import BM25Encoder
from brain.health.scan import ScanResult, bm25_text
from brain.memory.core import keyword_text
from brain.memory.graph import LinkGraph
from brain.notes import point_id
from brain.store.guarded import GuardedStore
from brain.vector_store import Point, VectorStore

BATCH = 64


@dataclass(frozen=True, slots=True)
class Embedders:
    """How repair re-embeds: notes as memory embeds them, other points from their text."""

    notes: Callable[[Sequence[dict[str, Any]]], Any]
    texts: Callable[[list[str]], Any]
    model: str  # the model these embed with
    store_model: str  # the store's active model


def _batches(ids: list[str], limit: int) -> list[list[str]]:
    ids = ids[:limit]
    return [ids[i : i + BATCH] for i in range(0, len(ids), BATCH)]


def repair(
    store: VectorStore,
    graph: LinkGraph,
    bm25: BM25Encoder,
    emb: Embedders,
    result: ScanResult,
    *,
    dry_run: bool,
    limit: int,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    f = result.findings
    links = dict(sorted(result.dangling.items()))
    graph_ids = f["notes_missing_from_graph"].ids
    ghosts = f["graph_nodes_missing_from_store"].ids  # only in a scan over everyone
    bm25_ids = sorted(set(f["missing_bm25"].ids))
    key_ids = sorted(set(f["stale_recall_keys"].ids))
    dense_ids = sorted(set(f["missing_dense"].ids) | set(f["other_model"].ids))
    can_embed = emb.model == emb.store_model
    out: dict[str, Any] = {
        "dry_run": dry_run,
        "dangling_links": {"notes": len(links), "links": sum(map(len, links.values()))},
        "notes_missing_from_graph": len(graph_ids),
        "graph_nodes_missing_from_store": len(ghosts),
        "missing_bm25": len(bm25_ids),
        "stale_recall_keys": len(key_ids),
        "reembed": len(dense_ids) if can_embed else 0,
        "not_repaired": {},
    }
    if not can_embed and dense_ids:
        out["not_repaired"]["reembed"] = (
            f"{len(dense_ids)} points need the store's model {emb.store_model}, but "
            f"{emb.model} is loaded; start with the store's model and repair again")
    if f["missing_fields"].count:
        out["not_repaired"]["missing_fields"] = (
            f"{f['missing_fields'].count} payloads lack required fields: run "
            "`brain migrate memory-schema --apply` for notes, re-sync the source for files")
    if dry_run:
        return out
    done = 0
    budget = max(0, limit)
    # Links first: cheap payload writes.
    for zk, bad in list(links.items())[:budget]:
        got = store.retrieve([point_id(zk)])
        if not got:
            continue
        pl = got[0].payload
        keep = [z for z in pl.get("links", []) if z not in bad]
        types = {k: v for k, v in (pl.get("link_types") or {}).items() if k not in bad}
        store.set_payload([got[0].id], {"links": keep, "link_types": types})
        graph.set_links(zk, keep, types)
        for z in bad:
            if graph.isolated_target(z):
                graph.remove_node(z)
        done += 1
    for zk in ghosts[: max(0, budget - done)]:
        graph.remove_node(zk)
        done += 1
    for pid in graph_ids[: max(0, budget - done)]:
        got = store.retrieve([pid])
        if got:
            pl = got[0].payload
            graph.upsert_node(pl["zk_id"])
            graph.set_links(pl["zk_id"], list(pl.get("links", [])), dict(pl.get("link_types") or {}))
            done += 1
    if isinstance(store, GuardedStore):  # the brain's store: the one that writes keys
        for batch in _batches(key_ids, max(0, budget - done)):
            with store.held():
                store.rekey(store.retrieve(batch))  # as stored now, under the write lock
            done += len(batch)
    for batch in _batches(bm25_ids, max(0, budget - done)):
        points = []
        for p in store.retrieve(batch, with_vectors=True):
            text = bm25_text(p.payload, bm25)
            if text is not None and p.dense is not None:
                p.sparse = bm25.document(text)
                points.append(p)
        store.upsert(points)
        done += len(batch)
        if on_batch is not None:
            on_batch(len(batch))
    if can_embed:
        for batch in _batches(dense_ids, max(0, budget - done)):
            pts = store.retrieve(batch, with_vectors=True)
            notes = [p for p in pts if p.payload.get("kind", "note") == "note"]
            others = [p for p in pts if p.payload.get("kind", "note") != "note"
                      and isinstance(p.payload.get("content"), str)]
            fixed: list[Point] = []
            if notes:
                for p, vec in zip(notes, emb.notes([p.payload for p in notes]), strict=True):
                    p.dense = [float(x) for x in vec]
                    p.sparse = p.sparse or bm25.document(keyword_text(p.payload))
                    fixed.append(p)
            if others:
                texts = [str(p.payload["content"]) for p in others]
                for p, vec in zip(others, emb.texts(texts), strict=True):
                    p.dense = [float(x) for x in vec]
                    fixed.append(p)
            for p in fixed:
                p.payload["embed_model"] = emb.store_model
            store.upsert(fixed)
            done += len(batch)
            if on_batch is not None:
                on_batch(len(batch))
    out["repaired"] = done
    out["remaining"] = max(0, len(links) + len(ghosts) + len(graph_ids) + len(bm25_ids)
                           + (len(dense_ids) if can_embed else 0) - done)
    return out
