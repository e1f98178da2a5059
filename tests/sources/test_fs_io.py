"""fs_read / fs_list / fs_write and the change journal, through the MCP tools.

A source on a temp folder, Qdrant Edge in the temp home, the offline hash embedder. Checked:
presence states (cold index, synced, stale after a change or a deletion, brain-only after
an exclude), the credential floor and traversal refusals, inline indexing of a write, the
journal's approve / revert with fingerprint, BASELINE_MISSING and DESTINATION_OCCUPIED
refusals, restart survival, and listing from the journal when the index is down.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.errors import StoreError
from brain.sources.journal import ChangeJournal
from config import Settings
from tests.conftest import _seed_store, hash_embedder


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    _write(root / "README.md", "# Proj\n\nThe zorblax deployment guide.\n")
    _write(root / "src" / "app.py", "def main():\n    return 'quintessa'\n")
    _write(root / ".env", "API_TOKEN=supersecretvalue123456\n")
    _write(root / "keys" / "server.pem", "-----BEGIN PRIVATE KEY-----\nabc\n")
    _write(root / "node_modules" / "x.js", "module.exports = 1\n")
    (tmp_path / "outside.txt").write_text("outside secret text\n")
    return root


def _open(settings: Settings, clock: Any, shard: Path) -> Brain:
    settings.embedding.model = "offline/hash-384"
    _seed_store(settings, shard)
    return Brain(settings, embedder=hash_embedder(), clock=clock).open()


@pytest.fixture
def opened(settings: Settings, clock: Any, _empty_shard: Path) -> Iterator[list[Brain]]:
    """The brains a test opened (a restart opens a second one on the same home)."""
    brains = [_open(settings, clock, _empty_shard)]
    yield brains
    for b in brains:
        b.close()


async def _client(brain: Brain) -> AsyncIterator[Client]:
    from mcp_server import create_server

    async with Client(create_server(profile="full", brain=brain)) as c:
        yield c


@pytest.fixture
async def mcp(opened: list[Brain]) -> AsyncIterator[Client]:
    async for c in _client(opened[0]):
        yield c


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    res = await client.call_tool(tool, args)
    return dict(res.structured_content or {})


async def refused(client: Client, tool: str, code: str, **args: Any) -> str:
    with pytest.raises(ToolError) as err:
        await client.call_tool(tool, args)
    assert f"[{code}]" in str(err.value), str(err.value)
    return str(err.value)


async def add(client: Client, folder: Path, sync: bool = True) -> str:
    res = await call(client, "add_source", path=str(folder), name="proj", trigger="manual")
    if sync:
        done = await call(client, "sync_source", source="proj", wait=True)
        assert done["status"] == "done", done
    return str(res["source"]["id"])


def presence(listing: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("presence", "") for e in listing["entries"]}


# ---------------------------------------------------------------- read and list


async def test_cold_index_reads_the_disk_and_says_unindexed(
    mcp: Client, opened: list[Brain], folder: Path
) -> None:
    src_id = await add(mcp, folder, sync=False)
    opened[0].sources.wait_idle(30)  # add_source starts a sync: undo it to get a cold index
    from brain.sources.indexer import SOURCE_KINDS
    from brain.vector_store import Filter, Match, MatchAny

    opened[0].store.delete_by_filter(
        Filter(must=(Match("source_id", src_id), MatchAny("kind", SOURCE_KINDS)))
    )
    opened[0].sources.registry.clear_states(src_id)
    got = await call(mcp, "fs_read", source="proj", path="README.md")
    assert got["from"] == "disk" and "zorblax" in got["content"]
    assert got["presence"] == "unindexed"
    listing = await call(mcp, "fs_list", source="proj")
    assert presence(listing) == {"keys": "", "src": "", "README.md": "unindexed"}
    # secrets and excluded folders are absent, not merely marked
    names = json.dumps(listing)
    assert ".env" not in names and "node_modules" not in names
    assert (await call(mcp, "fs_list", source="proj", folder="keys"))["entries"] == []


async def test_presence_synced_stale_and_brain(mcp: Client, folder: Path) -> None:
    await add(mcp, folder)
    assert presence(await call(mcp, "fs_list", source="proj")) == {
        "keys": "", "src": "", "README.md": "synced"}
    sub = await call(mcp, "fs_list", source="proj", folder="src")
    assert presence(sub) == {"app.py": "synced"}
    assert (await call(mcp, "fs_read", source="proj", path="src/app.py"))["presence"] == "synced"
    # changed on disk, not synced yet
    _write(folder / "src" / "app.py", "def main():\n    return 'changed'\n")
    got = await call(mcp, "fs_read", source="proj", path="src/app.py")
    assert got["presence"] == "stale_indexed" and "changed" in got["content"]
    # gone from disk: the index's copy, marked stale
    (folder / "README.md").unlink()
    got = await call(mcp, "fs_read", source="proj", path="README.md")
    assert got["from"] == "index" and got["presence"] == "stale_indexed"
    assert "zorblax" in got["content"]
    assert presence(await call(mcp, "fs_list", source="proj"))["README.md"] == "stale_indexed"
    # a sync catches up: the deleted file leaves the listing, the changed one is synced
    await call(mcp, "sync_source", source="proj", wait=True)
    assert presence(await call(mcp, "fs_list", source="proj")) == {"keys": "", "src": ""}
    assert presence(await call(mcp, "fs_list", source="proj", folder="src")) == {
        "app.py": "synced"}
    # a folder gone from disk stays listed while the index still holds its files
    shutil.rmtree(folder / "src")
    root = await call(mcp, "fs_list", source="proj")
    assert presence(root) == {"keys": "", "src": "stale_indexed"}
    assert presence(await call(mcp, "fs_list", source="proj", folder="src")) == {
        "app.py": "stale_indexed"}


async def test_brain_presence_for_a_path_the_filters_now_exclude(
    mcp: Client, opened: list[Brain], folder: Path
) -> None:
    await add(mcp, folder)
    rec = opened[0].sources.registry.find("proj")
    assert rec is not None
    # exclude it without the resync that would delete its points (patch the record only)
    opened[0].sources.registry.patch(rec.id, exclude=["*.py"])
    got = await call(mcp, "fs_read", source="proj", path="src/app.py")
    assert got["from"] == "index" and got["presence"] == "brain"
    assert presence(await call(mcp, "fs_list", source="proj", folder="src")) == {"app.py": "brain"}


async def test_secret_files_are_refused_never_returned(mcp: Client, folder: Path) -> None:
    await add(mcp, folder)
    for path in (".env", "keys/server.pem"):
        text = await refused(mcp, "fs_read", "PATH_EXCLUDED", source="proj", path=path)
        assert "supersecret" not in text and "PRIVATE KEY" not in text
    await refused(mcp, "fs_list", "PATH_EXCLUDED", source="proj", folder="node_modules")
    # a service-account key under an innocent name is refused by its content
    _write(folder / "config.json", json.dumps(
        {"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----x"}))
    await refused(mcp, "fs_read", "PATH_EXCLUDED", source="proj", path="config.json")
    assert "config.json" not in json.dumps(await call(mcp, "fs_list", source="proj"))
    # a secret inside an ordinary file comes back redacted
    _write(folder / "deploy.sh", "export GITHUB_TOKEN=ghp_" + "a" * 36 + "\n")
    got = await call(mcp, "fs_read", source="proj", path="deploy.sh")
    assert "ghp_" + "a" * 36 not in got["content"] and got["redacted"]


async def test_traversal_and_link_escapes_are_refused(
    mcp: Client, folder: Path, tmp_path: Path
) -> None:
    await add(mcp, folder)
    for path in ("../outside.txt", "src/../../outside.txt", str(tmp_path / "outside.txt")):
        text = await refused(mcp, "fs_read", "PATH_OUTSIDE_SOURCE", source="proj", path=path)
        assert "outside secret" not in text
    os.symlink(tmp_path / "outside.txt", folder / "link.txt")
    await refused(mcp, "fs_read", "PATH_OUTSIDE_SOURCE", source="proj", path="link.txt")
    os.symlink(tmp_path, folder / "up")
    await refused(mcp, "fs_list", "PATH_OUTSIDE_SOURCE", source="proj", folder="up")
    await refused(mcp, "fs_write", "PATH_OUTSIDE_SOURCE", source="proj", path="up/new.txt",
                  content="x")
    assert not (tmp_path / "new.txt").exists()
    assert not list((folder.parent / "home" / "changes" / "blobs").rglob("*"))  # nothing kept
    await refused(mcp, "fs_write", "PATH_OUTSIDE_SOURCE", source="proj", path="../evil.txt",
                  content="x")
    assert "outside secret" not in json.dumps(await call(mcp, "fs_list", source="proj"))


async def test_missing_paths_and_folders_say_what_to_do(mcp: Client, folder: Path) -> None:
    await add(mcp, folder)
    await refused(mcp, "fs_read", "FILE_NOT_FOUND", source="proj", path="nope.md")
    await refused(mcp, "fs_list", "FILE_NOT_FOUND", source="proj", folder="nope")
    await refused(mcp, "fs_read", "INVALID_ARGUMENT", source="proj", path="src")
    await refused(mcp, "fs_read", "SOURCE_NOT_FOUND", source="nosuch", path="a.md")
    long = "d" * 300 + "/x.md"  # a name the filesystem refuses: typed, not an internal error
    await refused(mcp, "fs_read", "FILE_NOT_FOUND", source="proj", path=long)
    await refused(mcp, "fs_write", "INVALID_ARGUMENT", source="proj", path=long, content="x")


async def test_reads_are_bounded(mcp: Client, opened: list[Brain], folder: Path) -> None:
    await add(mcp, folder)
    cap = opened[0].fs.cfg.max_read_bytes
    _write(folder / "big.txt", "x" * (cap + 10))
    await refused(mcp, "fs_read", "FILE_TOO_LARGE", source="proj", path="big.txt")
    await refused(mcp, "fs_write", "FILE_TOO_LARGE", source="proj", path="huge.txt",
                  content="é" * (opened[0].fs.cfg.max_write_bytes // 2 + 1))  # bytes, not chars
    assert not (folder / "huge.txt").exists()


# ---------------------------------------------------------------- write and journal


async def test_write_is_searchable_when_it_returns(mcp: Client, folder: Path) -> None:
    await add(mcp, folder)
    res = await call(mcp, "fs_write", source="proj", path="docs/plan.md",
                     content="# Plan\n\nThe flumoxicator rollout starts Monday.\n")
    assert res["indexed"] and res["changed"] and res["change"]["kind"] == "create"
    assert (folder / "docs" / "plan.md").read_text().startswith("# Plan")
    hits = await call(mcp, "fs_search", query="flumoxicator rollout", search_mode="semantic")
    assert "docs/plan.md" in [h["path"] for h in hits["results"]]
    assert (await call(mcp, "fs_read", source="proj", path="docs/plan.md"))["presence"] == "synced"


async def test_write_applies_the_credential_floor(mcp: Client, opened: list[Brain],
                                                  folder: Path) -> None:
    await add(mcp, folder)
    await refused(mcp, "fs_write", "PATH_EXCLUDED", source="proj", path=".env", content="A=1")
    await refused(mcp, "fs_write", "PATH_EXCLUDED", source="proj", path="node_modules/y.js",
                  content="1")
    key = json.dumps({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----x"})
    await refused(mcp, "fs_write", "PATH_EXCLUDED", source="proj", path="sa.json", content=key)
    token = "ghp_" + "b" * 36
    res = await call(mcp, "fs_write", source="proj", path="ci.sh",
                     content=f"export GITHUB_TOKEN={token}\n")
    assert res["redacted"] and token not in (folder / "ci.sh").read_text()
    journal = Path(opened[0].home) / "changes"
    assert all(token not in p.read_text(errors="replace") for p in journal.rglob("*") if p.is_file())
    # a replaced file that held a secret keeps no baseline, so the journal never holds it
    _write(folder / "old.cfg", f"token = {token}\n")
    res = await call(mcp, "fs_write", source="proj", path="old.cfg", content="token = none\n")
    assert res["change"]["baseline_kept"] is False
    assert all(token not in p.read_text(errors="replace") for p in journal.rglob("*") if p.is_file())
    preview = await call(mcp, "preview_change", change_id=res["change"]["id"])
    await refused(mcp, "revert_change", "BASELINE_MISSING", change_id=res["change"]["id"],
                  fingerprint=preview["fingerprint"])


async def test_approve_and_revert_carry_the_fingerprint(mcp: Client, folder: Path) -> None:
    await add(mcp, folder)
    res = await call(mcp, "fs_write", source="proj", path="src/app.py",
                     content="def main():\n    return 'rewritten'\n")
    change = res["change"]
    assert change["kind"] == "modify" and change["baseline_kept"]
    listed = await call(mcp, "list_changes")
    assert [c["id"] for c in listed["changes"]] == [change["id"]]
    assert listed["changes"][0]["index_state"] == "current"
    preview = await call(mcp, "preview_change", change_id=change["id"])
    assert preview["disk"]["matches"] == "snapshot" and "rewritten" in preview["disk"]["content"]
    assert "quintessa" in preview["baseline"]["content"]
    # the file moves on after the preview: the old fingerprint is refused
    _write(folder / "src" / "app.py", "def main():\n    return 'edited by hand'\n")
    await refused(mcp, "revert_change", "CHANGE_CONFLICT", change_id=change["id"],
                  fingerprint=preview["fingerprint"])
    await refused(mcp, "approve_change", "CHANGE_CONFLICT", change_id=change["id"],
                  fingerprint=preview["fingerprint"])
    # a fresh preview sees the hand edit: reverting would overwrite it
    preview = await call(mcp, "preview_change", change_id=change["id"])
    assert preview["disk"]["matches"] == "other" and not preview["revertible"]
    await refused(mcp, "revert_change", "DESTINATION_OCCUPIED", change_id=change["id"],
                  fingerprint=preview["fingerprint"])
    # put the written bytes back, preview, revert: the baseline is restored and indexed
    _write(folder / "src" / "app.py", "def main():\n    return 'rewritten'\n")
    preview = await call(mcp, "preview_change", change_id=change["id"])
    done = await call(mcp, "revert_change", change_id=change["id"],
                      fingerprint=preview["fingerprint"])
    assert done["change"]["status"] == "reverted" and done["indexed"]
    assert "quintessa" in (folder / "src" / "app.py").read_text()
    got = await call(mcp, "fs_read", source="proj", path="src/app.py")
    assert got["presence"] == "synced"
    await refused(mcp, "approve_change", "CHANGE_CONFLICT", change_id=change["id"],
                  fingerprint=preview["fingerprint"])
    # approve another
    res = await call(mcp, "fs_write", source="proj", path="n.md", content="approved text\n")
    preview = await call(mcp, "preview_change", change_id=res["change"]["id"])
    ok = await call(mcp, "approve_change", change_id=res["change"]["id"],
                    fingerprint=preview["fingerprint"])
    assert ok["change"]["status"] == "approved"
    assert (await call(mcp, "list_changes"))["count"] == 0
    assert (await call(mcp, "list_changes", status="all"))["count"] == 2


async def test_revert_of_a_create_refuses_an_occupied_destination(
    mcp: Client, folder: Path
) -> None:
    await add(mcp, folder)
    res = await call(mcp, "fs_write", source="proj", path="made.md", content="made by agent\n")
    cid = res["change"]["id"]
    _write(folder / "made.md", "someone else's file now\n")
    preview = await call(mcp, "preview_change", change_id=cid)
    await refused(mcp, "revert_change", "DESTINATION_OCCUPIED", change_id=cid,
                  fingerprint=preview["fingerprint"])
    assert (folder / "made.md").read_text() == "someone else's file now\n"
    _write(folder / "made.md", "made by agent\n")
    preview = await call(mcp, "preview_change", change_id=cid)
    await call(mcp, "revert_change", change_id=cid, fingerprint=preview["fingerprint"])
    assert not (folder / "made.md").exists()
    assert (await call(mcp, "fs_list", source="proj"))["entries"]
    assert "made.md" not in presence(await call(mcp, "fs_list", source="proj"))


async def test_revert_refuses_a_missing_baseline(
    mcp: Client, opened: list[Brain], folder: Path
) -> None:
    await add(mcp, folder)
    res = await call(mcp, "fs_write", source="proj", path="README.md", content="# New\n")
    change = res["change"]
    blob = Path(opened[0].home) / "changes" / "blobs" / change["baseline_sha"][:2]
    (blob / change["baseline_sha"]).unlink()
    preview = await call(mcp, "preview_change", change_id=change["id"])
    assert preview["baseline"]["state"] == "missing" and not preview["revertible"]
    await refused(mcp, "revert_change", "BASELINE_MISSING", change_id=change["id"],
                  fingerprint=preview["fingerprint"])
    assert (folder / "README.md").read_text() == "# New\n"


async def test_the_journal_survives_a_restart(
    opened: list[Brain], settings: Settings, clock: Any, _empty_shard: Path, folder: Path
) -> None:
    async for c in _client(opened[0]):
        await add(c, folder)
        res = await call(c, "fs_write", source="proj", path="src/app.py", content="v2\n")
    cid = res["change"]["id"]
    opened[0].close()
    opened.append(_open(settings, clock, _empty_shard))
    async for c in _client(opened[1]):
        listed = await call(c, "list_changes")
        assert [x["id"] for x in listed["changes"]] == [cid]
        preview = await call(c, "preview_change", change_id=cid)
        assert "quintessa" in preview["baseline"]["content"]
        await call(c, "revert_change", change_id=cid, fingerprint=preview["fingerprint"])
        assert "quintessa" in (folder / "src" / "app.py").read_text()
    # the decision is durable too
    assert ChangeJournal(Path(opened[1].home) / "changes").get(cid).status == "reverted"  # type: ignore[union-attr]


class _DownStore:
    """The store as seen during an outage: every read fails."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("retrieve", "scroll", "count", "query_dense", "query_sparse"):
            def fail(*_a: Any, **_k: Any) -> Any:
                raise StoreError("the vector store is unreachable")
            return fail
        return getattr(self._inner, name)


