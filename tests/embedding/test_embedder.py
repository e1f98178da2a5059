from __future__ import annotations

import numpy as np
import pytest

from brain.embedding.registry import REGISTRY, HashEmbedder, resolve_record
from brain.errors import ModelUnavailable, UnsupportedEmbeddingDimension


def test_registry_records_are_explicit() -> None:
    rec = REGISTRY["sentence-transformers/all-MiniLM-L6-v2"]
    assert (rec.provider, rec.dimension, rec.max_seq_length) == ("sentence-transformers", 384, 256)


def test_unsupported_dimension_raises_typed_error() -> None:
    with pytest.raises(UnsupportedEmbeddingDimension) as err:
        resolve_record("sentence-transformers/all-MiniLM-L6-v2", 512)
    assert err.value.code == "UNSUPPORTED_EMBEDDING_DIMENSION"


def test_unknown_model_says_how_to_fix() -> None:
    with pytest.raises(ModelUnavailable, match="BRAIN__EMBEDDING__MODEL"):
        resolve_record("no/such-model")


def test_hash_embedder_is_deterministic_and_normalised() -> None:
    emb = HashEmbedder(REGISTRY["offline/hash-384"])
    a = emb.embed_documents(["redis port 6379", "something else entirely"])
    b = emb.embed_documents(["redis port 6379", "something else entirely"])
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    q = emb.embed_query("redis port")
    assert float(a[0] @ q) > float(a[1] @ q)


@pytest.mark.model
def test_real_model_loads_offline_from_package(st_embedder) -> None:  # noqa: ANN001
    vecs = st_embedder.embed_documents(["The cat sat on the mat.", "A feline rested on a rug."])
    assert vecs.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert float(vecs[0] @ vecs[1]) > 0.5
    assert st_embedder.count_tokens("hello world") == 2
