from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from brain.errors import PathOutsideSource
from brain.sources.filters import SourceFilter
from brain.sources.walker import (
    MAX_FILE_BYTES,
    count_display,
    is_binary,
    read_text_capped,
    resolve_in_source,
    walk_source,
)
from tests.timing import CpuClock


def _write(root: Path, rel: str, data: str | bytes = "x\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def _rels(root: Path, **kw) -> list[str]:
    return sorted(f.rel for f in walk_source(root, SourceFilter(root, [], []), **kw).files)


def test_walk_prunes_excluded_dirs_and_floor(tmp_path: Path) -> None:
    _write(tmp_path, "src/app.py")
    _write(tmp_path, "node_modules/react/index.js")
    _write(tmp_path, "web/node_modules/x/y.js")
    _write(tmp_path, ".ssh/id_rsa")
    _write(tmp_path, ".config/google-chrome/Default/Login Data")
    _write(tmp_path, ".env")
    res = walk_source(tmp_path, SourceFilter(tmp_path, [], ["**/*"]))
    assert [f.rel for f in res.files] == ["src/app.py"]
    assert res.skipped["excluded_dir"] >= 3
    entry = res.files[0]
    assert entry.path == tmp_path / "src/app.py"
    assert entry.size == 2 and entry.mtime_ns > 0


def test_symlinks_never_escape_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    root = tmp_path / "root"
    _write(outside, "secret.txt", "top secret")
    _write(root, "real.txt")
    _write(root, "sub/inner.txt")
    os.symlink(outside / "secret.txt", root / "escape.txt")
    os.symlink(outside, root / "escape_dir")
    os.symlink(root / "real.txt", root / "alias.txt")
    os.symlink(root, root / "sub" / "loop")  # a cycle must not hang the walk
    res = walk_source(root, SourceFilter(root, [], []))
    rels = sorted(f.rel for f in res.files)
    assert rels == ["alias.txt", "real.txt", "sub/inner.txt"]
    assert res.skipped["symlink_outside"] == 2
    assert res.skipped["symlink_dir"] == 1


def test_size_caps(tmp_path: Path) -> None:
    _write(tmp_path, "big.txt", b"a" * (MAX_FILE_BYTES + 1))
    _write(tmp_path, "big.jsonl", b"{}\n" * ((MAX_FILE_BYTES + 10) // 3))
    _write(tmp_path, "small.txt")
    res = walk_source(tmp_path, SourceFilter(tmp_path, [], []))
    assert sorted(f.rel for f in res.files) == ["big.jsonl", "small.txt"]
    assert res.skipped["too_large"] == 1


def test_binary_detection(tmp_path: Path) -> None:
    binary = _write(tmp_path, "blob.dat", b"abc\x00def" * 10)
    text = _write(tmp_path, "notes.txt", "héllo\n")
    assert is_binary(binary) and not is_binary(text)
    assert read_text_capped(binary) == (None, False)
    assert read_text_capped(text) == ("héllo\n", False)
    assert _rels(tmp_path, check_binary=True) == ["notes.txt"]
    assert _rels(tmp_path) == ["blob.dat", "notes.txt"]


def test_read_text_capped_truncates(tmp_path: Path) -> None:
    path = _write(tmp_path, "long.txt", "é" * 1000)
    text, truncated = read_text_capped(path, max_chars=100)
    assert text == "é" * 100 and truncated
    assert read_text_capped(path, max_chars=1000) == ("é" * 1000, False)


def test_scan_cap_sets_capped(tmp_path: Path) -> None:
    for i in range(30):
        _write(tmp_path, f"d{i % 3}/f{i}.txt")
    res = walk_source(tmp_path, SourceFilter(tmp_path, [], []), max_files=10)
    assert len(res.files) == 10 and res.capped
    assert count_display(len(res.files), res.capped) == "10+"
    assert res.count_display == "10+"
    exact = walk_source(tmp_path, SourceFilter(tmp_path, [], []), max_files=30)
    assert len(exact.files) == 30 and not exact.capped
    assert count_display(30, False) == "30"


def test_cancel_stops_walk(tmp_path: Path) -> None:
    _write(tmp_path, "a/b.txt")
    cancel = threading.Event()
    cancel.set()
    res = walk_source(tmp_path, SourceFilter(tmp_path, [], []), cancel=cancel)
    assert res.cancelled and res.files == []


def test_walk_is_fast_on_ten_thousand_files(tmp_path: Path) -> None:
    for d in range(100):
        folder = tmp_path / f"pkg{d}"
        folder.mkdir()
        for f in range(100):
            (folder / f"m{f}.py").write_text("x")
    nm = tmp_path / "node_modules" / "big"
    nm.mkdir(parents=True)
    for f in range(2000):
        (nm / f"{f}.js").write_text("x")
    clock = CpuClock()  # CPU time (syscalls included): a loaded box stretches only the wall
    res = walk_source(tmp_path, SourceFilter(tmp_path, [], []))
    used = clock.used()
    assert len(res.files) == 10_000
    assert used < 5.0, used


def test_resolve_in_source(tmp_path: Path) -> None:
    _write(tmp_path, "a/b.txt")
    assert resolve_in_source(tmp_path, "a/b.txt") == (tmp_path / "a/b.txt").resolve()
    with pytest.raises(PathOutsideSource):
        resolve_in_source(tmp_path, "../etc/passwd")
    with pytest.raises(PathOutsideSource):
        resolve_in_source(tmp_path / "a", tmp_path)