async def test_listing_falls_back_to_the_journal_when_the_index_is_down(
    mcp: Client, opened: list[Brain], folder: Path
) -> None:
    await add(mcp, folder)
    res = await call(mcp, "fs_write", source="proj", path="x.md", content="x\n")
    svc = opened[0].sources
    real = svc.store
    svc.store = _DownStore(real)  # type: ignore[assignment]
    try:
        listed = await call(mcp, "list_changes")
        assert listed["index"].startswith("unreachable")
        assert [c["id"] for c in listed["changes"]] == [res["change"]["id"]]
        listing = await call(mcp, "fs_list", source="proj")
        assert listing["index"].startswith("unreachable")
        assert presence(listing)["x.md"] == "unknown"
        got = await call(mcp, "fs_read", source="proj", path="x.md")
        assert got["content"] == "x\n" and got["index"].startswith("unreachable")
    finally:
        svc.store = real


async def test_another_callers_changes_are_not_found(
    mcp: Client, opened: list[Brain], folder: Path
) -> None:
    from brain.trust.identity import Identity, acting_as

    await add(mcp, folder)
    res = await call(mcp, "fs_write", source="proj", path="mine.md", content="mine\n")
    cid = res["change"]["id"]
    with acting_as(Identity("bob", "b1")):
        assert opened[0].changes.list()["count"] == 0
        from brain.errors import ChangeNotFound, SourceNotFound

        with pytest.raises(ChangeNotFound):
            opened[0].changes.preview(cid)
        with pytest.raises(SourceNotFound):
            opened[0].fs.read("proj", "mine.md")


