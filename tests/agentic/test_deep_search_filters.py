"""deep_search takes the recall filter of search_memory: one ``filters`` object, the same
schema, results and errors. Both tools build their RecallFilter with
mcp_surface.recall.recall_filter. Calls in the earlier flat shape still work (profiles.py)."""

from __future__ import annotations

import inspect
from typing import Any, get_args

import pytest
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.notes import NOTE_KINDS
from mcp_surface.recall import FLAT_FILTER_ARGS, NoteKind, RecallFilters, recall_filter

Q = "redis cache eviction policy"


async def ids(client: Any, tool: str, **args: Any) -> list[str]:
    res = (await client.call_tool(tool, {"query": Q, "top_k": 50, **args})).data
    return sorted(h["zk_id"] for h in res["results"])


async def both(client: Any, **args: Any) -> list[str]:
    """The ids both tools return for ``args``; fails when the tools disagree."""
    found = await ids(client, "search_memory", **args)
    deep = await ids(client, "deep_search", **args)
    assert deep == found, args
    return found


@pytest.fixture
def notes(brain: Brain) -> dict[str, str]:
    m = brain.memory
    out = {
        "decision": m.add(
            "redis cache eviction policy is allkeys-lru", "shop", note_kind="decision",
            autolink=False,
        ).note["zk_id"],
        "mistake": m.add(
            "redis cache eviction policy noeviction caused OOM errors", "shop",
            note_kind="mistake", autolink=False,
        ).note["zk_id"],
        "other_project": m.add(
            "redis cache eviction policy in the api", "api", note_kind="decision", autolink=False
        ).note["zk_id"],
        "old_model": m.add(
            "redis cache eviction policy embedded by another model", "shop", autolink=False
        ).note["zk_id"],
    }
    m.set_state(out["old_model"], embed_model="other/model")
    m.set_state(out["mistake"], failure_signature="redis:oom")
    return out


async def test_both_tools_publish_the_same_filter_object(client: Any) -> None:
    tools = {t.name: t.inputSchema["properties"] for t in await client.list_tools()}
    search, deep = tools["search_memory"], tools["deep_search"]
    assert search["filters"] == deep["filters"]  # one schema, listed once per tool
    fields = set(search["filters"]["properties"])
    assert fields == set(RecallFilters.model_fields)
    assert {"all_projects", "fingerprint_match", "custom", "note_kind"} <= fields
    # no filter field is also a top-level argument of either tool
    assert not (set(FLAT_FILTER_ARGS) | fields) & (set(search) | set(deep)) - {"filters"}
    params = inspect.signature(recall_filter).parameters
    assert tuple(params) == ("project", "filters")
    assert set(get_args(NoteKind)) == set(NOTE_KINDS)


async def test_the_flat_filter_arguments_of_earlier_releases_still_work(
    client: Any, notes: dict[str, str]
) -> None:
    n = notes
    flat = await both(client, project="shop", custom_filters=[
        {"key": "failure_signature", "value": "redis:oom"}])
    assert flat == [n["mistake"]]
    assert await both(client, all_projects=True) == await both(
        client, filters={"all_projects": True})
    with pytest.raises(ToolError, match=r"^\[INVALID_ARGUMENT\] all_projects is given both"):
        await client.call_tool("search_memory", {
            "query": Q, "all_projects": True, "filters": {"all_projects": False}})


async def test_all_projects(client: Any, notes: dict[str, str]) -> None:
    n = notes
    shop = await both(client, project="shop")
    assert shop == sorted([n["decision"], n["mistake"]])
    everywhere = await both(client, filters={"all_projects": True})
    assert n["other_project"] in everywhere and set(shop) <= set(everywhere)
    # all_projects wins over a project, as in search_memory.
    assert await both(client, project="shop", filters={"all_projects": True}) == everywhere


async def test_fingerprint_match(client: Any, notes: dict[str, str]) -> None:
    n = notes
    assert n["old_model"] not in await both(client, project="shop")
    loose = await both(client, project="shop", filters={"fingerprint_match": False})
    assert loose == sorted([n["decision"], n["mistake"], n["old_model"]])


