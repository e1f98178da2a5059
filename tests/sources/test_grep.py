from __future__ import annotations

from pathlib import Path

import pytest

from brain.errors import InvalidArgument
from brain.sources.filters import SourceFilter
from brain.sources.grep import available_engines, find_rg, grep

ENGINES = available_engines()
SECRET = "NEEDLE_SECRET_42"


def _write(root: Path, rel: str, data: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    _write(tmp_path, "src/app.py", "def main():\n    return 'hello world'  # NEEDLE\n")
    _write(tmp_path, "src/util.py", "x = compute(1)\nNEEDLE = 3\n")
    _write(tmp_path, "docs/guide.md", "Use the needle wisely.\n")
    _write(tmp_path, "node_modules/pkg/index.js", "NEEDLE in deps\n")
    _write(tmp_path, "generated/out.txt", "NEEDLE generated\n")
    _write(tmp_path, "blob.bin", b"NEEDLE\x00\x01\x02")
    # credential stores and secrets, which an include rule explicitly asks for
    for rel in [
        ".ssh/id_rsa",
        ".aws/credentials",
        ".env",
        ".config/google-chrome/Default/Login Data",
        ".config/google-chrome/Default/Preferences",
        "certs/site.pem",
        "home/.mozilla/firefox/x.default-release/logins.json",
    ]:
        _write(tmp_path, rel, f"{SECRET} NEEDLE\n")
    (tmp_path / ".gitignore").write_text("generated/\n")
    return tmp_path


def _roots(tree: Path, **kw) -> list[tuple[Path, SourceFilter]]:
    return [(tree, SourceFilter(tree, kw.get("exclude", []), kw.get("include", [])))]


def _paths(result) -> set[str]:
    return {h.path for h in result.hits}


def test_rg_is_found() -> None:
    assert find_rg() is not None, "pip install ripgrep puts rg next to the venv's python"
    assert ENGINES[0] == "rg"


@pytest.mark.parametrize("engine", ENGINES)
def test_literal_and_regex(tree: Path, engine: str) -> None:
    res = grep(_roots(tree), "NEEDLE", fixed=True, engine=engine)
    assert res.engine == engine
    assert _paths(res) == {"src/app.py", "src/util.py"}
    hit = next(h for h in res.hits if h.path == "src/util.py")
    assert hit.line == 2 and hit.text == "NEEDLE = 3"
    assert hit.abs == tree / "src/util.py"
    res = grep(_roots(tree), r"compute\(\d+\)", engine=engine)
    assert [(h.path, h.line) for h in res.hits] == [("src/util.py", 1)]
    res = grep(_roots(tree), "needle", case_insensitive=True, engine=engine)
    assert _paths(res) == {"src/app.py", "src/util.py", "docs/guide.md"}


@pytest.mark.parametrize("engine", ENGINES)
def test_floor_and_excludes_hold_against_include(tree: Path, engine: str) -> None:
    include = [".ssh/**", ".aws/**", ".env", "*.pem", "**/Login Data", "**/*"]
    res = grep(_roots(tree, include=include), "NEEDLE", engine=engine)
    assert all(SECRET not in h.text for h in res.hits)
    assert _paths(res) == {"src/app.py", "src/util.py"}
    res = grep(_roots(tree, exclude=["src/util.py"]), "NEEDLE", engine=engine)
    assert _paths(res) == {"src/app.py"}


@pytest.mark.parametrize("engine", ENGINES)
def test_glob_and_include_narrow(tree: Path, engine: str) -> None:
    res = grep(_roots(tree), "needle", case_insensitive=True, glob="*.md", engine=engine)
    assert _paths(res) == {"docs/guide.md"}
    res = grep(_roots(tree, include=["docs/"]), "needle", case_insensitive=True, engine=engine)
    assert _paths(res) == {"docs/guide.md"}


@pytest.mark.parametrize("engine", ENGINES)
def test_bad_regex_is_invalid_argument(tree: Path, engine: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        grep(_roots(tree), "foo(bar", engine=engine)
    assert info.value.code == "INVALID_ARGUMENT"
    assert "fixed=true" in info.value.message
    assert grep(_roots(tree), "foo(bar", fixed=True, engine=engine).hits == []


@pytest.mark.parametrize("engine", ENGINES)
def test_max_results_truncates(tmp_path: Path, engine: str) -> None:
    _write(tmp_path, "many.txt", "hit\n" * 50)
    res = grep(_roots(tmp_path), "hit", max_results=7, engine=engine)
    assert len(res.hits) == 7 and res.truncated
    res = grep(_roots(tmp_path), "hit", max_results=50, engine=engine)
    assert len(res.hits) == 50 and not res.truncated


def test_long_lines_are_snipped_around_the_match(tmp_path: Path) -> None:
    _write(tmp_path, "min.js", "a" * 1500 + "TARGET" + "b" * 1500 + "\n")
    (hit,) = grep(_roots(tmp_path), "TARGET").hits
    assert len(hit.text) <= 300 and "TARGET" in hit.text


def test_several_roots_and_bad_arguments(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, "x.txt", "shared\n")
    _write(b, "y.txt", "shared\n")
    roots = [(a, SourceFilter(a, [], [])), (b, SourceFilter(b, [], []))]
    res = grep(roots, "shared")
    assert {(h.root, h.path) for h in res.hits} == {(a, "x.txt"), (b, "y.txt")}
    with pytest.raises(InvalidArgument):
        grep(roots, "")
    with pytest.raises(InvalidArgument):
        grep(roots, "x", max_results=0)
    with pytest.raises(InvalidArgument):
        grep(roots, "x", engine="ag")


def test_timeout_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "a.txt", "x\n")
    res = grep(_roots(tmp_path), "x", timeout_s=0.0, engine="python")
    assert res.timed_out or res.hits  # a 0.1 s floor may still let a tiny tree finish
