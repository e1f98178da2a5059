"""Restarts keep every note, link and access count; the graph cache rebuilds identically."""

from __future__ import annotations

import json

from brain.app import Brain
from brain.memory import RecallFilter
from config import Settings
from tests.conftest import hash_embedder


def _open(settings: Settings) -> Brain:
    settings.embedding.model = "offline/hash-384"
    return Brain(settings, embedder=hash_embedder()).open()


def _snapshot(b: Brain) -> dict:
    return {p["zk_id"]: (p["title"], sorted(p["links"]), p["access_count"])
            for p in b.memory.notes()}


def _seed(b: Brain) -> None:
    for text in ("redis cache eviction policy allkeys-lru", "redis cache eviction policy noeviction",
                 "redis cache eviction caused 500s", "kubernetes liveness probe too strict"):
        b.memory.add(text, project="ops")
    b.memory.search("redis cache eviction", 3, RecallFilter(project="ops"))


def test_restart_keeps_notes_links_and_access_counts(settings: Settings) -> None:
    b = _open(settings)
    _seed(b)
    before, edges = _snapshot(b), b.graph.edges()
    assert edges and any(v[2] for v in before.values())
    b.close()
    b2 = _open(settings)
    try:
        assert _snapshot(b2) == before
        assert b2.graph.edges() == edges
    finally:
        b2.close()


def test_deleted_or_corrupt_graph_cache_is_rebuilt_the_same(settings: Settings) -> None:
    b = _open(settings)
    _seed(b)
    edges = b.graph.edges()
    b.close()
    settings.graph_path.unlink()
    b2 = _open(settings)
    assert b2.graph.edges() == edges
    b2.close()
    settings.graph_path.write_text("{not json")
    b3 = _open(settings)
    assert b3.graph.edges() == edges
    b3.close()


def test_stale_cache_after_crash_is_detected(settings: Settings) -> None:
    b = _open(settings)
    b.memory.add("alpha service retries with jitter")
    b.close()
    stale = json.loads(settings.graph_path.read_text())
    b = _open(settings)
    b.memory.add("alpha service retries with jitter and backoff")
    edges = b.graph.edges()
    assert edges
    # Simulate a crash before the cache was rewritten: put the old cache back.
    b.store.flush()
    b.close()
    settings.graph_path.write_text(json.dumps(stale))
    b2 = _open(settings)
    try:
        assert b2.graph.edges() == edges
    finally:
        b2.close()


def test_store_keeps_its_model_and_reports_a_pending_switch(settings: Settings) -> None:
    settings.embedding.model = "offline/hash-384"
    b = Brain(settings).open()
    b.memory.add("built with the hash model")
    b.close()
    # Another configured model: vectors never mix, the recorded model keeps serving.
    settings.embedding.model = "sentence-transformers/all-MiniLM-L6-v2"
    b2 = Brain(settings).open()
    try:
        st = b2.stats()
        assert st["model"]["active"] == "offline/hash-384"
        assert st["model"]["pending_switch"] == "sentence-transformers/all-MiniLM-L6-v2"
        assert b2.embedder.record.id == "offline/hash-384"
        assert b2.memory.search("built with the hash model", 1)
    finally:
        b2.close()
