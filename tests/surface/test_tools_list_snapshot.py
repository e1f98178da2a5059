"""tools/list is the contract every agent reads on each turn: a restructuring of the code
below the tools must not change one byte of it. The committed copies in tests/fixtures/ were
written from the tree before brain/ was grouped into packages (issue 49); a change that means
to alter the surface rewrites them with ``BRAIN_WRITE_TOOLS_SNAPSHOT=1 pytest
tests/surface/test_tools_list_snapshot.py`` and says why in its commit."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from mcp_server import create_server

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _listing(tools: list[Any]) -> str:
    return json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True)
                       for t in tools], indent=1, sort_keys=True) + "\n"


@pytest.mark.parametrize("profile", ["core", "full"])
async def test_tools_list_is_byte_identical_to_the_committed_copy(brain: Any, profile: str) -> None:
    async with Client(create_server(brain=brain, profile=profile)) as c:  # type: ignore[arg-type]
        text = _listing(list((await c.session.list_tools()).tools))
    copy = FIXTURES / f"tools_list.{profile}.json"
    if os.environ.get("BRAIN_WRITE_TOOLS_SNAPSHOT") == "1":
        copy.write_text(text, encoding="utf-8")
    assert text == copy.read_text(encoding="utf-8")
