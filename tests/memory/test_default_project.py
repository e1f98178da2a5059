"""The default project comes from settings for every tool (BRAIN__MEMORY__DEFAULT_PROJECT)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastmcp import Client

from config import Settings, load_settings


@pytest.fixture
def settings(home: Path) -> Settings:
    s = load_settings(home=home)
    s.memory.default_project = "webshop"
    return s


async def test_add_memory_without_project_lands_where_searches_look(client: Client) -> None:
    """A note added with no project was written to a hard-coded 'general' and a search with
    no project (the configured default) could not find it."""
    added = (await client.call_tool("add_memory", {"content": "Checkout retries twice"})).data
    found = (await client.call_tool("search_memory", {"query": "checkout retries"})).data
    assert added["note"]["project"] == "webshop"
    assert [h["zk_id"] for h in found["results"]] == [added["note"]["zk_id"]]


