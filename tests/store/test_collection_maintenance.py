"""Collection maintenance (issue 15 part 5) and quantization (issue 14 part 2), through the
health tools and CLI: a payload index missing or built differently is reported, the rebuild
fixes it and the report is clean again; the quantization switch on Qdrant Edge (and what
qdrant-client's local mode can and cannot do); overlapping runs get ACTION_IN_PROGRESS; dry
runs change nothing.

Qdrant Edge in tmp dirs and qdrant-client local mode, with the offline hash embedder (the
model does not matter here)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe

from brain.app import Brain
from brain.clock import ManualClock
from brain.errors import NotSupported
from brain.memory import RecallFilter
from brain.memory.bulk import bulk_add
from brain.notes import point_id
from brain.vector_store import Filter, HasId
from brain.vector_store.edge import EdgeStore
from config import Settings
from tests.conftest import hash_embedder


def _edge(brain: Brain) -> EdgeStore:
    inner = brain.store
    while not isinstance(inner, EdgeStore):
        inner = inner.inner  # type: ignore[attr-defined]
    return inner


def _damage_indexes(brain: Brain) -> None:
    """The store loses its ``kind`` index and has ``path`` as a float index."""
    edge = _edge(brain)
    edge._update(qe.UpdateOperation.delete_field_index("kind"))
    edge._update(qe.UpdateOperation.delete_field_index("path"))
    edge._update(qe.UpdateOperation.create_field_index("path", qe.PayloadSchemaType.Float))


async def test_missing_and_different_indexes_are_reported_and_rebuilt(
    client: Any, brain: Brain
) -> None:
    first = (await client.call_tool("health_collection", {})).structured_content
    assert first["ok"], first
    assert first["payload_indexes"]["missing"] == [] and first["payload_indexes"]["different"] == []
    _damage_indexes(brain)
    rep = (await client.call_tool("health_collection", {})).structured_content
    assert not rep["ok"]
    assert rep["payload_indexes"]["missing"] == ["kind"]
    assert rep["payload_indexes"]["different"] == [
        {"field": "path", "have": "float", "want": "keyword on-disk no-hnsw"}]
    assert any("health rebuild_indexes" in f for f in rep["fix"])
    # The dry run (the default) lists and changes nothing.
    dry = (await client.call_tool("health_rebuild_indexes", {})).structured_content
    assert dry["dry_run"] and dry["count"] == 2 and dry["rebuilt"] == []
    again = (await client.call_tool("health_collection", {})).structured_content
    assert again["payload_indexes"] == rep["payload_indexes"]
    done = (await client.call_tool("health_rebuild_indexes", {"dry_run": False})
            ).structured_content
    assert sorted(done["rebuilt"]) == ["kind", "path"]
    clean = (await client.call_tool("health_collection", {})).structured_content
    assert clean["ok"], clean
    have = brain.store.payload_indexes()
    assert have["kind"] == "keyword on-disk" and have["path"] == "keyword on-disk no-hnsw"
    assert have["project"] == "keyword:tenant on-disk"
    # The rebuilt index answers filters.
    brain.memory.add("a note about index rebuilds", "p")
    assert brain.memory.search("index rebuilds", 5, RecallFilter(project="p"))


async def test_overlapping_runs_get_action_in_progress(client: Any, brain: Brain) -> None:
    with brain.health._exclusive("gc", "someproject", "test"):  # a run holds one project
        for tool, args in (("health_rebuild_indexes", {"dry_run": False}),
                           ("health_quantization", {"mode": "none", "dry_run": False})):
            res = await client.call_tool(tool, args, raise_on_error=False)
            assert res.is_error, tool
            assert res.structured_content["error"]["code"] == "ACTION_IN_PROGRESS"
    assert brain.store.quantization() == "int8"  # a new store's, unchanged


@pytest.fixture
def indexed_brain(settings: Settings, clock: ManualClock, _empty_shard: Path) -> Iterator[Brain]:
    """A brain whose store builds HNSW segments from 64 vectors on (so a switch has segments
    to rebuild), with 400 notes optimized into one; a store and a setting of no
    quantization, which the tests switch."""
    settings.embedding.model = "offline/hash-384"
    settings.index.min_unindexed = 64
    settings.index.quantization = "none"
    b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        bulk_add(b.memory, [f"note {i} about the parser cache and queue {i * 7}"
                            for i in range(400)], project="p", batch=200)
        b.index_maintenance.run("test")
        yield b
    finally:
        b.close()


def _top(brain: Brain, zk: str) -> list[tuple[str, float]]:
    vec = brain.store.retrieve([point_id(zk)], with_vectors=True)[0].dense
    assert vec is not None
    return [(h.id, round(h.score, 4)) for h in brain.store.query_dense(vec, None, 5)]


def _dense_storage(edge) -> set[str]:  # noqa: ANN001
    """How the indexed segments keep the original dense vectors (their segment.json)."""
    kinds = set()
    for seg in (edge.path / "segments").glob("*"):
        cfg = json.loads((seg / "segment.json").read_text(encoding="utf-8"))["config"]
        if cfg["vector_data"]["dense"]["index"]["type"] == "hnsw":
            kinds.add(cfg["vector_data"]["dense"]["storage_type"])
    return kinds


def test_quantization_switch_on_edge(indexed_brain: Brain) -> None:
    b = indexed_brain
    edge = _edge(b)
    zks = [p.payload["zk_id"] for p in b.store.scroll(None, limit=50)[0]
           if p.payload.get("kind") == "note"][:5]
    before = {z: _top(b, z) for z in zks}
    indexed, quantized = edge.quantized_segments()
    assert indexed >= 1 and quantized == 0
    assert b.meta.quantization == "none"
    # Dry run: reports, changes nothing.
    dry = b.health.apply_quantization("int8", dry_run=True)
    assert dry["would_change"] and dry["from"] == "none" and dry["to"] == "int8"
    assert b.store.quantization() == "none" and edge.quantized_segments()[1] == 0
    assert b.meta.quantization == "none"
    # Apply: the segments are rebuilt with int8 data, the meta records it.
    done = b.health.apply_quantization("int8", dry_run=False)
    assert done["changed"] and done["rebuilt"]
    assert b.store.quantization() == "int8" and b.meta.quantization == "int8"
    indexed, quantized = edge.quantized_segments()
    assert indexed >= 1 and quantized == indexed
    # The int8 copy is what RAM holds: the indexed segments keep the originals on disk.
    assert _dense_storage(edge) == {"Mmap"}
    # Rescored searches: each note's own vector still finds it first at score 1.
    for z in zks:
        top = _top(b, z)
        assert top[0][0] == point_id(z) and top[0][1] == pytest.approx(1.0, abs=1e-3)
        assert top[0] == before[z][0]
        # Rescored: every score is the exact cosine of the original vectors, not an int8 one.
        vec = b.store.retrieve([point_id(z)], with_vectors=True)[0].dense
        assert vec is not None
        exact = {h.id: round(h.score, 4) for h in b.store.query_dense(
            vec, Filter(must=(HasId(tuple(i for i, _ in top)),)), 5, exact=True)}
        assert all(exact[i] == pytest.approx(score, abs=2e-4) for i, score in top), (top, exact)
    rep = b.health.collection()
    assert rep["quantization"]["differs"]  # the setting still says none
    assert rep["quantization"]["store"] == "int8" and not rep["quantization"]["incomplete"]
    assert b.stats()["index"]["quantization"] == "int8"  # brain_stats shows it
    # Writes go on after the switch.
    b.memory.add("a note written after the switch", "p")
    assert b.memory.search("written after the switch", 3, RecallFilter(project="p"))


def test_a_start_never_switches_quantization_and_back_to_none(
    indexed_brain: Brain, settings: Settings, clock: ManualClock
) -> None:
    b = indexed_brain
    b.health.apply_quantization("int8", dry_run=False)
    b.close()
    # The setting says none: the store keeps its own mode across a restart.
    again = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        assert again.store.quantization() == "int8" and again.meta.quantization == "int8"
        rep = again.health.collection()
        assert rep["quantization"]["differs"] and not rep["ok"]
        back = again.health.apply_quantization(dry_run=False)  # to the setting
        assert back["from"] == "int8" and back["to"] == "none"
        assert again.store.quantization() == "none" and again.meta.quantization == "none"
        assert _edge(again).quantized_segments()[1] == 0
        assert _dense_storage(_edge(again)) == {"InRamMmap"}  # the originals back in RAM
        assert again.health.collection()["ok"]
        # Nothing to do: a second run changes nothing.
        assert again.health.apply_quantization(dry_run=False)["changed"] is False
    finally:
        again.close()


def test_a_new_store_is_created_with_the_configured_mode(
    settings: Settings, clock: ManualClock
) -> None:
    settings.embedding.model = "offline/hash-384"
    settings.index.quantization = "int8"
    b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        assert b.store.quantization() == "int8" and b.meta.quantization == "int8"
        assert b.health.collection()["ok"]
        b.memory.add("a note in a quantized store", "p")
        assert b.memory.search("quantized store", 3, RecallFilter(project="p"))
    finally:
        b.close()


def test_local_mode_keeps_no_quantization_and_says_so(
    settings: Settings, clock: ManualClock, tmp_path: Path
) -> None:
    settings.embedding.model = "offline/hash-384"
    settings.qdrant.local_path = str(tmp_path / "local")
    settings.index.quantization = "int8"
    b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        assert b.store.quantization() is None
        assert b.meta.quantization == "int8"  # the setting is recorded
        rep = b.health.collection()
        # Local mode keeps neither payload indexes nor quantization: nothing differs.
        assert rep["ok"], rep
        assert rep["quantization"]["supported"] is False and "local mode" in \
            rep["quantization"]["note"]
        dry = b.health.apply_quantization("int8", dry_run=True)
        assert dry["would_change"] is False and "local mode" in dry["note"]
        with pytest.raises(NotSupported) as err:
            b.health.apply_quantization("none", dry_run=False)
        assert err.value.code == "NOT_SUPPORTED" and "BRAIN__QDRANT__URL" in err.value.message
        assert b.meta.quantization == "int8"  # unchanged
        assert b.health.rebuild_indexes(dry_run=False)["count"] == 0
    finally:
        b.close()


def test_cli_collection_report_and_rebuild(
    brain: Brain, cli_json: Callable[..., tuple[int, dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _damage_indexes(brain)
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    brain.close()  # one process owns a store: the CLI opens it now
    cli = cli_json

    rc, rep = cli("health", "collection")
    # A start creates missing indexes (cheap), never rebuilds one built differently.
    assert rc == 1 and rep["payload_indexes"]["different"][0]["field"] == "path"
    rc, dry = cli("health", "rebuild-indexes")
    assert rc == 0 and dry["dry_run"] and dry["rebuilt"] == []
    rc, done = cli("health", "rebuild-indexes", "--apply")
    assert rc == 0 and done["rebuilt"] and done["started_by"] == "cli"
    rc, rep = cli("health", "collection")
    assert rc == 0 and rep["ok"]
    rc, q = cli("health", "quantization", "--mode", "none")  # a new store is int8
    assert rc == 0 and q["dry_run"] and q["would_change"]
