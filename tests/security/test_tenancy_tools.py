"""Every registered tool, run as another user and as a sibling agent, against alice's data.

A brain holds alice/a1's notes (shared and private, fleeting and permanent, near-duplicates
that consolidation would cluster), a session handoff, a mistake, two uploaded documents
(shared and private), two source folders (shared and private) and the orphans of a third.
Then bob/b1 calls every tool the server lists on the full profile, every action of the
folded admin tools (``list_tools``: a tool or action added later without arguments here fails
the test), aimed at alice's ids wherever a tool takes one, and
alice/a2 calls them aimed at a1's private objects. No output may hold a marker string of
data its caller must not see, every mutation of such an object fails with the not-found
code of its kind (exactly what an unknown id gets), and alice's data is unchanged after.
Positive controls: alice sees all of it, and a2 sees a1's shared data.

Identity is set per call by a middleware in front of the real tool gate (the in-process
client has no bearer token); test_http_tenancy.py covers the real token path.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware, MiddlewareContext

from brain.app import Brain
from brain.errors import FileNotFound, SourceNotFound
from brain.trust.identity import Identity, acting_as
from brain.vector_store import scroll_all
from mcp_surface.profiles import current_shape

ALICE = Identity("alice", "a1")
SIBLING = Identity("alice", "a2")
BOB = Identity("bob", "b1")

# One marker word per object, so a leak names what leaked.
SHARED = {
    "note_shared_perm": "amkshperm",
    "note_shared_fleet": "amkshfleet",
    "dup_one": "amkdupone",
    "handoff": "amkhandoff",
    "mistake": "amkmistake",
    "doc_shared": "amkdocshared",
    "src_shared": "amksrcshared",
}
PRIVATE = {
    "note_private_perm": "amkprperm",
    "note_private_fleet": "amkprfleet",
    "doc_private": "amkdocprivate",
    "src_private": "amksrcprivate",
}
# A file under a1's private agent-core/a1/ subtree of the SHARED source: the path read
# policy (brain/trust/tenancy.py), not the source's visibility, keeps it from the sibling.
CORE = {"src_core_path": "amkcorehot"}
ALL_WORDS = " ".join([*SHARED.values(), *PRIVATE.values(), *CORE.values()])


class ActAs(Middleware):
    """Sets the caller of each tool call, as the HTTP token middleware does."""

    def __init__(self) -> None:
        self.who = ALICE

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        with acting_as(self.who):
            return await call_next(context)


@dataclass
class World:
    brain: Brain
    client: Client
    caller: ActAs
    ids: dict[str, str] = field(default_factory=dict)
    bob_dir: Path = Path()
    tmp: Path = Path()

    async def call(self, who: Identity, name: str, args: dict[str, Any]) -> tuple[bool, str]:
        """(ok, text of the result or the error)."""
        self.caller.who = who
        try:
            res = await self.client.call_tool(name, args)
        except ToolError as exc:
            return False, str(exc)
        return True, json.dumps(res.structured_content or res.data, default=str)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
async def world(brain: Brain, tmp_path: Path) -> AsyncIterator[World]:
    from config import WorkerSettings
    from mcp_server import create_server

    # The scheduled GC (the janitor, acting for everyone) would collect alice's orphans once
    # the clock jumps 100 days; these tests are about what callers reach.
    brain.settings.workers["health_gc"] = WorkerSettings(enabled=False)
    # Every synced file is hot, and stays hot past the 100-day clock jump below, so
    # health_hot_files has something of alice's to show (or to leak).
    brain.hot_files.threshold, brain.hot_files.window_s = 1, 200 * 86_400.0
    server = create_server(profile="full", brain=brain)
    caller = ActAs()
    server.add_middleware(caller)
    async with Client(server) as client:
        w = World(brain, client, caller, tmp=tmp_path)
        await _populate(w)
        yield w


async def _ok(w: World, tool: str, /, **args: Any) -> dict[str, Any]:
    w.caller.who = ALICE
    res = await w.client.call_tool(tool, args)
    return dict(res.structured_content or {})


async def _populate(w: World) -> None:
    ids = w.ids
    for key, memory_type, visibility in (
        ("note_shared_perm", "permanent", "shared"),
        ("note_shared_fleet", "fleeting", "shared"),
        ("note_private_perm", "permanent", "private"),
        ("note_private_fleet", "fleeting", "private"),
    ):
        word = {**SHARED, **PRIVATE}[key]
        res = await _ok(w, "add_memory", content=f"{word} decision about the {word} cache",
                        memory_type=memory_type, visibility=visibility, pinned=False)
        ids[key] = res["note"]["zk_id"]
    # Two near-duplicates: a consolidation dry run proposes them as one cluster.
    for key in ("dup_one", "dup_two"):
        res = await _ok(w, "add_memory", content="amkdupone retry budget is three attempts",
                        project="general")
        ids[key] = res["note"]["zk_id"]
    handoff = await _ok(w, "close_session", project="general", objective="amkhandoff objective",
                        next_steps=["amkhandoff next step"])
    ids["handoff"] = handoff["open_thread"]["zk_id"]
    mistake = await _ok(w, "record_failure", content="amkmistake ImportError on start",
                        project="general", failure_signature="amk:ImportError")
    ids["mistake"] = mistake["note"]["zk_id"]
    # An archived note, so restore_note has something of alice's to aim at.
    arch = await _ok(w, "add_memory", content="amkshperm archived side note")
    ids["archived"] = arch["note"]["zk_id"]
    w.brain.memory.archive(ids["archived"])
    for key, vis in (("doc_shared", "shared"), ("doc_private", "private")):
        word = {**SHARED, **PRIVATE}[key]
        doc = _write(w.tmp / f"{word}.md", f"# {word} report\n\n{word} quarterly figures.\n")
        rec = await _ok(w, "ingest_file", path=str(doc), visibility=vis)
        ids[key] = rec["id"]
        with acting_as(ALICE):
            assert w.brain.files.wait(rec["id"], 60)["status"] == "ready"
    for key, vis in (("src_shared", "shared"), ("src_private", "private"), ("src_gone", "shared")):
        word = {**SHARED, **PRIVATE}.get(key, "amksrcgone")
        root = w.tmp / key
        _write(root / "notes.md", f"# {word}\n\n{word} deployment notes.\n")
        if key == "src_shared":
            _write(root / "agent-core" / "a1" / "amkcorehot.md", "a1's own core notes\n")
        added = await _ok(w, "add_source", path=str(root), name=f"{word}-src", trigger="manual",
                          visibility=vis)
        ids[key] = added["source"]["id"]
        done = await _ok(w, "sync_source", source=ids[key], wait=True)
        assert done["status"] == "done", done
        ids[f"job_{key}"] = done["job_id"]
        if key != "src_gone":  # a journalled change per source, for the review tools
            wrote = await _ok(w, "fs_write", source=ids[key], path="written.md",
                              content=f"{word} written through fs_write\n")
            ids[f"chg_{key}"] = wrote["change"]["id"]
    # A note citing code in alice's shared source, whose code then changed: its staleness
    # (verify_note, search hits, preflight) is alice's alone.
    cited = await _ok(w, "add_memory", content="amkshperm deployment notes are cited",
                      cites=[str(w.tmp / "src_shared" / "notes.md")])
    ids["cited"] = cited["note"]["zk_id"]
    _write(w.tmp / "src_shared" / "notes.md", "# amksrcshared\n\nchanged deployment notes.\n")
    assert (await _ok(w, "sync_source", source=ids["src_shared"], wait=True))["status"] == "done"
    # Removed without purge: its points are alice's orphans.
    await _ok(w, "remove_source", source=ids["src_gone"])
    w.bob_dir = w.tmp / "bobs"
    _write(w.bob_dir / "bob.md", "bob's own notes about nothing in particular\n")
    clusters = await _ok(w, "consolidate_clusters", project="general", dry_run=True)
    ids["cluster"] = clusters["clusters"][0]["cluster_id"]
    # 100 days on: alice's untouched notes are stale, so archival would take them.
    w.brain.clock.advance(days=100)  # type: ignore[attr-defined]


def _aimed(ids: dict[str, str], note: str, fleeting: str, doc: str, src: str,
           job: str, bob_dir: Path, project: str,
           signature: str = "amk:ImportError") -> dict[str, list[dict[str, Any]]]:
    """Arguments for every tool, aimed at the given objects of alice's."""
    q = {"query": ALL_WORDS}
    change = ids["chg_src_shared"] if src == ids["src_shared"] else ids["chg_src_private"]
    decide = {"change_id": change, "fingerprint": "0" * 32}
    everything = {"include_fleeting": True, "all_projects": True, "include_contextual": True,
                  "include_siblings": True}
    return {
        "fs_read": [{"source": src, "path": "notes.md"}],
        "fs_list": [{"source": src}, {"source": src, "folder": ""}],
        "fs_write": [{"source": src, "path": "written.md", "content": "overwritten"}],
        "list_changes": [{"status": "all"}, {"status": "all", "source": src}],
        "preview_change": [{"change_id": change}],
        "approve_change": [decide],
        "revert_change": [decide],
        "add_memory": [{"content": "a note of the other caller", "project": "general"}],
        "update_memory": [{"zk_id": note, "new_content": "overwritten"}],
        "search_memory": [{**q, "top_k": 100, "filters": everything,
                           "include_files": True, "files_threshold": -1}],
        "get_related": [{"zk_id": note, "depth": 3}],
        "get_note": [{"zk_id": note}],
        "distill_to_permanent": [{"zk_id": fleeting}],
        "restore_note": [{"zk_id": ids["archived"]}],
        "forget_memory": [{"zk_id": note}],
        "brain_stats": [{}],
        "open_session": [{"project": "general"}],
        "get_session_context": [{"project": "general"}],
        "get_inbox": [{}, {"project": "general"}],
        "close_session": [{"project": project, "objective": "the other caller's session"}],
        "record_failure": [{"content": "other ImportError", "project": "general",
                            "failure_signature": signature}],
        "record_resolution": [{"failure_zk_id": ids["mistake"], "fix_content": "a fix"}],
        "preflight_check": [{"task": ALL_WORDS, "top_k": 50},
                            {"task": ALL_WORDS, "top_k": 50, "changed_since": "HEAD"}],
        "verify_note": [{"zk_id": note}, {"zk_id": ids["cited"]}],
        "archive_stale_notes": [{"dry_run": True}, {"dry_run": False}],
        "decay_report": [{"limit": 500}],
        "deep_search": [{**q, "top_k": 100, "filters": everything}],
        "consolidate_clusters": [{"project": "general", "dry_run": True},
                                 {"project": "general", "dry_run": False,
                                  "selected_cluster_ids": [ids["cluster"]]}],
        "brain_capabilities": [{}],
        "add_source": [{"path": str(bob_dir), "name": "other-src", "trigger": "manual"}],
        # the client's workspace: bob's folder becomes bob's source (or is bob's already);
        # alice's source on her folder stays hers, unseen
        "sources.workspace": [{"path": str(bob_dir)}],
        "list_sources": [{}],
        "update_source": [{"source": src, "name": "renamed"}],
        "remove_source": [{"source": src, "purge": True}],
        "sync_source": [{"source": src}],
        "sync_status": [{"job_id": job}, {"source": src}, {}],
        "cancel_sync": [{"job_id": job}, {"source": src}],
        "fs_search": [{**q, "search_mode": "semantic", "limit": 200},
                      {"query": "", "search_mode": "filter", "limit": 200},
                      {**q, "search_mode": "filter", "limit": 200},
                      {"query": "amk", "search_mode": "grep", "limit": 200}],
        "rescan_source": [{"source": src}],
        "reset_source_state": [{"source": src}],
        "reembed": [{"source": src}],
        "repair_orphans": [{"dry_run": True}, {"dry_run": False}],
        "ingest_file": [{"path": str(bob_dir / "bob.md")}],
        "search_files": [{**q, "limit": 30, "threshold": -1}],
        "list_files": [{}],
        "get_file": [{"file_id": doc}],
        "reprocess_file": [{"file_id": doc}],
        "delete_file": [{"file_id": doc}],
        "health_stats": [{}, {"project": "general"}],
        "health_scan": [{}, {"project": "general"}],
        "health_duplicates": [{"threshold": 0.01, "max_points": 20_000}],
        "health_hot_files": [{}],
        "health_gc": [{"dry_run": True}, {"dry_run": False},
                      {"dry_run": False, "expect": [src, doc, note]}],
        "health_repair": [{"dry_run": True}, {"dry_run": False}],
        "model_status": [{}],
        "model_estimate": [{}, {"model": "offline/hash-384", "dimension": 64}],
        "health_collection": [{}, {"project": "general"}],
        "health_rebuild_indexes": [{"dry_run": True}, {"dry_run": False}],
        "health_quantization": [{"dry_run": True}, {"mode": "none", "dry_run": False}],
    }


