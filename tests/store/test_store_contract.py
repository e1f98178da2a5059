"""One contract, two backends: Qdrant Edge in a temp dir and qdrant-client's local mode."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from brain.embedding.bm25 import BM25Encoder
from brain.errors import StoreLocked
from brain.vector_store import (
    Filter,
    HasId,
    Match,
    MatchAny,
    Point,
    Range,
    VectorStore,
    scroll_all,
)
from brain.vector_store.edge import EdgeStore
from brain.vector_store.qdrant import QdrantClientStore

DIM = 8


def _store(kind: str, tmp_path: Path) -> VectorStore:
    if kind == "edge":
        return EdgeStore(tmp_path / "shard")
    return QdrantClientStore("contract", local_path=str(tmp_path / "local"))


@pytest.fixture(params=["edge", "qdrant-local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    s = _store(request.param, tmp_path)
    s.open(DIM)
    yield s
    s.close()


def _vec(seed: int) -> list[float]:
    v = np.random.default_rng(seed).normal(size=DIM)
    return (v / np.linalg.norm(v)).tolist()


def _pid(i: int) -> str:
    return str(uuid.UUID(int=i + 1))


bm25 = BM25Encoder()


def _point(i: int, text: str, **payload: object) -> Point:
    return Point(_pid(i), {"kind": "note", "n": i, "text": text, **payload}, _vec(i),
                 bm25.document(text))


def test_upsert_retrieve_and_vectors_roundtrip(store: VectorStore) -> None:
    store.upsert([_point(1, "alpha beta", project="a")])
    [p] = store.retrieve([_pid(1)], with_vectors=True)
    assert p.payload["project"] == "a"
    assert p.dense is not None and np.allclose(p.dense, _vec(1), atol=1e-5)
    assert p.sparse is not None and len(p.sparse.indices) == 2


def test_dense_query_finds_nearest_and_respects_filter(store: VectorStore) -> None:
    store.upsert([_point(i, f"text {i}", project="a" if i % 2 else "b") for i in range(20)])
    hits = store.query_dense(_vec(7), None, 3)
    assert hits[0].id == _pid(7)
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    hits = store.query_dense(_vec(7), Filter(must=(Match("project", "b"),)), 5)
    assert hits and all(h.payload["project"] == "b" for h in hits)
    exact = store.query_dense(_vec(7), Filter(must=(Match("project", "b"),)), 5, exact=True)
    assert [h.id for h in exact] == [h.id for h in hits]


def test_sparse_bm25_ranks_keyword_match_first(store: VectorStore) -> None:
    store.upsert([
        _point(1, "the deployment uses nginx as a reverse proxy"),
        _point(2, "postgres connection pool exhausted under load"),
        _point(3, "unrelated words about gardening and tomatoes"),
    ])
    hits = store.query_sparse(bm25.query("postgres pool"), None, 3)
    assert hits[0].id == _pid(2)
    assert all(h.id != _pid(3) for h in hits)


def test_filters_match_any_range_has_id_must_not(store: VectorStore) -> None:
    store.upsert([_point(i, "x", tags=[f"t{i % 3}", "all"], ts=float(i)) for i in range(12)])
    f = Filter(must=(MatchAny("tags", ("t0", "t1")), Range("ts", gte=3.0, lt=9.0)),
               must_not=(HasId((_pid(4),)),))
    got = sorted(p.payload["n"] for p in scroll_all(store, f))
    assert got == [3, 6, 7]
    nested = Filter(must=(Filter(should=(Match("n", 1), Match("n", 2))),))
    assert store.count(nested) == 2


def test_boolean_fields_filter_both_ways(store: VectorStore) -> None:
    store.upsert([_point(i, "x", forgotten=bool(i % 2), pinned=False) for i in range(6)])
    assert store.count(Filter(must=(Match("forgotten", True),))) == 3
    assert store.count(Filter(must_not=(Match("forgotten", True),))) == 3
    store.set_payload([_pid(0)], {"forgotten": True})
    assert store.count(Filter(must=(Match("forgotten", True),))) == 4
    [p] = store.retrieve([_pid(0)])
    assert p.payload["forgotten"] is True and set(p.payload) >= {"kind", "n", "pinned"}
    assert not [k for k in p.payload if k.startswith("_")]


def test_flag_counts_count_true_and_false_among_the_ids_only(store: VectorStore) -> None:
    # 0-5 code, 6-11 prose, 12-14 without the flag (notes from before it existed).
    store.upsert([_point(i, "x", is_code=i < 6) for i in range(12)]
                 + [_point(i, "x") for i in range(12, 15)])
    store.set_payload([_pid(6)], {"is_code": True})  # an update changes the count
    assert store.flag_counts([_pid(i) for i in range(15)], "is_code") == (7, 5)
    assert store.flag_counts([_pid(i) for i in (0, 7, 8, 13)], "is_code") == (1, 2)
    assert store.flag_counts([_pid(13), _pid(99)], "is_code") == (0, 0)


def test_may_hold_flag_follows_every_write(store: VectorStore) -> None:
    """False only while no point holds the flag true: the search skips its code-share
    facet then, so each write that can change it must be seen (Edge keeps the answer
    between writes; a server collection answers True, as others may write it)."""
    exact = isinstance(store, EdgeStore)
    store.upsert([_point(i, "x", is_code=False) for i in range(4)])
    assert store.may_hold_flag("is_code") is not exact  # Edge: none is code
    assert store.may_hold_flag("is_code") is not exact  # kept, still right
    store.set_payload([_pid(2)], {"is_code": True})
    assert store.may_hold_flag("is_code") is True
    store.set_payload([_pid(2)], {"is_code": False})
    assert store.may_hold_flag("is_code") is not exact
    store.upsert([_point(9, "y", is_code=True)])
    assert store.may_hold_flag("is_code") is True
    store.delete([_pid(9)])
    assert store.may_hold_flag("is_code") is not exact
    assert store.flag_counts([_pid(i) for i in range(4)], "is_code") == (0, 4)


def test_edge_flag_counts_answer_while_the_index_is_rebuilt(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "shard")
    store.open(DIM)
    try:
        store.upsert([_point(i, "x", is_code=i < 2) for i in range(5)])
        name = next(n for n in store.payload_indexes() if n.endswith("is_code"))
        store._update(qe.UpdateOperation.delete_field_index(name))  # a rebuild's first step
        assert store.flag_counts([_pid(i) for i in range(5)], "is_code") == (2, 3)
        # Without the index nothing is known: the search counts (never skips wrongly).
        store.set_payload([_pid(0), _pid(1)], {"is_code": False})
        assert store.may_hold_flag("is_code") is True
    finally:
        store.close()


def test_legs_without_payload_fields_return_no_payload(store: VectorStore) -> None:
    store.upsert([_point(i, f"text {i}", project="a") for i in range(5)])
    dense = store.query_dense(_vec(2), None, 3, fields=())
    sparse = store.query_sparse(bm25.query("text"), None, 3, fields=())
    assert dense[0].id == _pid(2) and len(sparse) == 3
    assert all(h.payload == {} for h in (*dense, *sparse))
    assert store.query_dense(_vec(2), None, 1, fields=("n",))[0].payload == {"n": 2}


def test_indexes_can_be_created_on_demand(store: VectorStore) -> None:
    store.upsert([_point(i, "x") for i in range(3)])
    store.ensure_indexes()
    assert store.count(Filter(must=(Match("kind", "note"),))) == 3


def test_set_payload_merges_and_delete_by_filter(store: VectorStore) -> None:
    store.upsert([_point(i, "x", project="p") for i in range(5)])
    store.set_payload([_pid(1)], {"access_count": 3})
    [p] = store.retrieve([_pid(1)])
    assert p.payload["access_count"] == 3 and p.payload["project"] == "p"
    store.delete_by_filter(Filter(must=(Match("n", 2),)))
    store.delete([_pid(3)])
    assert store.count() == 3


def test_scroll_pages_through_everything(store: VectorStore) -> None:
    store.upsert([_point(i, "x") for i in range(1000)])
    seen = [p.payload["n"] for p in scroll_all(store, None, page=64)]
    assert sorted(seen) == list(range(1000))


def test_payload_only_point(store: VectorStore) -> None:
    store.upsert([Point(_pid(99), {"kind": "meta", "model": "m"})])
    [p] = store.retrieve([_pid(99)])
    assert p.payload["model"] == "m"
    assert store.query_dense(_vec(1), None, 5) == []


def test_reopen_keeps_points(tmp_path: Path) -> None:
    for kind in ("edge", "qdrant-local"):
        s = _store(kind, tmp_path / kind)
        s.open(DIM)
        s.upsert([_point(i, "persist me") for i in range(10)])
        s.close()
        s = _store(kind, tmp_path / kind)
        s.open(DIM)
        assert s.count() == 10
        s.close()


def test_edge_second_opener_gets_store_locked(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path / "shard")
    first.open(DIM)
    try:
        with pytest.raises(StoreLocked) as err:
            EdgeStore(tmp_path / "shard").open(DIM)
        assert "another process" in err.value.message
    finally:
        first.close()


def test_edge_indexes_project_as_a_tenant_and_upgrades_older_stores(tmp_path: Path) -> None:
    import qdrant_edge as qe

    s = EdgeStore(tmp_path / "shard")
    s.open(DIM)
    try:
        schema = s._require().info().payload_schema
        assert schema["project"].params.is_tenant is True
        # Make it a store from before tenant indexes: a plain keyword index on project.
        s._require().update(qe.UpdateOperation.delete_field_index("project"))
        s._require().update(
            qe.UpdateOperation.create_field_index("project", qe.PayloadSchemaType.Keyword))
        assert s._require().info().payload_schema["project"].params is None
        s.upsert([_point(i, f"note {i}", project=f"p{i % 2}") for i in range(6)])
    finally:
        s.close()
    s = EdgeStore(tmp_path / "shard")
    s.open(DIM)  # reopening upgrades the index
    try:
        assert s._require().info().payload_schema["project"].params.is_tenant is True
        hits = s.query_dense(_vec(2), Filter(must=(Match("project", "p0"),)), 10)
        assert sorted(h.payload["n"] for h in hits) == [0, 2, 4]
    finally:
        s.close()
