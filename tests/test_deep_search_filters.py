"""deep_search takes the recall filters of search_memory: same arguments, same results, same
errors. Both tools build their RecallFilter with mcp_surface.recall.recall_filter."""

from __future__ import annotations

import inspect
from typing import Any, get_args

import pytest
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.notes import NOTE_KINDS
from mcp_surface.recall import FILTER_ARGS, NoteKind, recall_filter

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


async def test_both_tools_publish_the_same_filter_arguments(client: Any) -> None:
    tools = {t.name: t.inputSchema["properties"] for t in await client.list_tools()}
    search, deep = tools["search_memory"], tools["deep_search"]
    for name in FILTER_ARGS:
        assert name in search and name in deep, name
        assert deep[name] == search[name], name  # type, default and description
    assert {"all_projects", "fingerprint_match", "custom_filters"} <= set(deep)
    # recall_filter takes exactly the filter arguments, each by keyword, none defaulted.
    params = inspect.signature(recall_filter).parameters
    assert tuple(params) == FILTER_ARGS
    assert all(
        p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params.values()
    )
    assert set(get_args(NoteKind)) == set(NOTE_KINDS)


async def test_all_projects(client: Any, notes: dict[str, str]) -> None:
    n = notes
    shop = await both(client, project="shop")
    assert shop == sorted([n["decision"], n["mistake"]])
    everywhere = await both(client, all_projects=True)
    assert n["other_project"] in everywhere and set(shop) <= set(everywhere)
    # all_projects wins over a project, as in search_memory.
    assert await both(client, project="shop", all_projects=True) == everywhere


async def test_fingerprint_match(client: Any, notes: dict[str, str]) -> None:
    n = notes
    assert n["old_model"] not in await both(client, project="shop")
    loose = await both(client, project="shop", fingerprint_match=False)
    assert loose == sorted([n["decision"], n["mistake"], n["old_model"]])


async def test_custom_filters(client: Any, notes: dict[str, str]) -> None:
    n = notes
    sig = [{"key": "failure_signature", "value": "redis:oom"}]
    assert await both(client, project="shop", custom_filters=sig) == [n["mistake"]]
    kinds = [{"key": "note_kind", "any": ["decision"]}]
    assert await both(client, all_projects=True, custom_filters=kinds) == sorted(
        [n["decision"], n["other_project"]]
    )
    assert await both(client, project="shop", custom_filters=sig + kinds) == []


async def test_custom_filters_exclude_with_not_and_none_of(
    brain: Brain, client: Any, notes: dict[str, str]
) -> None:
    n = notes
    no_mistakes = [{"key": "note_kind", "none_of": ["mistake"]}]
    assert await both(client, project="shop", custom_filters=no_mistakes) == [n["decision"]]
    not_sig = [{"key": "failure_signature", "value": "redis:oom", "not": True}]
    assert await both(client, project="shop", custom_filters=not_sig) == [n["decision"]]
    not_any = [{"key": "note_kind", "any": ["decision", "mistake"], "not": True}]
    assert await both(client, project="shop", custom_filters=not_any) == []
    # a tag excluded at read time; notes without the tag stay
    draft = brain.memory.add("redis cache eviction policy draft idea", "shop", tags=["draft"],
                             autolink=False).note["zk_id"]
    assert draft in await both(client, project="shop")
    no_draft = [{"key": "tags", "none_of": ["draft"]}]
    assert await both(client, project="shop", custom_filters=no_draft) == sorted(
        [n["decision"], n["mistake"]])
    # an exclusion only narrows: combined with an inclusion, both hold
    assert await both(client, project="shop",
                      custom_filters=no_draft + [{"key": "note_kind", "value": "mistake"}]
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
    assert far in await deep(all_projects=True)
    sig = [{"key": "failure_signature", "value": "redis:oom"}]
    assert await deep(all_projects=True, custom_filters=sig) == {n["mistake"]}
    assert n["old_model"] not in await deep(all_projects=True)
    assert n["old_model"] in await deep(all_projects=True, fingerprint_match=False)


@pytest.mark.parametrize(
    "bad",
    [
        {"custom_filters": [{"key": "kind", "value": "file"}]},
        {"custom_filters": [{"key": "user_id", "value": "someone"}]},
        {"custom_filters": [{"nokey": 1}]},
        {"custom_filters": [{"key": "x"}]},
        {"custom_filters": [{"key": "salience", "gte": "high"}]},
        {"custom_filters": [{"key": "project", "any": "api"}]},
        {"custom_filters": [{"key": "tags", "none_of": []}]},
        {"custom_filters": [{"key": "tags", "none_of": ["a"], "value": "b"}]},
        {"custom_filters": [{"key": "tags", "value": "a", "not": "yes"}]},
        {"max_age_days": 0},
    ],
)
async def test_bad_filters_are_the_same_typed_error(
    client: Any, notes: dict[str, str], bad: dict[str, Any]
) -> None:
    messages = []
    for tool in ("search_memory", "deep_search"):
        with pytest.raises(ToolError, match=r"^\[INVALID_ARGUMENT\] ") as exc:
            await client.call_tool(tool, {"query": Q, **bad})
        messages.append(str(exc.value))
    assert messages[0] == messages[1]


async def test_bad_note_kind_is_rejected_by_both(client: Any) -> None:
    for tool in ("search_memory", "deep_search"):
        with pytest.raises(ToolError, match="note_kind"):
            await client.call_tool(tool, {"query": Q, "note_kind": ["bogus"]})
