"""Retrieval levers kept by the benchmark: content-aware fusion weight (code vs prose) and
long-text pooling of note vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from brain.app import Brain
from brain.clock import ManualClock
from brain.embedding.registry import embed_passages, split_for_window
from brain.memory import RecallFilter
from brain.search.fusion import fuse, looks_like_code
from brain.vector_store import Hit
from config import RetrievalSettings, Settings
from tests.conftest import _seed_store, hash_embedder

PY = '''def is_empty(lst):
    """Return True when the list has no items.

    Works for any sized container.
    """
    return len(lst) == 0
'''
JS = """function add(a, b) {
  const total = a + b;
  return total;
}
"""
GO = """package main

func main() {
\tfmt.Println("hi")
}
"""
PROSE = """We chose Postgres over MySQL for the billing service.
The team knows it better, and JSONB columns fit the invoice metadata.
Revisit if write volume passes 5k/s."""
CHAT = """(1:56 pm on 8 May, 2023) Caroline said, "Hey Mel! Good to see you! How have you been?"
(1:56 pm on 8 May, 2023) Melanie said, "Hey Caroline! Good to see you! I'm swamped."
(1:57 pm on 8 May, 2023) Caroline said, "I went to a LGBTQ support group yesterday." """


@pytest.mark.parametrize("text", [PY, JS, GO])
def test_code_is_recognised(text: str) -> None:
    assert looks_like_code(text)


@pytest.mark.parametrize("text", [PROSE, CHAT, "x = 1", "see the README (section 2)"])
def test_prose_chat_and_one_liners_are_not_code(text: str) -> None:
    assert not looks_like_code(text)


def _legs(payload: dict[str, str]) -> tuple[list[Hit], list[Hit]]:
    # The dense leg prefers "a", BM25 prefers "b" more strongly; the rest is background.
    dense = [Hit("a", 0.80, payload), Hit("b", 0.70, payload)] + [
        Hit(f"n{i}", 0.40 - 0.01 * i, payload) for i in range(8)]
    sparse = [Hit("b", 12.0, payload), Hit("a", 6.0, payload)] + [
        Hit(f"n{i}", 3.0 - 0.1 * i, payload) for i in range(8)]
    return dense, sparse


def test_code_candidates_move_the_fusion_toward_the_dense_leg() -> None:
    prose = _legs({"content": PROSE})
    code = _legs({"content": PY})
    # Prose: the prose weight (0.45) lets BM25's strong preference win.
    assert fuse(*prose, "dbsf", 0.45, code_dense_weight=0.8)[0].id == "b"
    # Code: the same scores, but the candidates are code, so the dense leg leads.
    assert fuse(*code, "dbsf", 0.45, code_dense_weight=0.8)[0].id == "a"
    # Without the lever, code is fused like prose.
    assert fuse(*code, "dbsf", 0.45, code_dense_weight=None)[0].id == "b"


def test_rrf_ties_follow_the_legs_not_the_ids() -> None:
    """Note ids are random, so a tie broken by id ranked the same notes differently from one
    store to the next. Two stores with the same legs, ids drawn in the opposite order, must
    rank alike: the n-th dense hit and the n-th BM25 hit tie under rrf."""
    rrf_k = RetrievalSettings().rrf_k

    def ranking(names: dict[str, str]) -> list[str]:
        dense = [Hit(names["d0"], 0.9, {}), Hit(names["d1"], 0.8, {})]
        sparse = [Hit(names["s0"], 9.0, {}), Hit(names["s1"], 8.0, {})]
        back = {v: k for k, v in names.items()}
        return [back[c.id] for c in fuse(dense, sparse, "rrf", rrf_k=rrf_k)]

    first = ranking({"d0": "a", "d1": "b", "s0": "c", "s1": "d"})
    assert first == ranking({"d0": "d", "d1": "c", "s0": "b", "s1": "a"})
    assert first == ["d0", "s0", "d1", "s1"]
    # Both legs saw both notes, in opposite orders: ranks (0, 1) and (1, 0) tie.
    for x, y in (("a", "b"), ("b", "a")):
        both = fuse([Hit(x, 0.9, {}), Hit(y, 0.8, {})], [Hit(y, 9.0, {}), Hit(x, 8.0, {})],
                    "rrf", rrf_k=rrf_k)
        assert [c.id for c in both] == [x, y]


def test_every_fusion_is_handed_its_numbers() -> None:
    dense, sparse = _legs({"content": PROSE})
    with pytest.raises(ValueError, match="rrf_k"):
        fuse(dense, sparse, "rrf")
    with pytest.raises(ValueError, match="dense_weight"):
        fuse(dense, sparse, "dbsf")


def test_split_for_window_keeps_every_character_and_cuts_at_boundaries() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 60 for i in range(7))
    parts = split_for_window(text, 3)
    assert "".join(parts) == text
    assert len(parts) == 3
    assert all(p.endswith("\n\n") for p in parts[:-1])


def test_long_text_vector_is_the_mean_of_its_pieces() -> None:
    emb = hash_embedder()
    short = "the cache key includes the tenant id"
    long = " ".join(f"sentence {i} about topic {i % 7}." for i in range(400))
    assert emb.count_tokens(long) > emb.record.max_seq_length
    vecs = embed_passages(emb, [short, long])
    assert np.allclose(vecs[0], emb.embed_documents([short])[0])
    window = int(emb.record.max_seq_length * 0.9)
    pieces = split_for_window(long, -(-emb.count_tokens(long) // window))
    mean = emb.embed_documents(pieces).mean(axis=0)
    assert np.allclose(vecs[1], mean / np.linalg.norm(mean), atol=1e-6)
    assert np.allclose(embed_passages(emb, [long], pool=False)[0],
                       emb.embed_documents([long])[0])


GARDEN = (
    "Notes from the garden planning session. The tomatoes go in the south bed this year, "
    "with basil between the rows to keep pests down. We will rotate the beans to the north "
    "bed, since they fix nitrogen for next year's squash. Mulch with straw after the last "
    "frost, and water early in the morning so the leaves dry before evening. "
) * 5
WEBHOOKS = (
    "Billing: Stripe webhooks that fail are retried three times with exponential backoff "
    "(1 s, 4 s, 16 s). After the third failure the webhook event goes to the dead-letter "
    "queue and the on-call engineer is paged. Webhook retries are idempotent because each "
    "Stripe event id is stored before the handler runs."
)
OTHERS = [
    "The payment page shows a spinner while the card is being charged.",
    "Frontend builds use Vite; the dev server runs on port 5173.",
    "Postgres connection pool size is 20 in production.",
    "Invoices are emailed as PDF attachments on the first of the month.",
]


@pytest.mark.parametrize("pool", [True, False])
def test_a_fact_past_the_model_window_is_found_only_with_pooling(
    settings: Settings, clock: ManualClock, st_embedder: Any, _empty_shard: Path, pool: bool
) -> None:
    settings.retrieval.fusion = "dense"  # configured through settings, as the bench does
    settings.memory.pool_long_text = pool
    _seed_store(settings, _empty_shard)
    with Brain(settings, embedder=st_embedder, clock=clock) as real_brain:
        _check_pooling(real_brain, pool)


def _check_pooling(real_brain: Brain, pool: bool) -> None:
    long_id = real_brain.memory.add(GARDEN + "\n\n" + WEBHOOKS, project="p").note["zk_id"]
    assert real_brain.embedder.count_tokens(GARDEN) > real_brain.embedder.record.max_seq_length
    for text in OTHERS:
        real_brain.memory.add(text, project="p")
    hits = real_brain.memory.search("how many times are failed stripe webhooks retried",
                                    top_k=5, rf=RecallFilter(project="p"))
    # Without pooling the fact is past the window: not first, or (the relevance floor, issue
    # 52: none of the leading hits holds it) nothing at all.
    first = bool(hits) and hits[0]["zk_id"] == long_id
    assert first is pool


def test_notes_carry_their_code_flag_through_updates(brain: Brain) -> None:
    note = brain.memory.add(PY, project="p").note
    assert brain.memory.get_payload(note["zk_id"])["is_code"] is True
    brain.memory.update(note["zk_id"], PROSE)
    assert brain.memory.get_payload(note["zk_id"])["is_code"] is False
    prose = brain.memory.add(PROSE, project="p").note
    assert brain.memory.get_payload(prose["zk_id"])["is_code"] is False


def test_code_share_counts_only_candidates_of_known_kind() -> None:
    from brain.search.fusion import Candidate, code_share

    cands = [Candidate("a", {"is_code": True}), Candidate("b", {"is_code": False}),
             Candidate("c", {}),  # a legacy note seen through a search leg: kind unknown
             Candidate("d", {"content": PY})]  # a legacy note with its content: looked at
    assert code_share(cands) == pytest.approx(2 / 3)
    assert code_share([Candidate("c", {})]) == 0.0


def test_legs_read_without_payloads_rank_as_legs_read_with_their_flags(brain: Brain) -> None:
    """The search legs read no payloads; the share of code among the candidates is counted
    through the is_code index. The ranking must be the one the flags read from every hit's
    payload gave: same candidates, same scores."""
    from brain.search.fusion import LEG_FIELDS, code_share, fuse_legs, hybrid, stored_code_share
    from brain.vector_store import Filter, Match

    for i, text in enumerate((PY, JS, GO, PROSE, CHAT)):
        brain.memory.add(text, project="p")
        brain.memory.add(f"{text}\n# variant {i}", project="p")
    store, policy = brain.memory.store, brain.memory.cfg.policy
    flt = Filter(must=(Match("project", "p"),))
    for query in ("how do I add two numbers", "which database did we pick for billing"):
        qvec, sv = brain.embedder.embed_query(query), brain.memory.bm25.query(query)
        kw = dict(method="dbsf", dense_weight=0.45, rrf_k=60, code_dense_weight=0.8,
                  lead_gap=policy.keyword_lead)
        got = hybrid(store, qvec, sv, flt, 10, candidates=50, **kw)  # type: ignore[arg-type]
        dense = store.query_dense(qvec, flt, 50, fields=LEG_FIELDS)
        sparse = store.query_sparse(sv, flt, 50, fields=LEG_FIELDS)
        cands = fuse_legs(dense, sparse, "dbsf", dense_weight=0.45, rrf_k=60,
                          code_dense_weight=0.8, lead_gap=policy.keyword_lead)
        share = code_share(cands)
        assert 0 < share < 1  # a mix, so the share moves the weight
        ids = list({h.id: None for h in (*dense, *sparse)})
        assert stored_code_share(store, ids) == pytest.approx(share)
        assert [(c.id, round(c.score, 9)) for c in got] == [
            (c.id, round(c.score, 9)) for c in cands[:10]]
