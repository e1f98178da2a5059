"""deep_search: multi-hop retrieval that follows links search alone cannot see."""

from __future__ import annotations

from typing import Any

import pytest

from brain.app import Brain
from brain.errors import InvalidArgument
from brain.memory import RecallFilter

QUERY = "why is the qdrant docker port unreachable"
DISTRACTORS = [
    f"Note {i}: the docker daemon restarted after upgrade number {i}, logs rotated"
    for i in range(8)
] + [f"Note q{i}: qdrant snapshot {i} was taken before the migration" for i in range(4)]


def _add(brain: Brain, content: str, project: str = "infra", **kw: Any) -> str:
    return brain.memory.add(content, project, autolink=False, **kw).note["zk_id"]


@pytest.fixture
def chain(brain: Brain) -> dict[str, str]:
    """A matches the query; B (no shared words) is linked from A; C is linked from B."""
    a = _add(
        brain,
        "Qdrant docker port 6333 unreachable: the container port was not "
        "published, why the client timed out",
    )
    b = _add(brain, "Kubernetes ingress needs the rewrite-target annotation for gRPC backends")
    c = _add(brain, "Cert-manager renews Let's Encrypt certificates thirty days early")
    for text in DISTRACTORS:
        _add(brain, text)
    brain.memory.link(a, b, "caused_by")
    brain.memory.link(b, c, "extends")
    return {"a": a, "b": b, "c": c}


def test_finds_a_note_only_reachable_through_a_link(brain: Brain, chain: dict[str, str]) -> None:
    rf = RecallFilter(project="infra")
    plain = brain.memory.search(QUERY, 5, rf, stamp=False)
    assert chain["a"] in [h["zk_id"] for h in plain]
    assert chain["b"] not in [h["zk_id"] for h in plain]  # search alone misses B

    out = brain.agentic.deep_search(QUERY, rf, hops=2, top_k=5)
    by_id = {h["zk_id"]: h for h in out["results"]}
    assert chain["b"] in by_id
    hit_a, hit_b = by_id[chain["a"]], by_id[chain["b"]]
    assert hit_a["hop"] == 0 and hit_a["found_by"] == "search" and hit_a["via"] is None
    assert hit_b["hop"] == 1 and hit_b["found_by"] == "link"
    assert hit_b["via"] == chain["a"] and hit_b["relation"] == "caused_by"
    assert hit_b["score"] < hit_a["score"]
    assert [h["score"] for h in out["results"]] == sorted(
        (h["score"] for h in out["results"]), reverse=True
    )


def test_two_hops_follow_a_chain(brain: Brain, chain: dict[str, str]) -> None:
    rf = RecallFilter(project="infra")
    one = brain.agentic.deep_search(QUERY, rf, hops=1, top_k=5)
    two = brain.agentic.deep_search(QUERY, rf, hops=2, top_k=5)
    assert chain["c"] not in {h["zk_id"] for h in one["results"]}
    hit_c = {h["zk_id"]: h for h in two["results"]}[chain["c"]]
    assert hit_c["hop"] == 2 and hit_c["via"] == chain["b"] and hit_c["relation"] == "extends"
    assert [h["hop"] for h in two["hops"]] == [0, 1, 2]
    assert QUERY in two["hops"][1]["query"] and two["hops"][1]["query"] != QUERY


def test_graph_expanded_notes_are_access_stamped(brain: Brain, chain: dict[str, str]) -> None:
    before = brain.memory.get_payload(chain["b"])["access_count"]
    brain.agentic.deep_search(QUERY, RecallFilter(project="infra"), hops=1, top_k=5)
    p = brain.memory.get_payload(chain["b"])
    assert p["access_count"] == before + 1 and p["last_accessed"]


def test_filters_apply_to_graph_neighbours(brain: Brain) -> None:
    a = _add(brain, "Qdrant docker port 6333 unreachable because it was not published")
    other = _add(brain, "Kubernetes ingress annotation rewrite-target", project="elsewhere")
    summary = _add(brain, "Session summary: ingress work", note_kind="session_summary")
    brain.memory.link(a, other, "related")
    brain.memory.link(a, summary, "related")
    out = brain.agentic.deep_search(QUERY, RecallFilter(project="infra"), hops=2, top_k=10)
    ids = {h["zk_id"] for h in out["results"]}
    assert a in ids and other not in ids and summary not in ids
    wider = brain.agentic.deep_search(
        QUERY, RecallFilter(project="infra", include_contextual=True), hops=2, top_k=10
    )
    assert summary in {h["zk_id"] for h in wider["results"]}


