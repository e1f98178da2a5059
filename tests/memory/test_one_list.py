"""One schema for each list (issue 49, step 4): the note payload, its defaults and the editable
source fields are each written once, and every writer and door takes them from there."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from brain.app import Brain
from brain.maintenance.service import PATCHERS, validate
from brain.notes import (
    NOTE_DEFAULTS,
    NOTE_FIELDS,
    PUBLIC_FIELDS,
    REQUIRED_FIELDS,
    Derived,
    NotePayload,
    missing_defaults,
    point_id,
)
from brain.sources.registry import EDITABLE_FIELDS, SourceRecord
from brain.vector_store import Point
from mcp_surface.sources import USES


def _stored(brain: Brain, zk_id: str) -> dict[str, Any]:
    (pt,) = brain.store.retrieve([point_id(zk_id)])
    return dict(pt.payload)


# ------------------------------------------------------------------ the note payload
async def test_add_memory_writes_exactly_the_note_payload(client: Any, brain: Brain) -> None:
    """A new note's stored keys are NotePayload's keys: a field added to the write path and not
    to the schema (or the other way round) fails here."""
    note = (await client.call_tool("add_memory", {"content": "uvicorn --reload watches src/",
                                                  "project": "shop"})).data["note"]
    assert set(_stored(brain, note["zk_id"])) == set(NOTE_FIELDS)
    # A tool shows a note's fields in PUBLIC_FIELDS' order, all of them schema fields.
    assert list(note)[: len(PUBLIC_FIELDS)] == list(PUBLIC_FIELDS)
    assert set(PUBLIC_FIELDS) <= set(NOTE_FIELDS)


def test_required_fields_and_defaults_come_from_the_schema() -> None:
    assert set(REQUIRED_FIELDS) == NotePayload.__required_keys__
    assert set(NOTE_DEFAULTS) <= set(NOTE_FIELDS)
    # Every required field but the id a note is known by has a default to fill it with.
    assert set(REQUIRED_FIELDS) - set(NOTE_DEFAULTS) == {"zk_id"}
    for name, default in NOTE_DEFAULTS.items():
        if name in REQUIRED_FIELDS and not isinstance(default, Derived):
            assert isinstance(default, REQUIRED_FIELDS[name]), name


def test_memory_schema_migration_fills_from_the_defaults_table(brain: Brain) -> None:
    """A note as an older version wrote it (a content and an id) is filled with the table's
    defaults, every field of them, and is then a valid note."""
    assert PATCHERS["memory-schema"] is missing_defaults
    legacy = {"zk_id": "ZK-00C0FFEE", "content": "legacy: qdrant listens on 6333\nmore",
              "links": ["ZK-0000BEEF"], "created": "2025-06-01T00:00:00Z"}
    vec = brain.embedder.embed_documents([legacy["content"]])[0].tolist()
    brain.store.upsert([Point(point_id(legacy["zk_id"]), legacy, vec,
                              brain.bm25.document(legacy["content"]))])
    assert "missing:salience" in validate(legacy)

    plan = brain.maintenance.migrate("memory-schema")
    (change,) = [c for c in plan["changes"] if c["zk_id"] == legacy["zk_id"]]
    patch = change["set"]
    assert set(patch) == set(NOTE_DEFAULTS) - set(legacy)
    for name, default in NOTE_DEFAULTS.items():
        if name in patch and not isinstance(default, Derived):
            assert patch[name] == default, name
    assert patch["title"] == "legacy: qdrant listens on 6333"
    assert patch["link_types"] == {"ZK-0000BEEF": "related"}
    assert patch["updated"] == legacy["created"] and patch["created_ts"] == patch["updated_ts"]

    brain.maintenance.migrate("memory-schema", apply=True)
    assert validate(_stored(brain, legacy["zk_id"])) == []


# ------------------------------------------------------------------ editable source fields
def _flags(parser: argparse.ArgumentParser, *words: str) -> list[str]:
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return [a.dest for a in parser._actions if a.option_strings and a.dest != "help"]


def test_editable_source_fields_are_the_records_and_every_door_takes_them() -> None:
    from brain.cli import build_parser

    assert EDITABLE_FIELDS == ("name", "project", "trigger", "exclude", "include",
                               "max_scan_files", "interval_s", "use_gitignore", "pinned")
    assert set(EDITABLE_FIELDS) <= set(SourceRecord.__dataclass_fields__)
    parser = build_parser()
    assert tuple(_flags(parser, "source", "update")) == EDITABLE_FIELDS
    assert tuple(_flags(parser, "source", "add")) == EDITABLE_FIELDS
    assert USES["update"] == {"source", *EDITABLE_FIELDS}
    assert USES["add"] == {"path", "visibility", *EDITABLE_FIELDS}


async def test_sources_tool_lists_every_editable_field(client: Any) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert set(EDITABLE_FIELDS) <= set(tools["sources"].inputSchema["properties"])


def _tree(root: Path) -> Path:
    (root / "gen").mkdir(parents=True)
    (root / ".gitignore").write_text("gen/\n")
    (root / "app.py").write_text("def handler(request):\n    return 'ok'\n")
    (root / "gen" / "built.py").write_text("def generated():\n    return 1\n")
    return root


async def test_use_gitignore_is_editable_through_the_tool(client: Any, tmp_path: Path) -> None:
    root = _tree(tmp_path / "proj")

    async def sources(**args: Any) -> dict[str, Any]:
        return dict((await client.call_tool("sources", args)).data)

    added = await sources(action="add", path=str(root), name="proj", trigger="manual",
                          use_gitignore=False)
    assert added["source"]["use_gitignore"] is False
    done = await sources(action="sync", source="proj", wait=True)
    assert done["status"] == "done" and done["result"]["files_walked"] == 3  # gen/ too

    upd = await sources(action="update", source="proj", use_gitignore=True)
    assert upd["source"]["use_gitignore"] is True
    done = await sources(action="sync", source="proj", wait=True)
    assert done["status"] == "done" and done["result"]["files_walked"] == 2  # gen/ skipped
    listed = await sources(action="list")
    assert listed["sources"][0]["use_gitignore"] is True


def test_use_gitignore_is_editable_from_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from brain.cli import main

    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    root = _tree(tmp_path / "proj")

    def run(*argv: str) -> dict[str, Any]:
        capsys.readouterr()
        assert main(list(argv)) == 0
        return dict(json.loads(capsys.readouterr().out))

    assert run("source", "add", str(root), "--name", "proj")["use_gitignore"] is True
    assert run("source", "update", "proj", "--no-use-gitignore")["use_gitignore"] is False
    job = run("sync", "proj", "--quiet")
    assert job["status"] == "done" and job["result"]["files_walked"] == 3  # gen/ too
    assert run("source", "update", "proj", "--use-gitignore")["use_gitignore"] is True
    job = run("sync", "proj", "--quiet")
    assert job["status"] == "done" and job["result"]["files_walked"] == 2  # gen/ skipped
