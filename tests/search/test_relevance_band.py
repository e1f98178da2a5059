"""The relevance band decides membership on every search tool (brain/search/presentation.py's rule):
a clear single answer is returned alone, with ``more_hits`` counting what it left out, unless
the caller asks for a number of results (top_k / limit); a page of several near answers keeps
them all. Through the MCP tools, on Qdrant Edge with the offline embedder."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from brain.app import Brain
from brain.search.presentation import band_keep, search_page

ONE = "the zanzibar deploy key rotates every ninety days in vault"
QUERY = "zanzibar deploy key rotation"
FILLER = "meeting notes {i}: the team discussed sprint {i} planning and the backlog"


async def _call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return dict((await client.call_tool(tool, args)).structured_content or {})


@pytest.fixture
async def client(brain: Brain) -> Any:
    from mcp_server import create_server

    async with Client(create_server(profile="full", brain=brain)) as c:
        yield c


def test_the_rule() -> None:
    assert band_keep([0.9, 0.3, 0.2], 0.4, explicit=False) == 1  # clear: alone
    assert band_keep([0.9, 0.3, 0.2], 0.4, explicit=True) == 3  # asked for: all
    assert band_keep([0.9, 0.8, 0.2], 0.4, explicit=False) == 3  # near answers: all
    assert band_keep([], 0.4, explicit=False) == 0
    page = search_page({"results": [{"score": 0.9}, {"score": 0.2}, {"score": 0.1}],
                        "count": 3}, 0.4, explicit=False)
    assert page == {"results": [{"score": 0.9}], "count": 1, "answer": "single",
                    "more_hits": 2}
    two = {"results": [{"score": 0.9}, {"score": 0.2}], "count": 2}  # dbsf: always 2/3, 1/3
    assert search_page(two, 0.4, explicit=False) == {**two, "answer": "many"}


async def test_notes_single_answer_alone_unless_asked(client: Client) -> None:
    for text in [ONE, *(FILLER.format(i=i) for i in range(40))]:
        await _call(client, "add_memory", content=text)
    page = await _call(client, "search_memory", query=QUERY)
    assert page["answer"] == "single" and page["count"] == 1 and page["more_hits"] == 4
    assert "zanzibar" in page["results"][0]["title"] + page["results"][0]["snippet"]
    asked = await _call(client, "search_memory", query=QUERY, top_k=5)
    assert asked["answer"] == "single" and asked["count"] == 5 and "more_hits" not in asked
    assert asked["results"][0]["zk_id"] == page["results"][0]["zk_id"]
    many = await _call(client, "search_memory", query="sprint planning backlog")
    assert many["answer"] == "many" and many["count"] == 5 and "more_hits" not in many
    deep = await _call(client, "deep_search", query=QUERY)
    assert deep["answer"] == "single" and deep["count"] == 1 and deep["more_hits"] >= 1
    deep_asked = await _call(client, "deep_search", query=QUERY, top_k=10)
    assert deep_asked["count"] > 1 and deep_asked["results"][0]["zk_id"] == \
        deep["results"][0]["zk_id"]


async def test_a_brain_of_two_notes_shows_both(client: Client) -> None:
    """A new user's two notes on one service: a search showed one alone ("single", the other
    in more_hits) whatever the evidence, because dbsf scores any pool of two 2/3 and 1/3."""
    await _call(client, "add_memory", note_kind="decision",
                content="Decision: the orders service stores orders in PostgreSQL 16.")
    await _call(client, "add_memory", note_kind="decision",
                content="Decision: the orders service caches product pages in Redis.")
    page = await _call(client, "search_memory", query="orders service storage")
    assert page["answer"] == "many" and page["count"] == 2 and "more_hits" not in page
    shown = " ".join(h["title"] + h["snippet"] for h in page["results"])
    assert "PostgreSQL" in shown and "Redis" in shown


async def test_preflight_single_answer_alone_unless_asked(client: Client) -> None:
    await _call(client, "record_failure", content=f"{ONE}: the rotation failed with EACCES",
                failure_signature="vault:EACCES", project="general")
    for i in range(30):
        await _call(client, "record_failure", content=FILLER.format(i=i) + " failed to load",
                    failure_signature=f"sprint:{i}", project="general")
    page = await _call(client, "preflight_check", task=QUERY, project="general")
    assert page["answer"] == "single" and page["count"] == 1 and page["more_hits"] >= 1
    assert "zanzibar" in page["mistakes"][0]["snippet"] + page["mistakes"][0]["title"]
    asked = await _call(client, "preflight_check", task=QUERY, project="general", top_k=5)
    assert asked["count"] == 5 and "more_hits" not in asked


async def test_files_and_sources_single_answer_alone_unless_asked(
    client: Client, brain: Brain, tmp_path: Path
) -> None:
    docs, src = tmp_path / "docs", tmp_path / "src"
    docs.mkdir()
    src.mkdir()
    (docs / "vault.md").write_text(f"# Vault\n\n{ONE}.\n")
    (src / "vault.md").write_text(f"# Vault\n\n{ONE}.\n")
    for i in range(30):
        (docs / f"m{i}.md").write_text(f"# Meeting {i}\n\n{FILLER.format(i=i)}.\n")
        (src / f"m{i}.md").write_text(f"# Meeting {i}\n\n{FILLER.format(i=i)}.\n")
    ids = [(await _call(client, "ingest_file", path=str(p)))["id"] for p in sorted(docs.iterdir())]
    deadline = time.monotonic() + 120
    while any(brain.files.get(i)["status"] != "ready" for i in ids):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    added = await _call(client, "add_source", path=str(src), name="src", trigger="manual")
    assert brain.sources.wait(added["job"]["job_id"], timeout=120)["status"] == "done"
    for tool, asked_arg in (("search_files", "limit"), ("fs_search", "limit")):
        page = await _call(client, tool, query=QUERY)
        assert page["answer"] == "single", (tool, page)
        assert page["count"] == 1 and page["more_hits"] >= 1, tool
        assert "vault" in str(page["results"][0]).lower(), tool
        asked = await _call(client, tool, query=QUERY, **{asked_arg: 5})
        assert asked["count"] == 5 and "more_hits" not in asked, tool
    grep = await _call(client, "fs_search", query="sprint", search_mode="grep")
    assert grep["count"] == 10 and "answer" not in grep  # the band is for ranked searches