# What a refused call on a foreign object must say: the code an unknown id gets.
NOT_FOUND = {
    "update_memory": "NOTE_NOT_FOUND", "get_related": "NOTE_NOT_FOUND",
    "get_note": "NOTE_NOT_FOUND", "verify_note": "NOTE_NOT_FOUND",
    "distill_to_permanent": "NOTE_NOT_FOUND", "restore_note": "NOTE_NOT_FOUND",
    "forget_memory": "NOTE_NOT_FOUND", "record_resolution": "NOTE_NOT_FOUND",
    "get_file": "FILE_NOT_FOUND", "reprocess_file": "FILE_NOT_FOUND",
    "delete_file": "FILE_NOT_FOUND",
    "update_source": "SOURCE_NOT_FOUND", "remove_source": "SOURCE_NOT_FOUND",
    "sync_source": "SOURCE_NOT_FOUND", "rescan_source": "SOURCE_NOT_FOUND",
    "reset_source_state": "SOURCE_NOT_FOUND", "reembed": "SOURCE_NOT_FOUND",
    "fs_read": "SOURCE_NOT_FOUND", "fs_list": "SOURCE_NOT_FOUND",
    "fs_write": "SOURCE_NOT_FOUND", "preview_change": "CHANGE_NOT_FOUND",
    "approve_change": "CHANGE_NOT_FOUND", "revert_change": "CHANGE_NOT_FOUND",
}  # fmt: skip


