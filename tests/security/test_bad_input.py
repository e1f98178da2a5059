"""Bad input (issue 13): every nonsense value gets a typed error and changes nothing.

Each case goes through the in-process MCP client, so the schema caps and the services'
own checks are both on the path a real agent takes.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fastmcp.exceptions import ToolError

from brain.errors import InvalidArgument

TYPED = ("[INVALID_ARGUMENT]", "[CONTENT_TOO_LARGE]")


async def snapshot(client: Any) -> dict[str, Any]:
    stats = (await client.call_tool("brain_stats", {})).structured_content
    sources = (await client.call_tool("list_sources", {})).structured_content
    files = (await client.call_tool("list_files", {})).structured_content
    inbox = (await client.call_tool("get_inbox", {"project": "p"})).structured_content
    return {
        "stats": stats,
        "sources": [
            {k: s.get(k) for k in ("name", "exclude", "include", "project", "trigger")}
            for s in sources["sources"]
        ],
        "files": files["count"],
        "inbox": inbox,
    }


def _non_finite(args: dict[str, Any]) -> bool:
    text = repr(args)
    return "nan" in text or "inf" in text


@pytest.fixture
def client(client: Any, brain: Any) -> Any:
    """The MCP client, plus a server object on the same brain for raw calls (below)."""
    from mcp_server import create_server

    client.raw_server = create_server(profile="full", brain=brain)
    return client


def _project(root: Path) -> Path:
    folder = root / "proj"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("def main():\n    return 'hello'\n")
    return folder


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(
    tmp_path_factory: pytest.TempPathFactory, _empty_shard: Path
) -> AsyncIterator[Any]:
    """One brain for the cases that refuse without changing anything: a note, and a synced
    source 'p'. Each case compares the brain before and after its own call, so sharing
    the brain loses no check and saves opening one per case (a third of a second each)."""
    from fastmcp import Client

    from brain.app import Brain
    from brain.clock import ManualClock
    from config import load_settings
    from mcp_server import create_server
    from tests.conftest import _seed_store, hash_embedder

    root = tmp_path_factory.mktemp("bad_input")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRAIN__PATHS__ALLOWED_ROOTS", json.dumps([str(root)]))
        mp.setenv("BRAIN__SOURCES__WORKSPACE", "off")
        settings = load_settings(home=root / "home")
    settings.embedding.model = "offline/hash-384"
    _seed_store(settings, _empty_shard)
    brain = Brain(settings, embedder=hash_embedder(), clock=ManualClock()).open()
    try:
        async with Client(create_server(profile="full", brain=brain)) as client:
            client.raw_server = create_server(profile="full", brain=brain)
            await client.call_tool("add_memory", {"content": "the deploy script needs bash 5"})
            await add_source(client, _project(root))
            yield client
    finally:
        brain.close()


SHARED = pytest.mark.asyncio(loop_scope="module")


async def assert_refused(client: Any, tool: str, args: dict[str, Any], code: str = "") -> str:
    """Refused with a typed error, nothing changed. NaN and infinity cannot travel through
    the in-process client (it serialises them as null), but a raw JSON-RPC request can carry
    them; those calls go to the server object itself, middleware and validation included."""
    before = await snapshot(client)
    with pytest.raises(ToolError) as err:
        if _non_finite(args):
            await client.raw_server.call_tool(tool, args)
        else:
            await client.call_tool(tool, args)
    message = str(err.value)
    assert message.startswith(TYPED), message
    if code:
        assert message.startswith(f"[{code}]"), message
    assert await snapshot(client) == before
    return message


NAN, INF = math.nan, math.inf

RECALL_CASES = [
    {"max_age_days": 1e308},
    {"max_age_days": -1},
    {"max_age_days": 0},
    {"max_age_days": INF},
    {"confidence_min": 5},
    {"confidence_min": -5},
    {"confidence_min": NAN},
    {"min_salience": NAN},
    {"min_salience": INF},
    {"custom_filters": [{"key": ""}]},
    {"custom_filters": [{"key": "", "value": 1}]},
    {"custom_filters": [{"key": "a..b", "value": 1}]},
    {"custom_filters": [{"key": {"a": 1}, "value": 1}]},
    {"custom_filters": [{"key": ["a"], "value": 1}]},
    {"custom_filters": [{"key": "a", "value": {"b": 1}}]},
    {"custom_filters": [{"key": "a", "value": [1, 2]}]},
    {"custom_filters": [{"key": "a", "value": 2**70}]},
    {"custom_filters": [{"key": "a", "any": [{"b": 1}]}]},
    {"custom_filters": [{"key": "a", "any": list(range(10_000))}]},
    {"custom_filters": [{"key": "a", "gte": NAN}]},
    {"custom_filters": [{"key": "a", "lt": INF}]},
    {"custom_filters": [{"key": "a", "value": 1, "extra": 2}]},
    {"custom_filters": [{"key": "a", "value": 1}] * 1000},
    {"tags": ["t" * 100_000]},
    {"tags": [f"t{i}" for i in range(10_000)]},
    {"project": "p" * 1000},
]


@SHARED
@pytest.mark.parametrize("tool", ["search_memory", "deep_search"])
@pytest.mark.parametrize("extra", RECALL_CASES, ids=[str(i) for i in range(len(RECALL_CASES))])
async def test_recall_filters_are_validated(shared: Any, tool: str, extra: dict) -> None:
    await assert_refused(shared, tool, {"query": "deploy", **extra})


@SHARED
@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("add_memory", {"content": "\x00"}, "INVALID_ARGUMENT"),
        ("add_memory", {"content": "\x00\x00\x00 \x00"}, "INVALID_ARGUMENT"),
        ("add_memory", {"content": " \n\t\r "}, "INVALID_ARGUMENT"),
        ("add_memory", {"content": "\u200b\u200b"}, "INVALID_ARGUMENT"),
        ("add_memory", {"content": "ok", "context": "\x00\x00"}, "INVALID_ARGUMENT"),
        ("add_memory", {"content": "ok", "tags": [""]}, "INVALID_ARGUMENT"),
        ("add_memory", {"content": "ok", "tags": ["  "]}, "INVALID_ARGUMENT"),
        ("add_memory", {"content": "ok", "tags": ["x" * 65]}, "CONTENT_TOO_LARGE"),
        ("add_memory", {"content": "ok", "tags": [f"t{i}" for i in range(33)]}, ""),
        ("add_memory", {"content": "ok", "project": "p" * 129}, "CONTENT_TOO_LARGE"),
        ("add_memory", {"content": "x" * 60_000}, "CONTENT_TOO_LARGE"),
        ("add_memory", {"content": "ok", "context": "c" * 2_000_000}, "CONTENT_TOO_LARGE"),
        ("search_memory", {"query": "q" * 20_000}, "CONTENT_TOO_LARGE"),
        ("search_memory", {"query": "\x00"}, "INVALID_ARGUMENT"),
        ("search_memory", {"query": "x", "top_k": 1000}, "INVALID_ARGUMENT"),
        ("search_memory", {"query": "x", "files_threshold": NAN}, "INVALID_ARGUMENT"),
        ("record_failure", {"content": "\x00", "project": "p", "failure_signature": "s"}, ""),
        ("record_failure", {"content": "boom", "project": "p", "failure_signature": "\x00"}, ""),
        ("close_session", {"project": "p", "objective": "\x00"}, "INVALID_ARGUMENT"),
        ("close_session", {"project": "p", "objective": "o", "completed": ["x"] * 10_000}, ""),
        ("close_session", {"project": "p", "objective": "o", "blockers": ["b" * 100_000]}, ""),
        (
            "close_session",
            {"project": "p", "objective": "o", "transcript_excerpt": "t" * 8_001},
            "CONTENT_TOO_LARGE",
        ),
        ("preflight_check", {"task": "t" * 100_000}, "CONTENT_TOO_LARGE"),
        ("search_files", {"query": "x", "threshold": NAN}, "INVALID_ARGUMENT"),
        ("search_files", {"query": "x", "threshold": 7}, "INVALID_ARGUMENT"),
        ("search_files", {"query": "x", "limit": 0}, "INVALID_ARGUMENT"),
        ("search_files", {"query": "x", "file_name": "f" * 100_000}, "CONTENT_TOO_LARGE"),
        ("ingest_file", {"path": "p" * 100_000}, "CONTENT_TOO_LARGE"),
        ("consolidate_clusters", {"project": "p", "min_similarity": NAN}, "INVALID_ARGUMENT"),
        ("get_related", {"zk_id": "Z" * 100_000}, "CONTENT_TOO_LARGE"),
        ("update_memory", {"zk_id": "ZK-00000000", "new_content": "\x00"}, "INVALID_ARGUMENT"),
    ],
)
async def test_bad_arguments_get_typed_errors(
    shared: Any, tool: str, args: dict[str, Any], code: str
) -> None:
    await assert_refused(shared, tool, args, code)


async def test_update_memory_refuses_nul_only_content(client: Any) -> None:
    note = (await client.call_tool("add_memory", {"content": "keep me"})).structured_content
    zk = note["note"]["zk_id"]
    await assert_refused(client, "update_memory", {"zk_id": zk, "new_content": "\x00\x00"})
    got = (await client.call_tool("get_note", {"zk_id": zk})).structured_content
    assert got["note"]["content"] == "keep me"


# ---------------------------------------------------------------- sources and patterns


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return _project(tmp_path)


BAD_GLOBS = ["[z-a]", "a\\", "!", "x" * 10_000]


async def add_source(client: Any, folder: Path) -> None:
    """Add the folder as source 'p' and wait for its first sync, so that nothing is still
    changing when a test compares the brain before and after a refused call."""
    await client.call_tool("add_source", {"path": str(folder), "name": "p", "trigger": "manual"})
    await client.call_tool("sync_source", {"source": "p", "wait": True})


@pytest.mark.parametrize("pattern", BAD_GLOBS)
async def test_add_source_refuses_bad_exclude_patterns(
    client: Any, folder: Path, pattern: str
) -> None:
    args = {"path": str(folder), "name": "p", "trigger": "manual", "exclude": [pattern]}
    await assert_refused(client, "add_source", args)
    args = {"path": str(folder), "name": "p", "trigger": "manual", "include": [pattern]}
    await assert_refused(client, "add_source", args)


async def test_add_source_refuses_too_many_patterns(client: Any, folder: Path) -> None:
    args = {"path": str(folder), "trigger": "manual", "exclude": [f"d{i}/" for i in range(5000)]}
    await assert_refused(client, "add_source", args)


@SHARED
@pytest.mark.parametrize("pattern", BAD_GLOBS)
async def test_update_source_refuses_bad_exclude_patterns(shared: Any, pattern: str) -> None:
    await assert_refused(shared, "update_source", {"source": "p", "exclude": [pattern]})
    await assert_refused(shared, "update_source", {"source": "p", "include": [pattern]})


@SHARED
@pytest.mark.parametrize("pattern", BAD_GLOBS)
@pytest.mark.parametrize("mode", ["filter", "semantic", "grep"])
async def test_fs_search_refuses_bad_path_glob(shared: Any, pattern: str, mode: str) -> None:
    args = {"query": "main", "search_mode": mode, "path_glob": pattern}
    await assert_refused(shared, "fs_search", args)


@SHARED
@pytest.mark.parametrize("pattern", ["(", "a{2,1}", "[z-a]", "(?P<x>a)(?P<x>b)"])
async def test_grep_refuses_bad_regex(shared: Any, pattern: str) -> None:
    await assert_refused(shared, "fs_search", {"query": pattern, "search_mode": "grep"})


@SHARED
@pytest.mark.parametrize(
    "args",
    [
        {"query": "x", "category": ["code"] * 10_000},
        {"query": "x", "tags": ["t" * 100_000]},
        {"query": "x", "created_after": "2020" * 10_000},
        {"query": "x", "created_after": "not a date"},
        {"query": "x", "folder": "f" * 100_000},
        {"query": "q" * 100_000},
    ],
)
async def test_fs_search_bounds_every_argument(shared: Any, args: dict) -> None:
    await assert_refused(shared, "fs_search", args)


def test_services_refuse_bad_patterns_for_non_mcp_callers(brain: Any, folder: Path) -> None:
    with pytest.raises(InvalidArgument):
        brain.sources.add(str(folder), exclude=["[z-a]"], trigger="manual")
    assert brain.sources.list() == []
    brain.sources.add(str(folder), name="p", trigger="manual", sync=False)
    with pytest.raises(InvalidArgument):
        brain.sources.update("p", exclude=["a\\"])
    assert brain.sources.list()[0]["exclude"] == []
    with pytest.raises(InvalidArgument):
        brain.sources.search("", "filter", path_glob="[z-a]")


def test_recall_filter_is_validated_for_non_mcp_callers(brain: Any) -> None:
    from brain.memory import RecallFilter

    for rf in (
        RecallFilter(max_age_days=1e308),
        RecallFilter(confidence_min=math.nan),
        RecallFilter(confidence_min=5.0),
        RecallFilter(min_salience=math.inf),
        RecallFilter(custom=({"key": ""},)),
        RecallFilter(custom=({"key": {"a": 1}, "value": 1},)),
        RecallFilter(tags=("t" * 1000,)),
    ):
        with pytest.raises(InvalidArgument):
            brain.memory.search("anything", 5, rf)


# ---------------------------------------------------------------- schemas


def _walk(schema: dict[str, Any], defs: dict[str, Any], path: str) -> list[str]:
    """Paths of unbounded strings, arrays, objects and numbers in a JSON schema."""
    if "$ref" in schema:
        return _walk(defs[schema["$ref"].split("/")[-1]], defs, path)
    missing: list[str] = []
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key, [])):
            missing += _walk(sub, defs, f"{path}|{i}")
    kind = schema.get("type")
    if kind == "string" and "enum" not in schema and "maxLength" not in schema:
        missing.append(f"{path}: string without maxLength")
    if kind == "array":
        if "maxItems" not in schema:
            missing.append(f"{path}: array without maxItems")
        missing += _walk(schema.get("items", {}), defs, f"{path}[]")
    if kind == "object":
        if "properties" not in schema and "maxProperties" not in schema:
            missing.append(f"{path}: object without maxProperties")
        for name, sub in schema.get("properties", {}).items():
            missing += _walk(sub, defs, f"{path}.{name}")
    if kind in ("number", "integer"):
        if not {"minimum", "exclusiveMinimum"} & set(schema):
            missing.append(f"{path}: number without a lower bound")
        if not {"maximum", "exclusiveMaximum"} & set(schema):
            missing.append(f"{path}: number without an upper bound")
    return missing


async def test_every_tool_argument_is_bounded_in_its_schema(client: Any) -> None:
    tools = await client.list_tools()
    assert len(tools) >= 29  # the full profile
    missing: list[str] = []
    for tool in tools:
        schema = tool.inputSchema
        defs = schema.get("$defs", {})
        for name, sub in schema.get("properties", {}).items():
            missing += _walk(sub, defs, f"{tool.name}.{name}")
    assert missing == []
