"""bulk_add with vectors given by the caller (an export on the same model, the speed bench's
cached embeddings): used as given when valid, refused when not, ignored when redaction
changed the text they encode."""

from __future__ import annotations

import numpy as np
import pytest

from brain.errors import InvalidArgument
from brain.memory.bulk import BulkNote, bulk_add
from brain.notes import point_id


def _stored_vector(brain, zk_id: str) -> np.ndarray:  # noqa: ANN001
    pt = brain.store.retrieve([point_id(zk_id)], with_vectors=True)[0]
    return np.asarray(pt.dense, dtype=np.float32)


def test_a_given_vector_is_stored_as_given(brain) -> None:  # noqa: ANN001
    other = brain.embedder.embed_documents(["the websocket client drops frames"])[0]
    res = bulk_add(brain.memory, [
        BulkNote("Pin torch before installing", project="p", vector=other.tolist()),
        BulkNote("Use uv for the venv", project="p"),
    ])
    given, embedded = (_stored_vector(brain, z) for z in res.zk_ids)
    assert np.allclose(given, other, atol=1e-5)
    assert np.allclose(embedded, brain.embedder.embed_documents(["Use uv for the venv"])[0],
                       atol=1e-5)


@pytest.mark.parametrize("bad", [[0.1] * 7, [float("nan")] * 384])
def test_a_bad_vector_is_refused_and_its_batch_unwritten(brain, bad) -> None:  # noqa: ANN001
    before = brain.store.count(None)
    with pytest.raises(InvalidArgument, match="same model"):
        bulk_add(brain.memory, [BulkNote("fine note", project="p"),
                                BulkNote("bad vector", project="p", vector=bad)])
    assert brain.store.count(None) == before


def test_a_vector_of_redacted_text_is_not_kept(brain) -> None:  # noqa: ANN001
    secret = "deploy with key sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    leak = brain.embedder.embed_documents([secret])[0]
    res = bulk_add(brain.memory, [BulkNote(secret, project="p", vector=leak.tolist())])
    stored = brain.store.retrieve([point_id(res.zk_ids[0])], with_vectors=True)[0]
    assert "a1B2c3D4e5F6" not in stored.payload["content"]
    vec = np.asarray(stored.dense, dtype=np.float32)
    assert not np.allclose(vec, leak, atol=1e-3)
    assert np.allclose(vec, brain.embedder.embed_documents([stored.payload["content"]])[0],
                       atol=1e-5)


def test_bulk_notes_without_links_are_in_the_graph_after_a_restart(settings, clock) -> None:  # noqa: ANN001
    """The bulk path's notes without links were graph nodes in memory only: the cache was
    never saved with them, and after a restart a health scan called every one of them
    missing from the graph (ok: false on a sound store)."""
    from brain.app import Brain
    from tests.conftest import hash_embedder

    settings.embedding.model = "offline/hash-384"
    b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        ids = bulk_add(b.memory, [f"bulk note {i} with no links" for i in range(5)],
                       project="p").zk_ids
    finally:
        b.close()
    b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        assert set(ids) <= set(b.graph.node_ids())
        assert b.health.scan()["findings"]["notes_missing_from_graph"]["count"] == 0
    finally:
        b.close()
