"""Payload indexes on disk, HNSW links only where a search walks them, and a store an older
version built moving over by itself (brain/vector_store/base.py HNSW_FIELDS)."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from brain.embedding.bm25 import BM25Encoder
from brain.vector_store import Filter, Match, Point
from brain.vector_store import edge as edge_module
from brain.vector_store import edge_convert as cv
from brain.vector_store.base import HNSW_FIELDS, NO_HNSW, ON_DISK, declared_indexes
from brain.vector_store.edge import EdgeStore

DIM = 8
bm25 = BM25Encoder()


def _points(n: int) -> list[Point]:
    rng = np.random.default_rng(1)
    out = []
    for i in range(n):
        v = rng.normal(size=DIM)
        out.append(Point(str(uuid.UUID(int=i + 1)), {
            "kind": "note", "project": f"p{i % 3}", "created_ts": float(i), "tags": ["t"]},
            (v / np.linalg.norm(v)).tolist(), bm25.document(f"note {i}")))
    return out


def _older_version(path: Path, n: int) -> None:
    """A store as the last version left it: every index in RAM, every field with links."""
    store = EdgeStore(path)
    store.open(DIM)
    store.upsert(_points(n))
    for name, want in declared_indexes(cv.SHADOW).items():  # the plain declarations
        store._update(qe.UpdateOperation.delete_field_index(name))
        store._update(qe.UpdateOperation.create_field_index(name, cv.index_params(want)))
    assert all(ON_DISK not in s for s in store.payload_indexes().values())
    store.close()


def test_a_new_store_keeps_its_indexes_on_disk_with_links_only_where_searched(
        tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "shard")
    store.open(DIM)
    try:
        have = store.payload_indexes()
        assert have == store.declared_indexes()
        assert all(ON_DISK in s for s in have.values())
        assert {n for n, s in have.items() if NO_HNSW not in s} == set(HNSW_FIELDS)
        assert have["project"] == "keyword:tenant on-disk"
        assert have["created_ts"] == "float on-disk no-hnsw"
        store.upsert(_points(30))
        hits = store.query_dense(_points(1)[0].dense or [], Filter(must=(
            Match("project", "p1"),)), limit=5)
        assert len(hits) == 5 and {h.payload["project"] for h in hits} == {"p1"}
    finally:
        store.close()


def test_a_small_older_store_gets_its_indexes_rebuilt_as_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    _older_version(path, 50)
    store = EdgeStore(path)
    store.open(DIM)
    try:
        assert store.payload_indexes() == store.declared_indexes()
        assert not store.indexes_stale
        assert store.count(Filter(must=(Match("project", "p2"),))) == 16
    finally:
        store.close()


def test_a_large_older_store_gets_them_rebuilt_in_the_next_runs_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(edge_module, "REBUILD_IN_PLACE_MAX", 10)  # 50 points count as large
    path = tmp_path / "shard"
    _older_version(path, 50)
    store = EdgeStore(path)
    store.open(DIM)
    try:
        assert store.indexes_stale  # left as they were: the live store is not rebuilt
        assert all(ON_DISK not in s for s in store.payload_indexes().values())
        store.optimize()  # the child rebuilds them on its copy, which is swapped in
        assert store.payload_indexes() == store.declared_indexes()
        assert not store.indexes_stale
        assert store.count(Filter(must=(Match("project", "p2"),))) == 16
    finally:
        store.close()


def test_the_notation_reads_back_what_edge_was_given() -> None:
    for schema in {*declared_indexes(cv.SHADOW).values(),
                   *declared_indexes(cv.SHADOW, tiers=True).values()}:
        shard_dir = Path(__import__("tempfile").mkdtemp()) / "s"
        shard = qe.EdgeShard.create(str(shard_dir), qe.EdgeConfig(
            vectors={"dense": qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)}))
        try:
            shard.update(qe.UpdateOperation.create_field_index("f", cv.index_params(schema)))
            assert cv.schema_name(shard.info().payload_schema["f"]) == schema
        finally:
            shard.close()
    assert cv.retiered("keyword", "keyword on-disk no-hnsw")
    assert not cv.retiered("float", "keyword on-disk no-hnsw")  # damage: only reported


def test_an_index_a_newer_version_declares_is_built_in_place_when_small_in_the_copy_when_large(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A start after an upgrade that declares a new index: a small store builds it as it opens;
    a large one opens at once (building it reads every point) and gets it in the next index
    run's copy, which the Brain starts at open."""
    for name, large in (("small", False), ("large", True)):
        path = tmp_path / name
        store = EdgeStore(path)
        store.open(DIM)
        store.upsert(_points(50))
        store._update(qe.UpdateOperation.delete_field_index("links"))
        store.close()
        monkeypatch.setattr(edge_module, "REBUILD_IN_PLACE_MAX", 10 if large else 20_000)
        store = EdgeStore(path)
        store.open(DIM)
        try:
            assert ("links" not in store.payload_indexes()) is large
            assert store.indexes_stale is large
            if large:
                store.optimize()
            assert store.payload_indexes() == store.declared_indexes()
            assert not store.indexes_stale
            assert store.count(Filter(must=(Match("project", "p2"),))) == 16
        finally:
            store.close()


def test_with_index_runs_off_a_large_store_builds_a_new_index_as_it_opens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No index run will come to build it in a copy: the open builds it, as before."""
    from brain.app import Brain
    from brain.embedding.registry import REGISTRY, HashEmbedder
    from brain.vector_store.forwarding import backend_of
    from config import load_settings

    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    embedder = HashEmbedder(REGISTRY["offline/hash-384"])
    settings = load_settings(home=tmp_path, index={"enabled": False})
    brain = Brain(settings, embedder=embedder).open()
    for i in range(30):
        brain.memory.add(f"note {i} about the queue", "p")
    edge = backend_of(brain.memory.store)
    assert isinstance(edge, EdgeStore)
    edge._update(qe.UpdateOperation.delete_field_index("links"))
    brain.close()
    monkeypatch.setattr(edge_module, "REBUILD_IN_PLACE_MAX", 10)  # 30 notes count as large
    brain = Brain(load_settings(home=tmp_path, index={"enabled": False}),
                  embedder=embedder).open()
    try:
        edge = backend_of(brain.memory.store)
        assert isinstance(edge, EdgeStore)
        assert "links" in edge.payload_indexes() and not edge.indexes_stale
    finally:
        brain.close()
