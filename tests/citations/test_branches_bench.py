"""bench/through_time_branches.py on a short scripted history: the figures BENCHMARKS.md
reports come from code that runs (real git, Qdrant Edge, the hooks' own turn functions)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import through_time_branches

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def test_the_branch_bench_leaks_nothing_and_promotes_or_archives_every_settled_branch(
        tmp_path: Path) -> None:
    out = through_time_branches.run(tmp_path, branches=8, log=lambda *_: None)
    c = out["counts"]
    assert out["merged"] >= 3 and out["abandoned"] >= 1 and out["hooked_branches"] >= 2
    assert c["leak_checks"] > 0 and c["leaks"] == 0
    assert c["promoted"] == c["promoted_found"] == c["merged_notes"] > 0
    assert c["archived"] == c["abandoned_notes"] > 0
    assert c["own_found"] == c["own_checks"] and c["wrong_moves"] == 0
    assert c["hook_notes"] > 0 and c["wide_found"] == c["wide_checks"]
    assert "| 0 / " in through_time_branches.section(out)
