"""Citations end to end through the Claude Code hooks and the MCP tools.

A real stdio server owns the data dir; real hook processes get the documented payloads
(tests/fixtures/hooks). The agent reads a file, writes a note citing a function of it, then
edits that function: the next prompt's injected context marks the note as changed. Also the
MCP surface of citations in process: add_memory's cites, verify_note, bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from brain.app import Brain
from tests.hooks.test_hooks import PROJECT, injected, payload, run_hook, server, structured

WORKER = (
    "import time\n\n\n"
    "def retry_with_backoff(fn, attempts=3):\n"
    "    for i in range(attempts):\n"
    "        try:\n"
    "            return fn()\n"
    "        except OSError:\n"
    "            time.sleep(2 ** i)\n"
    "    raise RuntimeError('gave up')\n"
)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    d = tmp_path / PROJECT
    (d / ".git").mkdir(parents=True)  # project_of names the project after its git root
    return d


def _tool_payload(project_dir: Path, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """A PostToolUse payload of ``tool``, shaped like the documented Read fixture."""
    data = payload("post_tool_use_read.json", project_dir)
    data.update(tool_name=tool, tool_input=tool_input, tool_response={"success": True})
    return data


async def test_an_edit_of_a_cited_function_marks_the_note_changed_at_the_next_prompt(
    home: Path, project_dir: Path
) -> None:
    worker = project_dir / "queue" / "worker.py"
    worker.parent.mkdir(parents=True)
    worker.write_text(WORKER)
    async with server(home) as c:
        added = await structured(c, "add_source", {"path": str(project_dir), "name": "demo",
                                                   "project": PROJECT, "trigger": "manual"})
        done = await structured(c, "sync_source", {"source": added["source"]["id"],
                                                   "wait": True})
        assert done["status"] == "done", done
        first = payload("user_prompt_submit.json", project_dir)
        first["prompt"] = "where does the worker retry with backoff after an OSError"
        run_hook("user-prompt", first, home)  # a turn starts
        read = _tool_payload(project_dir, "Read", {"file_path": str(worker)})
        assert run_hook("post-tool", read, home)[:2][0] == ""
        note = (await structured(c, "add_memory", {
            "content": "The worker retries with backoff in "
                       "queue/worker.py::retry_with_backoff, at most 3 attempts after an "
                       "OSError",
            "project": PROJECT,
            "pinned": True,  # so the session-start briefing lists it too
        }))["note"]
        assert note["citations"] == {"state": "fresh", "fresh": 2}  # detected + the turn's read
        prompt = payload("user_prompt_submit.json", project_dir)
        prompt["prompt"] = "how many attempts does the worker retry with backoff after OSError"
        before = injected(run_hook("user-prompt", prompt, home)[0], "UserPromptSubmit")
        assert note["zk_id"] in before and "cited code" not in before

        # The agent edits the function the note cites (the Edit tool, then its hook).
        worker.write_text(WORKER.replace("attempts=3", "attempts=5"))
        edit = _tool_payload(project_dir, "Edit", {"file_path": str(worker),
                                                   "old_string": "attempts=3",
                                                   "new_string": "attempts=5"})
        assert run_hook("post-tool", edit, home)[2] == 0

        text = injected(run_hook("user-prompt", prompt, home)[0], "UserPromptSubmit")
        line = next(ln for ln in text.splitlines() if note["zk_id"] in ln)
        assert "[cited code changed: queue/worker.py::retry_with_backoff" in line
        verified = await structured(c, "verify_note", {"zk_id": note["zk_id"]})
        states = {r["ref"]: r["state"] for r in verified["citations"]}
        assert states == {"queue/worker.py::retry_with_backoff": "changed",
                          "queue/worker.py": "changed"}
        session = injected(run_hook("session-start", payload("session_start.json", project_dir),
                                    home)[0], "SessionStart")
        line = next(ln for ln in session.splitlines() if note["zk_id"] in ln)
        assert "[cited code changed: queue/worker.py::retry_with_backoff" in line


async def test_add_memory_cites_and_verify_note_through_mcp(brain: Brain, client: Client,
                                                            tmp_path: Path) -> None:
    root = tmp_path / "svc"
    (root / "api").mkdir(parents=True)
    (root / "api" / "routes.py").write_text("def health():\n    return 'ok'\n")
    brain.sources.add(str(root), name="svc", project="general", sync=False)
    assert brain.sources.sync("svc", wait=True, timeout=60)["status"] == "done"
    res = await client.call_tool("add_memory", {"content": "Health check route returns ok",
                                                "cites": ["api/routes.py::health"]})
    note = res.structured_content["note"]  # type: ignore[index]
    assert note["citations"] == {"state": "fresh", "fresh": 1}
    try:
        await client.call_tool("add_memory", {"content": "x", "cites": ["api/none.py"]})
        raise AssertionError("a citation of no file was accepted")
    except ToolError as exc:
        assert "[INVALID_ARGUMENT]" in str(exc)
    (root / "api" / "routes.py").write_text("def health():\n    return 'fine'\n")
    out = await client.call_tool("verify_note", {"zk_id": note["zk_id"]})
    body = json.loads(json.dumps(out.structured_content))
    assert body["state"] == "changed"
    assert "'ok'" in body["citations"][0]["then"]["excerpt"]
    assert "'fine'" in body["citations"][0]["now"]["excerpt"]
    got = await client.call_tool("get_note", {"zk_id": note["zk_id"]})
    assert got.structured_content["note"]["citations"]["state"] == "changed"  # type: ignore[index]
