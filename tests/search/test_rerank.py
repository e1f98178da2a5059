"""[rerank]: a cross-encoder loads at start or the server refuses to start; when loaded it
reorders search results. No cross-encoder ships in a PyPI package, so the tests build a small
one locally (the bundled MiniLM's tokenizer, a 1-layer BERT with a fixed seed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from brain.app import Brain
from brain.embedding.registry import DEFAULT_MODEL, bundled_model_path
from brain.errors import ModelUnavailable
from brain.memory import RecallFilter, embed_text
from brain.search import rerank
from config import RerankSettings
from tests.conftest import _seed_store, hash_embedder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path = tmp_path_factory.mktemp("cross-encoder")
    source = bundled_model_path(DEFAULT_MODEL)
    assert source is not None
    tokenizer = BertTokenizerFast.from_pretrained(str(source))
    torch.manual_seed(7)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


NOTES = [
    "The deploy script pushes the docker image to the registry before tagging.",
    "Postgres connection pool size is 20 in production.",
    "Use ruff for linting; black is no longer used.",
    "The deploy pipeline runs integration tests against a staging database.",
    "Redis cache TTL for sessions is 30 minutes.",
    "Deploys are blocked on Fridays after 3 pm.",
    "The staging deploy uses a smaller database instance.",
    "CI caches pip wheels between runs.",
]


def _open(settings, clock, empty_shard, **rerank_settings) -> Brain:  # noqa: ANN001
    settings.embedding.model = "offline/hash-384"
    for key, value in rerank_settings.items():
        setattr(settings.rerank, key, value)
    _seed_store(settings, empty_shard)
    return Brain(settings, embedder=hash_embedder(), clock=clock).open()


def test_enabled_reranker_orders_results_by_cross_encoder_score(
    settings, clock, _empty_shard, cross_encoder_dir  # noqa: ANN001
) -> None:
    b = _open(settings, clock, _empty_shard, enabled=True, model=str(cross_encoder_dir))
    try:
        for text in NOTES:
            b.memory.add(text, project="p")
        query = "how does the deploy reach the database"
        hits = b.memory.search(query, top_k=5, rf=RecallFilter(project="p"))
        assert b.stats()["rerank"] == {"enabled": True, "model": str(cross_encoder_dir)}
        # The expected order, computed independently with the same model.
        from sentence_transformers import CrossEncoder

        ce = CrossEncoder(str(cross_encoder_dir), device="cpu")
        b.memory.reranker = None
        fused = b.memory.search(query, top_k=len(NOTES), rf=RecallFilter(project="p"))
        assert len(fused) == len(NOTES)
        scores = ce.predict([(query, embed_text(h)) for h in fused])
        expected = [h["zk_id"] for _, h in sorted(zip(scores, fused, strict=True),
                                                 key=lambda sh: -float(sh[0]))][:5]
        assert [h["zk_id"] for h in hits] == expected
        assert all("rerank_score" in h for h in hits)
        scores_seen = [h["rerank_score"] for h in hits]
        assert scores_seen == sorted(scores_seen, reverse=True)
        # The reranker did change the order: without it the top 5 come in another order.
        assert [h["zk_id"] for h in fused[:5]] != expected
    finally:
        b.close()


def test_disabled_reranker_keeps_fusion_order_and_loads_nothing(brain: Brain) -> None:
    for text in NOTES:
        brain.memory.add(text, project="p")
    hits = brain.memory.search("deploy database", top_k=5, rf=RecallFilter(project="p"))
    assert len(hits) == 5
    assert all("rerank_score" not in h for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert brain.stats()["rerank"] == {"enabled": False, "order": "fusion"}
    assert brain.memory.reranker is None


@pytest.mark.parametrize("model", ["", "does/not/exist"])
def test_enabled_without_a_loadable_model_refuses_to_open(
    settings, clock, _empty_shard, tmp_path, model  # noqa: ANN001
) -> None:
    with pytest.raises(ModelUnavailable, match="BRAIN__RERANK__"):
        _open(settings, clock, _empty_shard, enabled=True, model=model)
    # Nothing was opened or locked: the same home opens fine with the reranker off.
    settings.rerank.enabled = False
    Brain(settings, embedder=hash_embedder(), clock=clock).open().close()


def test_a_folder_that_is_not_a_cross_encoder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelUnavailable, match="could not be loaded as a cross-encoder"):
        rerank.load(RerankSettings(enabled=True, model=str(tmp_path / "junk")))


def test_server_refuses_to_start_when_enabled_model_is_missing(home: Path) -> None:
    import os

    env = {**os.environ, "BRAIN__HOME": str(home), "HF_HUB_OFFLINE": "1",
           "BRAIN__RERANK__ENABLED": "true", "BRAIN__RERANK__MODEL": str(home / "nope")}
    proc = subprocess.run([sys.executable, str(ROOT / "mcp_server.py")], input="",
                          capture_output=True, text=True, timeout=120, env=env, cwd=str(ROOT))
    assert proc.returncode == 2
    assert "rerank.model" in proc.stderr and "BRAIN__RERANK__ENABLED=false" in proc.stderr
    assert proc.stdout == ""
