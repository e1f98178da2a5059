"""Tenancy over real HTTP: ``brain serve --http`` with tokens for alice/a1, bob/b1, alice/a2.

The attack of issue 13, replayed: alice/a1 keeps notes (shared and private), a session
handoff, near-duplicates, a document and a source folder; bob's token then reads sessions,
inbox, decay, consolidation, documents and sources, and tries to delete alice's document and
source; alice/a2 reads the inbox and the decay report. Nothing of alice's may show for bob,
nothing private of a1's for a2, and bob's deletes must fail as if the ids did not exist.
Positive controls: a1 sees everything, a2 sees a1's shared data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError

from tests.process.test_http import Server, _start, _stop, _token_add

SHARED = ("hmkshared", "hmkhandoff", "hmkdup", "hmkdoc", "hmksrc")
PRIVATE = ("hmkprivate",)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("http-tenancy")
    srv = _start(base / "home", base / "server.err")
    try:
        yield srv
    finally:
        _stop(srv)


async def _call(url: str, token: str, name: str, args: dict[str, Any]) -> tuple[bool, str]:
    async with Client(StreamableHttpTransport(url, auth=token), timeout=60) as c:
        try:
            res = await c.call_tool(name, args)
        except ToolError as exc:
            return False, str(exc)
    return True, json.dumps(res.structured_content, default=str)


async def _ok(url: str, token: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    ok, text = await _call(url, token, name, args)
    assert ok, f"{name}: {text}"
    return dict(json.loads(text))


async def _populate(server: Server, alice: str, tmp: Path) -> dict[str, str]:
    url, ids = server.url, {}
    for word, kind, vis in (("hmkshared", "fleeting", "shared"),
                            ("hmkprivate", "fleeting", "private"),
                            ("hmkprivate", "permanent", "private")):
        res = await _ok(url, alice, "add_memory", {"content": f"{word} note about caching",
                                                   "memory_type": kind, "visibility": vis})
        ids[f"{word}-{kind}"] = res["note"]["zk_id"]
    for _ in range(2):
        await _ok(url, alice, "add_memory", {"content": "hmkdup retries are capped at three"})
    await _ok(url, alice, "close_session", {"project": "general", "objective": "hmkhandoff work",
                                            "next_steps": ["hmkhandoff next"]})
    doc = tmp / "hmkdoc.md"
    doc.write_text("# hmkdoc\n\nhmkdoc quarterly figures and plans.\n")
    ids["doc"] = (await _ok(url, alice, "ingest_file", {"path": str(doc)}))["id"]
    src = tmp / "hmksrc"
    src.mkdir()
    (src / "notes.md").write_text("# hmksrc\n\nhmksrc deployment notes.\n")
    added = await _ok(url, alice, "add_source", {"path": str(src), "name": "hmksrc-folder",
                                                 "trigger": "manual"})
    ids["src"] = added["source"]["id"]
    done = await _ok(url, alice, "sync_source", {"source": ids["src"], "wait": True})
    assert done["status"] == "done", done
    for _ in range(300):  # the document is processed in the background
        rec = await _ok(url, alice, "get_file", {"file_id": ids["doc"]})
        if rec["status"] != "processing":
            break
    assert rec["status"] == "ready", rec
    return ids


READS: list[tuple[str, dict[str, Any]]] = [
    ("open_session", {"project": "general"}),
    ("get_session_context", {"project": "general"}),
    ("get_inbox", {}),
    ("decay_report", {"limit": 500}),
    ("consolidate_clusters", {"project": "general", "dry_run": True}),
    ("list_files", {}),
    ("search_files", {"query": "hmkdoc quarterly figures", "threshold": -1, "limit": 30}),
    ("search_memory", {"query": "hmkdoc hmkshared", "include_files": True, "files_threshold": -1,
                       "include_fleeting": True, "all_projects": True}),
    ("list_sources", {}),
    ("fs_search", {"query": "hmksrc deployment", "search_mode": "semantic"}),
    ("fs_search", {"query": "hmksrc", "search_mode": "filter"}),
    ("fs_search", {"query": "hmksrc", "search_mode": "grep"}),
]


async def _reads(url: str, token: str) -> str:
    out = []
    for name, args in READS:
        ok, text = await _call(url, token, name, args)
        assert ok, f"{name}: {text}"
        out.append(text)
    return "\n".join(out)


async def test_tokens_of_other_users_and_agents_reach_nothing_foreign(
    server: Server, tmp_path: Path
) -> None:
    alice = _token_add(server.home, "alice", "a1")
    bob = _token_add(server.home, "bob", "b1")
    sibling = _token_add(server.home, "alice", "a2")
    ids = await _populate(server, alice, tmp_path)
    url = server.url

    seen_by_bob = await _reads(url, bob)
    leaked = [w for w in (*SHARED, *PRIVATE) if w in seen_by_bob]
    assert not leaked, f"bob sees alice's {leaked}"
    seen_by_sibling = await _reads(url, sibling)
    assert not [w for w in PRIVATE if w in seen_by_sibling]
    assert not [z for k, z in ids.items() if k.startswith("hmkprivate") and z in seen_by_sibling]
    seen_by_alice = await _reads(url, alice)
    for word in (*SHARED, *PRIVATE):  # positive controls
        assert word in seen_by_alice, word
    for word in ("hmkshared", "hmkdoc", "hmksrc"):
        assert word in seen_by_sibling, word

    # bob's deletes fail exactly as for ids that do not exist, and delete nothing.
    for name, args, code in (
        ("get_file", {"file_id": ids["doc"]}, "FILE_NOT_FOUND"),
        ("delete_file", {"file_id": ids["doc"]}, "FILE_NOT_FOUND"),
        ("remove_source", {"source": ids["src"], "purge": True}, "SOURCE_NOT_FOUND"),
        ("forget_memory", {"zk_id": ids["hmkshared-fleeting"]}, "NOTE_NOT_FOUND"),
    ):
        ok, text = await _call(url, bob, name, args)
        assert not ok and f"[{code}]" in text, (name, text)
    ok, text = await _call(url, sibling, "forget_memory", {"zk_id": ids["hmkprivate-permanent"]})
    assert not ok and "[NOTE_NOT_FOUND]" in text, text
    assert (await _ok(url, alice, "get_file", {"file_id": ids["doc"]}))["status"] == "ready"
    assert ids["src"] in json.dumps(await _ok(url, alice, "list_sources", {}))
    hits = await _ok(url, alice, "fs_search", {"query": "hmksrc", "search_mode": "grep"})
    assert hits["count"] >= 1
    # the fs tools: bob's token reaches neither alice's files nor her journalled changes
    wrote = await _ok(url, alice, "fs_write", {"source": ids["src"], "path": "hmksrc-new.md",
                                               "content": "hmksrc written over http\n"})
    change = wrote["change"]["id"]
    for name, args, code in (
        ("fs_read", {"source": ids["src"], "path": "notes.md"}, "SOURCE_NOT_FOUND"),
        ("fs_list", {"source": ids["src"]}, "SOURCE_NOT_FOUND"),
        ("fs_write", {"source": ids["src"], "path": "x.md", "content": "x"}, "SOURCE_NOT_FOUND"),
        ("preview_change", {"change_id": change}, "CHANGE_NOT_FOUND"),
        ("revert_change", {"change_id": change, "fingerprint": "0" * 32}, "CHANGE_NOT_FOUND"),
    ):
        ok, text = await _call(url, bob, name, args)
        assert not ok and f"[{code}]" in text and "hmksrc" not in text, (name, text)
    assert (await _ok(url, bob, "list_changes", {"status": "all"}))["count"] == 0
    assert (await _ok(url, alice, "list_changes", {}))["count"] == 1


async def test_another_agents_private_subtree_is_absent_and_forbidden(
    server: Server, tmp_path: Path
) -> None:
    """Seed 000's per-path read policy over HTTP: a1 and a2 (one user) share a source; the
    files under agent-core/a1/ are a1's alone in every search mode, fs_read and fs_list."""
    a1 = _token_add(server.home, "carol", "a1")
    a2 = _token_add(server.home, "carol", "a2")
    url = server.url
    src = tmp_path / "shared-src"
    (src / "agent-core" / "a1").mkdir(parents=True)
    (src / "agent-core" / "a2").mkdir(parents=True)
    (src / "agent-core" / "a1" / "memory.md").write_text("# zqcore\n\nzqcore private plan.\n")
    (src / "agent-core" / "a2" / "memory.md").write_text("# zqtwo\n\nzqtwo own plan.\n")
    (src / "readme.md").write_text("# zqpub\n\nzqpub shared deployment notes.\n")
    added = await _ok(url, a1, "add_source", {"path": str(src), "name": "team",
                                              "trigger": "manual"})
    done = await _ok(url, a1, "sync_source", {"source": added["source"]["id"], "wait": True})
    assert done["status"] == "done", done

    async def seen(token: str) -> str:
        out = []
        for mode, query in (("semantic", "zqcore private plan"), ("filter", "zqcore"),
                            ("grep", "zqcore")):
            out.append(json.dumps(await _ok(url, token, "fs_search", {
                "query": query, "search_mode": mode, "source": "team"})))
        out.append(json.dumps(await _ok(url, token, "fs_list", {"source": "team",
                                                                 "folder": "agent-core"})))
        return "\n".join(out)

    mine, theirs = await seen(a1), await seen(a2)
    assert "zqcore" in mine and "agent-core/a1" in mine  # positive control
    assert "zqcore" not in theirs and "agent-core/a1" not in theirs
    listed = await _ok(url, a2, "fs_list", {"source": "team", "folder": "agent-core"})
    assert [e["name"] for e in listed["entries"]] == ["a2"]
    read = await _ok(url, a1, "fs_read", {"source": "team", "path": "agent-core/a1/memory.md"})
    assert "zqcore" in json.dumps(read)
    for name, args in (
        ("fs_read", {"source": "team", "path": "agent-core/a1/memory.md"}),
        ("fs_list", {"source": "team", "folder": "agent-core/a1"}),
        ("fs_write", {"source": "team", "path": "agent-core/a1/memory.md", "content": "x"}),
        ("fs_search", {"query": "plan", "search_mode": "semantic", "source": "team",
                       "folder": "agent-core/a1"}),
        ("fs_search", {"query": "zqcore", "search_mode": "grep", "source": "team",
                       "folder": "agent-core/a1"}),
    ):
        ok, text = await _call(url, a2, name, args)
        assert not ok and "[FORBIDDEN]" in text and "zqcore" not in text, (name, text)
    assert (src / "agent-core" / "a1" / "memory.md").read_text().startswith("# zqcore")