STAMPS = ("access_count", "last_accessed", "last_accessed_ts")
WORKER = ("salience", "salience_ts", "salience_key")  # set by access stamps, re-keyed by decay


def _snapshot(brain: Brain, stamps: bool = True) -> dict[str, Any]:
    """Everything of alice/a1's: store points, file records, source records. Without
    ``stamps``, access stamps do not count (a sibling's search of shared notes sets them)."""
    brain.memory.flush_stamps()
    points = {p.id: {k: v for k, v in p.payload.items()
                     if k not in WORKER and (stamps or k not in STAMPS)}
              for p in scroll_all(brain.store, None)
              if p.payload.get("user_id") == "alice" and p.payload.get("agent_id") == "a1"}
    files = {r["id"]: r for r in brain.files.records.list(ALICE) if r["agent_id"] == "a1"}
    sources = {r.id: r.to_dict() for r in brain.sources.registry.list(ALICE)
               if r.agent_id == "a1"}
    return {"points": points, "files": files, "sources": sources}


def _strip_args(text: str, args: dict[str, Any]) -> str:
    """An error may echo the caller's own argument (an id it passed): that is no leak."""
    for value in args.values():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and v:
                text = text.replace(v, "")
    return text


def _actions(tools: list[Any]) -> set[tuple[str, str]]:
    """Every (tool, action) the server lists: a folded admin tool once per action."""
    return {(t.name, a) for t in tools
            for a in t.inputSchema["properties"].get("action", {}).get("enum", [""])}