def test_a_torn_last_line_is_skipped_and_blobs_are_checked(tmp_path: Path) -> None:
    from brain.sources.journal import Change, new_change_id

    j = ChangeJournal(tmp_path / "changes")
    sha = j.put_blob(b"written")
    c = Change(id=new_change_id(), source_id="src-1", path="a.md", kind="create",
               created="2026-12-01T00:00:00Z", user_id="u", agent_id="a", visibility="shared",
               snapshot_sha=sha, snapshot_size=7)
    j.record(c)
    j.decide(c.id, "approved", "2026-12-01T00:01:00Z")
    with open(j.path, "a") as fh:
        fh.write('{"event": "reverted", "id": "' + c.id)  # a crash mid-append
    again = ChangeJournal(tmp_path / "changes")
    got = again.get(c.id)
    assert got is not None and got.status == "approved"
    assert again.blob(sha) == b"written"
    # the next event after the torn line is not glued to it
    c2 = Change(**{**c.to_dict(), "id": new_change_id(), "status": "pending", "decided": None})
    again.record(c2)
    assert ChangeJournal(tmp_path / "changes").get(c2.id) == c2
    (again.blobs / sha[:2] / sha).write_bytes(b"damaged")
    assert again.blob(sha) is None  # a damaged copy is never restored