def test_bad_arguments_are_typed_errors(brain: Brain) -> None:
    with pytest.raises(InvalidArgument):
        brain.agentic.deep_search(QUERY, hops=9)
    with pytest.raises(InvalidArgument):
        brain.agentic.deep_search("  ")
    with pytest.raises(InvalidArgument):
        brain.agentic.deep_search(QUERY, top_k=0)


async def test_deep_search_tool(client: Any, brain: Brain) -> None:
    a = _add(brain, "Qdrant docker port 6333 unreachable because it was not published")
    b = _add(brain, "Kubernetes ingress annotation rewrite-target for gRPC")
    _add(brain, "Qdrant snapshots are taken nightly")
    brain.memory.link(a, b, "fixes")
    out = await client.call_tool("deep_search", {"query": QUERY, "project": "infra", "top_k": 2})
    data = out.structured_content
    hit_b = {h["zk_id"]: h for h in data["results"]}[b]
    assert hit_b["via"] == a and hit_b["relation"] == "fixes" and hit_b["hop"] == 1


def test_a_related_link_weighs_less_than_a_typed_one(brain: Brain) -> None:
    """'related' is what auto-linking writes from the vector similarity search already sees;
    a typed relation says something search cannot."""
    from brain.agentic.deep_search import _expand, _Found

    a = _add(brain, "Qdrant docker port 6333 unreachable because it was not published")
    typed = _add(brain, "Kubernetes ingress annotation rewrite-target for gRPC")
    similar = _add(brain, "Cert-manager renews Let's Encrypt certificates thirty days early")
    brain.memory.link(a, typed, "fixes")
    brain.memory.link(a, similar, "related")
    found = {a: _Found(brain.memory.get_payload(a), 0.8, 0)}
    flt = brain.memory.build_filter(RecallFilter(project="infra"))
    new = _expand(brain.memory, flt, found, [a], 1, top_k=10)
    cfg = brain.memory.cfg
    assert cfg.graph_decay > cfg.related_decay
    assert sorted(new) == sorted([typed, similar])
    assert found[typed].score == pytest.approx(0.8 * cfg.graph_decay)
    assert found[similar].score == pytest.approx(0.8 * cfg.related_decay)
    assert (found[typed].relation, found[similar].relation) == ("fixes", "related")


class _CountingEmbedder:
    """The brain's own embedder, counting query embeddings."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.queries = inner, 0

    def embed_query(self, text: str) -> Any:
        self.queries += 1
        return self.inner.embed_query(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_later_hops_cost_no_model_call(brain: Brain, chain: dict[str, str]) -> None:
    """Hop n's dense query is the query vector moved towards the previous hits' stored
    vectors (relevance feedback), not a new embedding of the query plus their titles."""
    counting = _CountingEmbedder(brain.memory.embedder)
    brain.memory.embedder = counting
    out = brain.agentic.deep_search(QUERY, RecallFilter(project="infra"), hops=2, top_k=5)
    assert [h["hop"] for h in out["hops"]] == [0, 1, 2]
    assert counting.queries == 1


def test_feedback_moves_the_query_towards_the_hits(brain: Brain) -> None:
    import numpy as np

    from brain.agentic.deep_search import _feedback
    from brain.notes import point_id

    ids = [_add(brain, f"the ingress controller rewrites path {i} for gRPC") for i in range(3)]
    qvec = brain.memory.embedder.embed_query(QUERY)
    pts = brain.memory.store.retrieve([point_id(z) for z in ids], with_vectors=True)
    centre = np.mean([p.dense for p in pts], axis=0)
    moved = _feedback(brain.memory, qvec, [point_id(z) for z in ids])
    assert np.linalg.norm(moved) == pytest.approx(1.0, abs=1e-5)
    assert float(moved @ centre) > float(qvec @ centre)
    assert _feedback(brain.memory, qvec, []) is qvec


def test_a_hub_adds_only_its_best_neighbours(brain: Brain) -> None:
    """A note with many links offers only as many new notes as the results can hold, the
    best-scored first (a typed link before a 'related' one)."""
    from brain.agentic.deep_search import _expand, _Found

    hub = _add(brain, "Qdrant docker port 6333 unreachable because it was not published")
    related = [_add(brain, f"Unrelated note number {i} about lunch") for i in range(12)]
    typed = [_add(brain, f"Ingress fix {i} for the gRPC backend") for i in range(3)]
    for z in related:
        brain.memory.link(hub, z, "related")
    for z in typed:
        brain.memory.link(hub, z, "fixes")
    found = {hub: _Found(brain.memory.get_payload(hub), 1.0, 0)}
    flt = brain.memory.build_filter(RecallFilter(project="infra"))
    new = _expand(brain.memory, flt, found, [hub], 1, top_k=5)
    assert len(new) == 5 and set(typed) <= set(new)
    assert set(found) == {hub, *new}
