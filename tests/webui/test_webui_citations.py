"""Where the brain records the code a note cites (brain/citations), the explorer shows its
freshness on search hits and the note page, and sees a change to the cited code. Skipped in
a tree without citations (they come with issue 33)."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest
from starlette.testclient import TestClient

from brain.memory import MemoryService
from brain.trust.identity import Identity
from webui.auth import Logins
from webui.site import create_app

if "cites" not in inspect.signature(MemoryService.add).parameters:
    pytest.skip("this tree has no code citations (issue 33)", allow_module_level=True)


def test_search_and_note_pages_show_cited_code_freshness(brain, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "proj"
    folder.mkdir()
    code = folder / "worker.py"
    code.write_text("def retry_with_backoff():\n    return 3\n")
    src = brain.sources.add(str(folder), name="proj", project="shop", sync=False)
    brain.sources.sync(src["source"]["id"], wait=True, timeout=60)
    zk = brain.memory.add("the retry allows three attempts", "shop",
                          cites=["worker.py::retry_with_backoff"]).note["zk_id"]
    logins = Logins(brain.home, Identity(brain.settings.identity.user_id,
                                         brain.settings.identity.agent_id))
    c = TestClient(create_app(SimpleNamespace(brain=brain), logins),
                   base_url="http://127.0.0.1:8766")
    assert c.get(f"/login?token={logins.issue_link()}", follow_redirects=False).status_code == 303
    assert "code fresh" in c.get("/search?q=retry+three+attempts").text
    code.write_text("def retry_with_backoff():\n    return 5  # more attempts\n")
    page = c.get(f"/note/{zk}").text
    assert "cite-changed" in page and "worker.py::retry_with_backoff" in page
    assert "code changed" in c.get("/search?q=retry+three+attempts").text
