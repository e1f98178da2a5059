"""A search that finds nothing in a project holding no note of the caller's says so, and how
to reach the notes (omit project, or search every project); a project that holds notes
answers an empty search without a hint."""

from __future__ import annotations

from typing import Any

from fastmcp import Client

from brain.app import Brain
from mcp_server import create_server


async def _call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return dict((await client.call_tool(tool, args)).structured_content)


async def test_an_empty_answer_from_an_empty_project_says_how_to_reach_the_notes(
        brain: Brain) -> None:
    brain.memory.add("Decision: invoices are rounded per line", "shop")
    async with Client(create_server(brain=brain)) as client:
        for tool in ("search_memory", "deep_search"):
            guessed = await _call(client, tool, query="invoice rounding", project="shop-app")
            assert guessed["results"] == [] and guessed["answer"] == "none"
            assert "project 'shop-app' holds no notes of yours" in guessed["hint"]
            assert "filters.all_projects" in guessed["hint"]
            right = await _call(client, tool, query="invoice rounding", project="shop")
            assert right["results"] and "hint" not in right
            narrowed = await _call(client, tool, query="invoice rounding", project="shop",
                                   filters={"tags": ["no-such-tag"]})
            assert narrowed["results"] == [] and "hint" not in narrowed  # the project holds notes
            every = await _call(client, tool, query="invoice rounding", project="shop-app",
                                filters={"all_projects": True})
            assert every["results"] and "hint" not in every
