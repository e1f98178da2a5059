"""consolidate_clusters: stable proposals, a dry run that writes nothing, selected merges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brain.app import Brain
from brain.errors import InvalidArgument
from brain.memory import RecallFilter
from brain.vector_store import Filter, scroll_all
from tests.agentic.test_enrichment import make_llm_brain
from tests.fake_llm import FakeLLM

PORT = [
    "Qdrant listens on port 6333 inside the docker container. Publish it with -p 6333:6333.",
    "Qdrant listens on port 6333 inside the docker container. The REST API is on 6333.",
    "Qdrant listens on port 6333 inside the docker container.",
]
PYTEST = [
    "Run pytest with -x to stop at the first failing test in the suite.",
    "Run pytest with -x to stop at the first failing test in the suite, then fix it.",
]
OTHER = ["Cert-manager renews Let's Encrypt certificates thirty days before expiry."]


def _seed(brain: Brain) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, texts in (("port", PORT), ("pytest", PYTEST), ("other", OTHER)):
        out[name] = [brain.memory.add(t, "infra", tags=[name]).note["zk_id"] for t in texts]
        brain.clock.advance(minutes=1)  # type: ignore[attr-defined]
    return out


def _snapshot(brain: Brain) -> str:
    points = scroll_all(brain.store, Filter(), with_vectors=True)
    return json.dumps(
        sorted(((p.id, p.payload, p.dense) for p in points), key=lambda t: t[0]),
        sort_keys=True,
        default=str,
    )


def _cluster_of(result: dict[str, Any], zk_id: str) -> dict[str, Any]:
    return next(c for c in result["clusters"] if zk_id in {m["zk_id"] for m in c["members"]})


def test_dry_run_proposes_stable_clusters_and_writes_nothing(brain: Brain) -> None:
    seeded = _seed(brain)
    before, edges = _snapshot(brain), brain.graph.edges()
    first = brain.agentic.consolidate_clusters("infra", min_similarity=0.8)
    second = brain.agentic.consolidate_clusters("infra", min_similarity=0.8)
    assert _snapshot(brain) == before and brain.graph.edges() == edges
    assert first == second and first["dry_run"] is True
    port = _cluster_of(first, seeded["port"][0])
    assert {m["zk_id"] for m in port["members"]} == set(seeded["port"])
    # members join through chains of >= 0.8 pairs, so the weakest pair may sit a little lower
    assert port["cluster_id"].startswith("CL-") and port["min_similarity"] >= 0.7
    pyt = _cluster_of(first, seeded["pytest"][0])
    assert {m["zk_id"] for m in pyt["members"]} == set(seeded["pytest"])
    assert all(
        seeded["other"][0] not in {m["zk_id"] for m in c["members"]} for c in first["clusters"]
    )


def test_apply_merges_only_selected_and_archives_restorably(brain: Brain) -> None:
    seeded = _seed(brain)
    dry = brain.agentic.consolidate_clusters("infra", min_similarity=0.8)
    port_id = _cluster_of(dry, seeded["port"][0])["cluster_id"]
    out = brain.agentic.consolidate_clusters(
        "infra", dry_run=False, selected_cluster_ids=[port_id], min_similarity=0.8
    )
    assert out["count"] == 1 and out["applied"][0]["cluster_id"] == port_id
    merged = brain.memory.get_payload(out["applied"][0]["merged_note"])
    assert merged["memory_type"] == "permanent"
    assert merged["content"].count("Qdrant listens on port 6333") == 1  # deduplicated
    assert "Publish it with -p 6333:6333" in merged["content"]
    assert "The REST API is on 6333" in merged["content"]
    assert "port" in merged["tags"]
    assert {merged["link_types"][z] for z in seeded["port"]} == {"supersedes"}
    assert sorted(merged["merged_from"]) == sorted(seeded["port"])
    for zk in seeded["port"]:
        p = brain.memory.get_payload(zk)
        assert p["memory_type"] == "archived" and p["superseded_by"] == merged["zk_id"]
    for zk in seeded["pytest"] + seeded["other"]:
        assert brain.memory.get_payload(zk)["memory_type"] == "permanent"
    hits = brain.memory.search("Qdrant port 6333 docker", 10, RecallFilter(project="infra"))
    assert hits  # the merged note is found ...
    assert not {h["zk_id"] for h in hits} & set(seeded["port"])  # ... the archived ones are not
    restored = brain.memory.restore(seeded["port"][0])
    assert restored["memory_type"] == "permanent" and restored["restored_from"] == "archived"
    # The merged cluster is gone from the next dry run; the other one is still proposed.
    again = brain.agentic.consolidate_clusters("infra", min_similarity=0.8)
    assert port_id not in {c["cluster_id"] for c in again["clusters"]}


def test_bad_selection_changes_nothing(brain: Brain) -> None:
    _seed(brain)
    before = _snapshot(brain)
    with pytest.raises(InvalidArgument):
        brain.agentic.consolidate_clusters("infra", dry_run=False)
    with pytest.raises(InvalidArgument):
        brain.agentic.consolidate_clusters(
            "infra", dry_run=False, selected_cluster_ids=["CL-NOPE"], min_similarity=0.8
        )
    with pytest.raises(InvalidArgument):
        brain.agentic.consolidate_clusters("infra", min_similarity=1.5)
    assert _snapshot(brain) == before


def test_a_large_project_compares_its_newest_notes_and_says_how_many_it_left(
        brain: Brain, monkeypatch: pytest.MonkeyPatch) -> None:
    """Detection compares every pair, so it reads the newest MAX_SCAN notes only (found by
    counting, not reading, the older ones) and reports the rest."""
    from brain.agentic import consolidation

    monkeypatch.setattr(consolidation, "MAX_SCAN", 6)
    old = [brain.memory.add(t, "infra").note["zk_id"] for t in PYTEST]
    fillers = [*OTHER, "The staging database is restored from the nightly dump on Mondays.",
               "Frontend builds use pnpm workspaces; npm is not used anywhere."]
    new = []
    for text in PORT:
        brain.clock.advance(minutes=1)  # type: ignore[attr-defined]
        new.append(brain.memory.add(text, "infra").note["zk_id"])
    new += [brain.memory.add(t, "infra").note["zk_id"] for t in fillers]  # PORT[2]'s instant
    out = brain.agentic.consolidate_clusters("infra", min_similarity=0.8)
    assert out["older_not_scanned"] == 2
    proposed = {m["zk_id"] for c in out["clusters"] for m in c["members"]}
    assert set(new[:3]) <= proposed and not proposed & set(old)
    # four notes written in one instant, three to read: a time cut cannot split them, the
    # bound holds all the same
    monkeypatch.setattr(consolidation, "MAX_SCAN", 3)
    assert brain.agentic.consolidate_clusters("infra")["older_not_scanned"] == 5


def test_pinned_and_contextual_notes_are_not_counted_as_left_out(brain: Brain) -> None:
    """Pinned notes and session summaries are never proposed, but they are no older notes
    the detection skipped: a small project reports nothing left out."""
    _seed(brain)
    brain.memory.add(PORT[2] + " Pinned.", "infra", pinned=True)
    brain.memory.add("Session summary (infra): ports checked", "infra",
                     note_kind="session_summary")
    assert "older_not_scanned" not in brain.agentic.consolidate_clusters("infra")


def test_a_threshold_that_joins_everything_is_refused(
        brain: Brain, monkeypatch: pytest.MonkeyPatch) -> None:
    """Too low a threshold makes pairs of nearly every two notes (4,000 notes at 0.05 took
    11 s and 2 GB): past MAX_PAIRS it is a typed error naming the field, and nothing changes."""
    from brain.agentic import consolidation

    _seed(brain)
    assert "older_not_scanned" not in brain.agentic.consolidate_clusters("infra")  # all read
    before = _snapshot(brain)
    monkeypatch.setattr(consolidation, "MAX_PAIRS", 2)
    with pytest.raises(InvalidArgument) as err:
        brain.agentic.consolidate_clusters("infra", min_similarity=0.9,
                                           min_link_similarity=0.05)
    assert err.value.details["field"] == "min_link_similarity" and "raise it" in str(err.value)
    assert _snapshot(brain) == before


def test_pinned_notes_are_never_proposed(brain: Brain) -> None:
    a = brain.memory.add(PORT[2], "infra", pinned=True).note["zk_id"]
    brain.memory.add(PORT[2] + " Really.", "infra")
    out = brain.agentic.consolidate_clusters("infra", min_similarity=0.8)
    assert all(a not in {m["zk_id"] for m in c["members"]} for c in out["clusters"])


def test_hard_model_synthesises_the_merge(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    reply = json.dumps(
        {
            "content": "Qdrant serves REST on port 6333; publish it from docker.",
            "title": "Qdrant needs port 6333 published",
            "context": "Docker setups",
            "keywords": ["qdrant", "6333", "docker"],
            "tags": ["qdrant", "docker"],
        }
    )

    def respond(request: dict[str, Any]) -> str:
        prompt = request["messages"][-1]["content"]
        return reply if "Merge them into one note" in prompt else "not json"

    with FakeLLM(respond) as server:
        b = make_llm_brain(home, server.base_url, enrichment=False)
        try:
            ids = [b.memory.add(t, "infra").note["zk_id"] for t in PORT]
            dry = b.agentic.consolidate_clusters("infra", min_similarity=0.8)
            cid = _cluster_of(dry, ids[0])["cluster_id"]
            out = b.agentic.consolidate_clusters(
                "infra", dry_run=False, selected_cluster_ids=[cid], min_similarity=0.8
            )
            merged = b.memory.get_payload(out["applied"][0]["merged_note"])
            assert merged["title"] == "Qdrant needs port 6333 published"
            assert merged["content"].startswith("Qdrant serves REST")
            assert merged["enriched_by"] == "llm:Qwen/Qwen3-30B-A3B-Instruct-2507"
            assert any(
                r.body["model"] == "Qwen/Qwen3-30B-A3B-Instruct-2507" for r in server.requests
            )
        finally:
            b.close()


async def test_consolidate_tool_dry_run_then_apply(client: Any, brain: Brain) -> None:
    seeded = _seed(brain)
    dry = (
        await client.call_tool("consolidate_clusters", {"project": "infra", "min_similarity": 0.8})
    ).structured_content
    cid = _cluster_of(dry, seeded["pytest"][0])["cluster_id"]
    out = (
        await client.call_tool(
            "consolidate_clusters",
            {
                "project": "infra",
                "dry_run": False,
                "selected_cluster_ids": [cid],
                "min_similarity": 0.8,
            },
        )
    ).structured_content
    assert sorted(out["applied"][0]["archived"]) == sorted(seeded["pytest"])
