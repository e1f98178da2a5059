"""A source added without a project belongs to the project its folder is worked on as (the
git work tree's name, else its own), the name the hooks and the stdio workspace give an
agent's project; a search with a project no source belongs to says so and how to fix it."""

from __future__ import annotations

from pathlib import Path

from brain.app import Brain
from brain.hooks.events import project_of


def _w(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _repo(base: Path, name: str) -> Path:
    root = base / name
    (root / ".git").mkdir(parents=True)
    _w(root / "svc" / "cache.py", "def connect_zebracache(host):\n    return host\n")
    return root


def _sync(brain: Brain, name: str) -> None:
    assert brain.sources.sync(name, wait=True, timeout=60)["status"] == "done"


def test_a_source_added_without_a_project_takes_the_agents_name_for_it(
        brain: Brain, tmp_path: Path) -> None:
    root = _repo(tmp_path, "billing api")
    plain = tmp_path / "notes folder"
    _w(plain / "todo.md", "zebracache eviction\n")
    brain.sources.add(str(root / "svc"), name="svc")  # a folder inside the work tree
    brain.sources.add(str(plain))
    got = {s["name"]: s["project"] for s in brain.sources.list()}
    hooks_name = project_of({"cwd": str(root / "svc")})  # what an agent there passes
    assert hooks_name == "billing-api"
    assert got == {"svc": hooks_name, "notes folder": "notes-folder"}
    assert brain.sources.add(str(_repo(tmp_path, "other")), project="mine")["source"][
        "project"] == "mine"  # an explicit project is kept

    _sync(brain, "svc")
    page = brain.sources.search("connect_zebracache", "grep", project=hooks_name)
    assert [r["path"] for r in page["results"]] == ["cache.py"] and "hint" not in page


def test_a_project_no_source_belongs_to_answers_none_with_a_hint(
        brain: Brain, tmp_path: Path) -> None:
    empty = brain.sources.search("zebracache", "semantic", project="billing-api")
    assert empty["answer"] == "none" and empty["results"] == []
    assert "brain source add PATH" in empty["hint"]  # nothing indexed yet

    root = _repo(tmp_path, "billing")
    brain.sources.add(str(root), name="code", project="general", sync=False)
    before = brain.sources.list()
    page = brain.sources.search("zebracache", "semantic", project="billing")
    assert page["answer"] == "none" and page["results"] == [] and page["sources"] == []
    assert "code (project general)" in page["hint"]
    assert "brain source update NAME --project billing" in page["hint"]
    grep = brain.sources.search("zebracache", "grep", project="billing")
    assert "answer" not in grep and "code (project general)" in grep["hint"]
    assert brain.sources.list() == before  # a search changes nothing

    brain.sources.update("code", project="billing")  # the hint's fix, followed
    _sync(brain, "code")
    found = brain.sources.search("connect_zebracache", "grep", project="billing")
    assert [r["path"] for r in found["results"]] == ["svc/cache.py"] and "hint" not in found


def test_a_source_never_indexed_says_so_when_it_finds_nothing(
        brain: Brain, tmp_path: Path) -> None:
    """`brain source add` (no server) records the folder and indexes nothing; a search then
    answered none as if nothing matched. Now it names the source and the command."""
    root = _repo(tmp_path, "billing")
    brain.sources.add(str(root), name="code", sync=False)
    for mode in ("semantic", "filter"):
        page = brain.sources.search("zebracache", mode)
        assert page["results"] == [] and page["sources"] == ["code"], mode
        assert "not indexed yet: code" in page["hint"] and "brain sync code" in page["hint"]
    _sync(brain, "code")
    found = brain.sources.search("connect_zebracache", "grep")
    assert found["results"] and "hint" not in found
    assert "hint" not in brain.sources.search("no such words anywhere qqq", "grep")
