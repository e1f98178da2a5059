"""Recall filters end to end through search_memory: each filter alone, then AND-combined."""

from __future__ import annotations

import pytest
from fastmcp.exceptions import ToolError

from brain.app import Brain

Q = "redis cache eviction policy"


async def ids(client, **args) -> list[str]:  # noqa: ANN001
    res = (await client.call_tool("search_memory", {"query": Q, "top_k": 50, **args})).data
    return sorted(h["zk_id"] for h in res["results"])


@pytest.fixture
def notes(brain: Brain) -> dict[str, str]:
    brain.workers.stop()  # the moved clock must not let the salience worker run
    m = brain.memory
    out = {
        "old_decision": m.add(
            "redis cache eviction policy is allkeys-lru",
            "shop",
            note_kind="decision",
            tags=["redis", "prod"],
        ).note["zk_id"],
    }
    brain.clock.advance(days=10)
    out["mistake"] = m.add(
        "redis cache eviction policy noeviction caused OOM errors",
        "shop",
        note_kind="mistake",
        tags=["redis"],
    ).note["zk_id"]
    out["fleeting"] = m.add(
        "redis cache eviction policy idea: volatile-ttl",
        "shop",
        memory_type="fleeting",
        tags=["redis", "prod"],
    ).note["zk_id"]
    out["other_project"] = m.add(
        "redis cache eviction policy in the api", "api", note_kind="decision"
    ).note["zk_id"]
    out["old_model"] = m.add("redis cache eviction policy embedded by another model", "shop").note[
        "zk_id"
    ]
    out["context"] = m.add(
        "redis cache eviction policy project overview", "shop", note_kind="project_context"
    ).note["zk_id"]
    m.set_state(out["old_model"], embed_model="other/model")
    m.set_state(out["mistake"], salience=0.9, failure_signature="redis:oom")
    m.set_state(out["old_decision"], salience=0.2)
    return out


async def test_each_filter_alone(brain: Brain, client, notes) -> None:  # noqa: ANN001
    n = notes
    default = await ids(client, project="shop")
    assert default == sorted([n["old_decision"], n["mistake"]])  # no fleeting/context/old model
    assert await ids(client, project="shop", note_kind=["decision"]) == [n["old_decision"]]
    assert n["context"] in await ids(client, project="shop", note_kind=["project_context"])
    assert n["context"] in await ids(client, project="shop", include_contextual=True)
    assert n["fleeting"] in await ids(client, project="shop", include_fleeting=True)
    both = await ids(client, project="shop", include_fleeting=True, tags=["redis", "prod"])
    assert both == sorted([n["old_decision"], n["fleeting"]])  # all tags, not any
    assert await ids(client, project="shop", max_age_days=5) == [n["mistake"]]
    # Every search stamps its hits (salience +0.05), so salience is set right before use.
    brain.memory.set_state(n["mistake"], salience=0.9)
    brain.memory.set_state(n["old_decision"], salience=0.2)
    assert await ids(client, project="shop", min_salience=0.5) == [n["mistake"]]
    assert n["old_model"] in await ids(client, project="shop", fingerprint_match=False)
    assert await ids(
        client, project="shop", custom_filters=[{"key": "failure_signature", "value": "redis:oom"}]
    ) == [n["mistake"]]
    brain.memory.set_state(n["old_decision"], salience=0.2)
    assert await ids(client, project="shop", custom_filters=[{"key": "salience", "lte": 0.3}]) == [
        n["old_decision"]
    ]
    assert await ids(client, all_projects=True,
                     custom_filters=[{"key": "project", "any": ["api"]}]) == [
        n["other_project"]
    ]
    assert await ids(client, project="shop", confidence_min=1.0) == []  # 1.01: out of range
    exact = "redis cache eviction policy is allkeys-lru"
    everything = (
        await client.call_tool("search_memory", {"query": exact, "project": "shop",
                                                 "detail": "full", "top_k": 5})
    ).data["results"]
    sims = sorted((h["similarity"] for h in everything), reverse=True)
    assert everything[0]["zk_id"] == n["old_decision"] and sims[0] > sims[1]
    floor = (sims[0] + sims[1]) / 2
    strong = (
        await client.call_tool(
            "search_memory", {"query": exact, "project": "shop", "confidence_min": floor,
                              "top_k": 5}
        )
    ).data["results"]
    assert [h["zk_id"] for h in strong] == [n["old_decision"]]


async def test_filters_and_combine(brain: Brain, client, notes) -> None:  # noqa: ANN001
    n = notes
    brain.memory.set_state(n["fleeting"], salience=0.5)
    got = await ids(
        client,
        project="shop",
        include_fleeting=True,
        tags=["redis"],
        max_age_days=5,
        min_salience=0.4,
    )
    assert got == sorted([n["mistake"], n["fleeting"]])
    got = await ids(
        client,
        project="shop",
        include_fleeting=True,
        tags=["redis"],
        max_age_days=5,
        min_salience=0.4,
        note_kind=["mistake"],
        custom_filters=[{"key": "failure_signature", "value": "redis:oom"}],
    )
    assert got == [n["mistake"]]
    assert await ids(client, project="shop", note_kind=["decision"], max_age_days=5) == []


async def test_bad_filters_are_typed_errors(brain: Brain, client, notes) -> None:  # noqa: ANN001
    for bad in (
        {"max_age_days": 0},
        {"custom_filters": [{"key": "kind", "value": "file"}]},
        {"custom_filters": [{"nokey": 1}]},
        {"custom_filters": [{"key": "x"}]},
    ):
        with pytest.raises(ToolError, match="INVALID_ARGUMENT"):
            await client.call_tool("search_memory", {"query": Q, **bad})
    with pytest.raises(ToolError):
        await client.call_tool("search_memory", {"query": Q, "note_kind": ["bogus"]})