def _shape(name: str, case: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A case's call: ``tool.action`` for an action no earlier release named, else the
    earlier release's name through ``current_shape``."""
    if "." in name:
        tool, action = name.split(".", 1)
        return tool, {"action": action, **case}
    return current_shape(name, case)


async def _run_all(w: World, who: Identity, aimed: dict[str, list[dict[str, Any]]],
                   forbidden: dict[str, str]) -> list[str]:
    """Runs every case. A case is keyed by its action's own name (``health_gc`` is the
    ``health`` tool's gc action, as earlier releases named it): ``current_shape`` gives the
    call to today's tool, and every action of every listed tool must have a case."""
    listed = _actions(await w.client.list_tools())
    calls = {old: _shape(old, {}) for old in aimed}
    covered = {(new, str(args.get("action", ""))) for new, args in calls.values()}
    assert listed == covered, (
        f"tool actions without a tenancy case: {sorted(listed - covered)}; "
        f"cases for tool actions that are gone: {sorted(covered - listed)}"
    )
    problems: list[str] = []
    for name in sorted(aimed):
        for case in aimed[name]:
            tool, args = _shape(name, dict(case))
            ok, text = await w.call(who, tool, args)
            seen = _strip_args(text, args)
            for what, marker in forbidden.items():
                if marker in seen:
                    problems.append(f"{name}({args}) shows {what}: {text[:300]}")
            want = NOT_FOUND.get(name)
            if want and (ok or f"[{want}]" not in text):
                problems.append(f"{name}({args}) should fail with {want}, got {text[:300]}")
    return problems


async def test_another_user_sees_and_changes_nothing_through_any_tool(world: World) -> None:
    w, ids = world, world.ids
    before = _snapshot(w.brain)
    forbidden = {**SHARED, **PRIVATE, **CORE, **{f"id {k}": v for k, v in ids.items()}}
    aimed = _aimed(ids, ids["note_shared_perm"], ids["note_shared_fleet"], ids["doc_shared"],
                   ids["src_shared"], ids["job_src_shared"], w.bob_dir, "general")
    problems = await _run_all(w, BOB, aimed, forbidden)
    assert not problems, "\n".join(problems)
    with acting_as(BOB):
        w.brain.sources.wait_idle(30)
    after = _snapshot(w.brain)
    changed = {k for k in before["points"] if before["points"][k] != after["points"].get(k)}
    assert not changed, [
        {f: (before["points"][k].get(f), (after["points"].get(k) or {}).get(f))
         for f in set(before["points"][k]) | set(after["points"].get(k) or {})
         if before["points"][k].get(f) != (after["points"].get(k) or {}).get(f)}
        for k in changed]
    assert after == before
    # Names are per user: alice's source name is free for bob (a conflict would tell him
    # it exists).
    second = _write(w.tmp / "bobs2" / "b.md", "more of bob's notes\n").parent
    ok, text = await w.call(BOB, "add_source", {"path": str(second), "name": "amksrcshared-src",
                                                "trigger": "manual"})
    assert ok, text
    await _alice_sees_her_own(w)


async def test_a_sibling_agent_never_reaches_private_data(world: World) -> None:
    w, ids = world, world.ids
    before = _snapshot(w.brain, stamps=False)
    forbidden = {**PRIVATE, **CORE, **{f"id {k}": ids[k] for k in PRIVATE}}
    # Aimed at a1's private objects; the session goes to another project, since a1's
    # handoff in "general" is shared with its sibling by design.
    aimed = _aimed(ids, ids["note_private_perm"], ids["note_private_fleet"],
                   ids["doc_private"], ids["src_private"], ids["job_src_private"], w.bob_dir,
                   "sibling-project", signature="sibling:Error")
    # include_siblings is the documented opt-in to a sibling's private notes (same user):
    # without it, nothing private may show.
    for name in ("search_memory", "deep_search"):
        aimed[name] = [{**a, "filters": {**a["filters"], "include_siblings": False}}
                       for a in aimed[name]]
    aimed["archive_stale_notes"] = [{"dry_run": True}]  # applying would archive shared notes
    aimed["repair_orphans"] = [{"dry_run": True}]
    aimed["health_gc"] = [{"dry_run": True}]  # applying would collect a1's shared orphans
    aimed["health_repair"] = [{"dry_run": True}]
    aimed["consolidate_clusters"] = [{"project": "general", "dry_run": True}]
    aimed["record_resolution"] = [{"failure_zk_id": ids["note_private_perm"],
                                   "fix_content": "a fix"}]
    aimed["restore_note"] = [{"zk_id": ids["note_private_perm"]}]
    aimed["verify_note"] = [{"zk_id": ids["note_private_perm"]}]  # a1's shared ones are shared
    aimed["sync_status"] = [{"job_id": ids["job_src_private"]}, {"source": ids["src_private"]},
                            {}]
    aimed["cancel_sync"] = [{"job_id": ids["job_src_private"]}, {"source": ids["src_private"]}]
    problems = await _run_all(w, SIBLING, aimed, forbidden)
    assert not problems, "\n".join(problems)
    # Positive control: the sibling does see a1's shared data.
    shown = " ".join([
        (await w.call(SIBLING, "get_inbox", {}))[1],
        (await w.call(SIBLING, "list_files", {}))[1],
        (await w.call(SIBLING, "list_sources", {}))[1],
        (await w.call(SIBLING, "decay_report", {"limit": 500}))[1],
    ])
    for word in ("amkshfleet", "amkdocshared", "amksrcshared"):
        assert word in shown, word
    # Hot files: the shared source's files, without a1's agent-core path.
    ok, text = await w.call(SIBLING, "health_hot_files", {})
    hot = json.loads(text)["hot_files"]
    assert ok and {(h["source_id"], h["path"]) for h in hot} >= {(ids["src_shared"], "notes.md")}
    assert not [h for h in hot if "agent-core" in h["path"]], hot
    w.brain.sources.wait_idle(30)
    assert _snapshot(w.brain, stamps=False) == before


async def _alice_sees_her_own(w: World) -> None:
    """The zeros above are not vacuous: the same calls as alice show her data."""
    seen = " ".join([
        (await w.call(ALICE, "open_session", {"project": "general"}))[1],
        (await w.call(ALICE, "get_inbox", {}))[1],
        (await w.call(ALICE, "decay_report", {"limit": 500}))[1],
        (await w.call(ALICE, "list_files", {}))[1],
        (await w.call(ALICE, "search_files", {"query": ALL_WORDS, "threshold": -1,
                                              "limit": 30}))[1],
        (await w.call(ALICE, "list_sources", {}))[1],
        (await w.call(ALICE, "fs_search", {"query": "amk", "search_mode": "grep",
                                           "limit": 200}))[1],
        (await w.call(ALICE, "fs_search", {"query": ALL_WORDS, "limit": 200}))[1],
        (await w.call(ALICE, "consolidate_clusters", {"project": "general"}))[1],
    ])
    for what, word in {**SHARED, **PRIVATE}.items():
        assert word in seen, f"alice does not see her own {what}"
    ok, text = await w.call(ALICE, "verify_note", {"zk_id": w.ids["cited"]})
    assert ok and '"state":"changed"' in text.replace(" ", ""), text
    ok, text = await w.call(ALICE, "health_hot_files", {})
    assert ok and "agent-core/a1/amkcorehot.md" in text
    ok, text = await w.call(ALICE, "get_file", {"file_id": w.ids["doc_private"]})
    assert ok and "amkdocprivate" in text
    ok, _ = await w.call(ALICE, "sync_status", {"job_id": w.ids["job_src_shared"]})
    assert ok
    ok, text = await w.call(ALICE, "preview_change", {"change_id": w.ids["chg_src_private"]})
    assert ok and "amksrcprivate" in text
    ok, text = await w.call(ALICE, "list_changes", {"status": "all"})
    assert ok and w.ids["chg_src_private"] in text and w.ids["chg_src_shared"] in text
    ok, text = await w.call(ALICE, "fs_read", {"source": w.ids["src_private"],
                                               "path": "written.md"})
    assert ok and "amksrcprivate" in text
    ok, text = await w.call(ALICE, "repair_orphans", {"dry_run": True})
    assert ok and w.ids["src_gone"] in text
    ok, text = await w.call(ALICE, "health_gc", {"dry_run": True})
    assert ok and '"count":0' not in text.replace(" ", "")  # her removed source's points


OLD_FILES_DB = """
CREATE TABLE files (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, file_name TEXT NOT NULL,
    file_size INTEGER NOT NULL, content_hash TEXT NOT NULL, storage_path TEXT NOT NULL,
    project TEXT NOT NULL, status TEXT NOT NULL, chunks_count INTEGER, reason TEXT,
    generation INTEGER NOT NULL DEFAULT 1, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}');
CREATE UNIQUE INDEX files_user_hash ON files (user_id, content_hash);
INSERT INTO files VALUES ('f0', 'default', 'old.md', 3, 'abc', 'blobs/ab/abc', 'general',
    'failed', 0, 'old', 1, '2026-01-01', '2026-01-01', '{}');
"""
OLD_SOURCES_DB = "CREATE TABLE sources (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, " \
                 "data TEXT NOT NULL);"


def test_databases_from_before_owners_belong_to_the_settings_identity(
    settings: Any, clock: Any, _empty_shard: Path, tmp_path: Path
) -> None:
    import sqlite3

    from tests.conftest import _seed_store, hash_embedder

    settings.embedding.model = "offline/hash-384"
    _seed_store(settings, _empty_shard)
    home = Path(settings.home)
    (home / "files").mkdir(parents=True, exist_ok=True)
    old_src = json.dumps({"id": "src-old", "name": "old", "root": str(tmp_path),
                          "project": "general"})
    files_db = sqlite3.connect(home / "files" / "files.db")
    files_db.executescript(OLD_FILES_DB)
    files_db.close()
    src_db = sqlite3.connect(home / "sources.db")
    src_db.executescript(OLD_SOURCES_DB)
    src_db.execute("INSERT INTO sources VALUES ('src-old', 'old', ?)", (old_src,))
    src_db.commit()
    src_db.close()
    brain = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        me = Identity(settings.identity.user_id, settings.identity.agent_id)
        with acting_as(me):
            rec = brain.files.get("f0")
            assert rec["visibility"] == "shared"
            src = brain.sources.get("src-old")
            assert (src.user_id, src.agent_id, src.visibility) == (me.user_id, me.agent_id,
                                                                   "shared")
        with acting_as(BOB):
            assert brain.files.list() == [] and brain.sources.list() == []
            with pytest.raises(FileNotFound):
                brain.files.get("f0")
            with pytest.raises(SourceNotFound):
                brain.sources.get("old")
            other = tmp_path / "bob-old"  # names are per owner: bob's "old" is his own
            other.mkdir()
            assert brain.sources.add(str(other), name="old", sync=False)["source"]["name"] == "old"
    finally:
        brain.close()
    # The migration ran once; reopening changes nothing.
    brain = Brain(settings, embedder=hash_embedder(), clock=clock).open()
    try:
        assert {r.name for r in brain.sources.registry.list()} == {"old"}
        assert len(brain.sources.registry.list()) == 2
    finally:
        brain.close()


async def test_over_stdio_the_gate_acts_as_the_settings_identity(brain: Brain) -> None:
    """No token, no middleware: the tool gate itself names the caller (the settings
    identity), so a stdio client is filtered exactly like an HTTP one."""
    from mcp_server import create_server

    with acting_as(ALICE):
        theirs = brain.memory.add("amkshfleet waiting in alice's inbox", memory_type="fleeting")
    with acting_as(Identity(brain.settings.identity.user_id, brain.settings.identity.agent_id)):
        mine = brain.memory.add("my own fleeting thought", memory_type="fleeting")
    async with Client(create_server(profile="full", brain=brain)) as client:
        inbox = (await client.call_tool("get_inbox", {})).structured_content or {}
        stats = (await client.call_tool("brain_stats", {})).structured_content or {}
        with pytest.raises(ToolError, match="NOTE_NOT_FOUND"):
            await client.call_tool("forget_memory", {"zk_id": theirs.note["zk_id"]})
    assert [n["zk_id"] for n in inbox["notes"]] == [mine.note["zk_id"]]
    assert stats["notes"] == 1


def test_merging_a_private_note_makes_a_private_note(brain: Brain) -> None:
    with acting_as(ALICE):
        brain.memory.add("amkprperm retries are capped at three", visibility="private")
        brain.memory.add("amkprperm retries are capped at three")
        found = brain.agentic.consolidate_clusters("general")["clusters"]
        done = brain.agentic.consolidate_clusters("general", dry_run=False,
                                                   selected_cluster_ids=[found[0]["cluster_id"]])
        merged = brain.memory.get_payload(done["applied"][0]["merged_note"])
    assert merged["visibility"] == "private"
    with acting_as(SIBLING):
        assert "amkprperm" not in json.dumps(brain.sessions.get_session_context("general"))
        assert not brain.memory.search("amkprperm retries", 10)


def test_store_conditions_read_a_missing_visibility_as_shared(brain: Brain) -> None:
    """Points written before visibility existed (source chunks had only user_id) stay
    visible to their user's agents and to no other user."""
    from brain.trust import tenancy
    from brain.vector_store import Filter, Match, Point

    def point(n: int, **payload: str) -> Point:
        return Point(f"00000000-0000-0000-0000-00000000000{n}", {"kind": "probe", **payload},
                     dense=[1.0] + [0.0] * 383)

    brain.store.upsert([
        point(1, user_id="alice"),  # legacy: no agent, no visibility
        point(2, user_id="alice", agent_id="a1", visibility="private"),
        point(3, user_id="alice", agent_id="a1", visibility="shared"),
        point(4, user_id="bob", agent_id="b1", visibility="shared"),
        point(5),  # nobody's
    ])

    def seen(who: Identity) -> set[str]:
        flt = Filter(must=(Match("kind", "probe"), *tenancy.conditions(who)))
        return {p.id[-1] for p in scroll_all(brain.store, flt)}

    assert seen(ALICE) == {"1", "2", "3"}
    assert seen(SIBLING) == {"1", "3"}
    assert seen(BOB) == {"4"}


def test_no_module_but_tenancy_builds_an_owner_filter() -> None:
    """Owner conditions come from brain/trust/tenancy.py only: a service that matched on
    user_id, agent_id or visibility itself could drift from the one rule."""
    import ast

    root = Path(__file__).resolve().parents[2]
    owner_keys = {"user_id", "agent_id", "visibility"}
    found = []
    for path in [*root.joinpath("brain").rglob("*.py"), *root.joinpath("mcp_surface").glob("*.py"),
                 root / "mcp_server.py"]:
        if path.name == "tenancy.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("Match", "MatchAny")
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value in owner_keys):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []


def test_related_never_walks_through_a_note_the_caller_cannot_see(brain: Brain) -> None:
    with acting_as(ALICE):
        a = brain.memory.add("amkshperm alpha topic", autolink=False).note["zk_id"]
        b = brain.memory.add("amkshperm beta topic", autolink=False).note["zk_id"]
        p = brain.memory.add("amkprperm joins alpha and beta", visibility="private",
                             links=[(a, "related"), (b, "related")], autolink=False)
        private = p.note["zk_id"]
        assert b in {n["zk_id"] for n in brain.memory.related(a, 2)["related"]}  # a1 may
    with acting_as(SIBLING):
        shown = json.dumps(brain.memory.related(a, 3))
    assert private not in shown and b not in shown
