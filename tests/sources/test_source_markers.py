"""Seed 000's category additions: the instructions/ category, a manifest's usability flag and
the agent-core owner marker, on the points a sync writes (and refreshed onto old ones)."""

from __future__ import annotations

import json
from pathlib import Path

from brain.app import Brain
from brain.sources.categories import categorize, manifest_fields
from brain.vector_store import Match
from brain.vector_store.base import Filter


def test_instructions_are_a_gated_contribution_category() -> None:
    named = "---\nname: review\ndescription: how we review\n---\nBe kind.\n"
    assert categorize("instructions/review.md", named)[0] == "instructions"
    assert categorize(".github/instructions/review.md", named)[0] == "instructions"
    assert categorize("instructions/notes.md", "no frontmatter")[0] == "docs"


def test_manifest_usability() -> None:
    npm = json.dumps({"name": "web", "version": "1.0.0"})
    assert manifest_fields("package.json", npm) == {"manifest_usable": True,
                                                    "manifest_shape": "npm"}
    assert manifest_fields("pkg/package.json", json.dumps({"name": "x"}))["manifest_usable"] is False
    plugin = json.dumps({"name": "p", "commands": ["./commands"]})
    assert manifest_fields(".claude-plugin/plugin.json", plugin)["manifest_shape"] == "plugin"
    assert manifest_fields("pyproject.toml", '[project]\nname = "x"\n')["manifest_shape"] == "python"
    assert manifest_fields("Cargo.toml", "[package]\nname = 'x'\n")["manifest_usable"] is True
    assert manifest_fields("pyproject.toml", "[tool.ruff]\n")["manifest_usable"] is False
    assert manifest_fields("package.json", "{broken")["manifest_usable"] is False
    assert manifest_fields("src/app.py", "x = 1") == {}


def test_a_sync_stamps_the_markers(brain: Brain, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "agent-core" / "a7").mkdir(parents=True)
    (root / "agent-core" / "a7" / "memory.md").write_text("# mine\n\nprivate plan\n")
    (root / "package.json").write_text(json.dumps({"name": "web", "version": "1.0.0"}))
    (root / "plugin.json").write_text(json.dumps({"description": "no name"}))
    rec = brain.sources.add(str(root), name="repo", sync=False)["source"]
    assert brain.sources.sync("repo", wait=True, timeout=120)["status"] == "done"
    files = {p.payload["path"]: p.payload for p in brain.store.scroll(
        Filter(must=(Match("kind", "file"), Match("source_id", rec["id"]))), limit=50)[0]}
    assert files["agent-core/a7/memory.md"]["path_agent"] == "a7"
    assert files["agent-core/a7/memory.md"]["path_private"] is True
    assert files["package.json"]["manifest_usable"] is True
    assert files["plugin.json"]["manifest_usable"] is False
    assert "path_agent" not in files["package.json"]


def test_a_file_whose_points_are_gone_is_indexed_again(brain: Brain, tmp_path: Path) -> None:
    """Same content, newer mtime, but the store lost the file's points (a crash, a GC): the
    sync writes them again instead of failing on a payload update of missing points."""
    import os

    root = tmp_path / "repo"
    root.mkdir()
    f = root / "notes.md"
    f.write_text("# Notes\n\nthe replay worker drains the payment queue\n")
    rec = brain.sources.add(str(root), name="repo", sync=False)["source"]
    assert brain.sources.sync("repo", wait=True, timeout=120)["status"] == "done"
    mine = Filter(must=(Match("source_id", rec["id"]),))
    assert brain.store.count(mine) >= 2
    brain.store.delete_by_filter(mine)
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    job = brain.sources.sync("repo", wait=True, timeout=120)
    assert job["status"] == "done", job
    assert brain.store.count(mine) >= 2