async def test_custom_filters(client: Any, notes: dict[str, str]) -> None:
    n = notes
    sig = [{"key": "failure_signature", "value": "redis:oom"}]
    assert await both(client, project="shop", filters={"custom": sig}) == [n["mistake"]]
    kinds = [{"key": "note_kind", "any": ["decision"]}]
    assert await both(client, filters={"all_projects": True, "custom": kinds}) == sorted(
        [n["decision"], n["other_project"]]
    )
    assert await both(client, project="shop", filters={"custom": sig + kinds}) == []


async def test_custom_filters_exclude_with_not_and_none_of(
    brain: Brain, client: Any, notes: dict[str, str]
) -> None:
    n = notes
    no_mistakes = [{"key": "note_kind", "none_of": ["mistake"]}]
    assert await both(client, project="shop", filters={"custom": no_mistakes}) == [n["decision"]]
    not_sig = [{"key": "failure_signature", "value": "redis:oom", "not": True}]
    assert await both(client, project="shop", filters={"custom": not_sig}) == [n["decision"]]
    not_any = [{"key": "note_kind", "any": ["decision", "mistake"], "not": True}]
    assert await both(client, project="shop", filters={"custom": not_any}) == []
    # a tag excluded at read time; notes without the tag stay
    draft = brain.memory.add("redis cache eviction policy draft idea", "shop", tags=["draft"],
                             autolink=False).note["zk_id"]
    assert draft in await both(client, project="shop")
    no_draft = [{"key": "tags", "none_of": ["draft"]}]
    assert await both(client, project="shop", filters={"custom": no_draft}) == sorted(
        [n["decision"], n["mistake"]])
    # an exclusion only narrows: combined with an inclusion, both hold
    assert await both(client, project="shop",
                      filters={"custom": no_draft + [{"key": "note_kind", "value": "mistake"}]}
                      ) == [n["mistake"]]


async def test_filters_apply_to_linked_notes(
    brain: Brain, client: Any, notes: dict[str, str]
) -> None:
    """A note deep_search reaches only through a link passes the same filters."""
    n = notes
    far = brain.memory.add(
        "kubernetes ingress rewrite-target annotation", "api", autolink=False
    ).note["zk_id"]
    brain.memory.link(n["mistake"], far, "related")
    brain.memory.link(n["old_model"], far, "related")

    async def deep(**args: Any) -> set[str]:
        res = await client.call_tool("deep_search", {"query": Q, "hops": 2, **args})
        return {h["zk_id"] for h in res.data["results"]}

    assert far not in await deep(project="shop")
    everywhere = {"all_projects": True}
    assert far in await deep(filters=everywhere)
    sig = [{"key": "failure_signature", "value": "redis:oom"}]
    assert await deep(filters={**everywhere, "custom": sig}) == {n["mistake"]}
    assert n["old_model"] not in await deep(filters=everywhere)
    assert n["old_model"] in await deep(filters={**everywhere, "fingerprint_match": False})


@pytest.mark.parametrize(
    "bad",
    [
        {"custom": [{"key": "kind", "value": "file"}]},
        {"custom": [{"key": "user_id", "value": "someone"}]},
        {"custom": [{"nokey": 1}]},
        {"custom": [{"key": "x"}]},
        {"custom": [{"key": "salience", "gte": "high"}]},
        {"custom": [{"key": "project", "any": "api"}]},
        {"custom": [{"key": "tags", "none_of": []}]},
        {"custom": [{"key": "tags", "none_of": ["a"], "value": "b"}]},
        {"custom": [{"key": "tags", "value": "a", "not": "yes"}]},
        {"max_age_days": 0},
    ],
)
async def test_bad_filters_are_the_same_typed_error(
    client: Any, notes: dict[str, str], bad: dict[str, Any]
) -> None:
    messages = []
    for tool in ("search_memory", "deep_search"):
        with pytest.raises(ToolError, match=r"^\[INVALID_ARGUMENT\] ") as exc:
            await client.call_tool(tool, {"query": Q, "filters": bad})
        messages.append(str(exc.value))
    assert messages[0] == messages[1]


async def test_bad_note_kind_is_rejected_by_both(client: Any) -> None:
    for tool in ("search_memory", "deep_search"):
        with pytest.raises(ToolError, match="note_kind"):
            await client.call_tool(tool, {"query": Q, "filters": {"note_kind": ["bogus"]}})
