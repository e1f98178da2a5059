"""The sources and files services run on the parts they are handed, without a Brain.

Each is built here from a real Qdrant Edge store in a temp dir, the offline embedder, a
manual clock and an identity, as app.py builds them from the settings: what they stamp on
records and points (owner, model, time) comes from those parts and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brain.clock import ManualClock, iso
from brain.embedding.bm25 import BM25Encoder
from brain.embedding.registry import REGISTRY, HashEmbedder
from brain.files.service import FilesDeps, FilesService, doc_chunks
from brain.search.policy import SearchPolicy
from brain.sources.service import SourcesConfig, SourcesDeps, SourcesService
from brain.trust.identity import Identity
from brain.trust.paths import PathPolicy
from brain.vector_store import Filter, Match, scroll_all
from brain.vector_store.edge import EdgeStore
from config import FilesSettings, Settings

OWNER = Identity("dana", "builder")
MODEL = "offline/hash-384"
POLICY = SearchPolicy(fusion="dbsf", dense_weight=0.45, code_dense_weight=0.8, rrf_k=60,
                      candidates=20, relative_floor=0.0, neighbour_weight=0.0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore(tmp_path / "shard")
    s.open(384)
    try:
        yield s
    finally:
        s.close()


def _parts(store: EdgeStore, settings: Settings, clock: ManualClock) -> dict[str, object]:
    return {
        "store": store,
        "embedder": HashEmbedder(REGISTRY[MODEL]),
        "bm25": BM25Encoder(),
        "paths": PathPolicy(settings.paths, Path(settings.home)),
        "clock": clock,
        "identity": OWNER,
        "model_id": MODEL,
        "home": Path(settings.home),
    }


def test_sources_service_indexes_with_the_parts_it_is_given(
    store: EdgeStore, settings: Settings, clock: ManualClock, tmp_path: Path
) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "notes.md").write_text("# Glacier survey\n\nCrevasse depth readings by sonar.\n")
    cfg = SourcesConfig(
        default_project="fieldwork", concurrency=1, max_scan_files=1000, debounce_s=0.1,
        poll_interval_s=60.0, embed_batch=16, grep_timeout_s=5.0, exact_max_points=10_000,
        policy=POLICY,
    )  # fmt: skip
    svc = SourcesService(SourcesDeps(**_parts(store, settings, clock)), cfg)
    svc.start()
    try:
        added = svc.add(str(folder), name="proj")
        assert svc.wait_idle(60)
        source = added["source"]
        # the folder's own name, as the hooks name a project there (brain/projects.py); the
        # config's default project only for a folder with no usable name
        assert source["project"] == "proj"
        assert source["created"] == iso(clock.now())  # the injected clock, not the wall
        hits = svc.search("crevasse sonar", "semantic", limit=3)["results"]
        assert [h["path"] for h in hits][:1] == ["notes.md"]
        files = list(scroll_all(store, Filter(must=(Match("kind", "file"),))))
        assert [(p.payload["user_id"], p.payload["embed_model"]) for p in files] == [
            (OWNER.user_id, MODEL)
        ]
    finally:
        svc.stop()
        svc.registry.close()


def test_files_service_indexes_with_the_parts_it_is_given(
    store: EdgeStore, settings: Settings, clock: ManualClock, tmp_path: Path
) -> None:
    deps = FilesDeps(
        **_parts(store, settings, clock),
        default_project="archive",
        redact_secrets=True,
        exact_max_points=10_000,
        policy=POLICY,
    )
    svc = FilesService(deps, FilesSettings(chunk_tokens=40))
    doc = tmp_path / "memo.txt"
    doc.write_text("Quarterly memo.\n\nThe deploy key is AKIAIOSFODNN7EXAMPLE, rotate it.\n")
    svc.start()
    try:
        rec = svc.ingest(doc)
        assert rec["project"] == "archive" and rec["created_at"] == iso(clock.now())
        done = svc.wait(rec["id"], 30)
        assert done["status"] == "ready" and done["embed_model"] == MODEL
        assert done["redactions"] >= 1  # redact_secrets from the deps, not from settings
        points = doc_chunks(store, rec["id"])
        assert points and {p.payload["user_id"] for p in points} == {OWNER.user_id}
        assert all("AKIAIOSFODNN7EXAMPLE" not in p.payload["content"] for p in points)
    finally:
        svc.close()
