"""bench/cli_contention.py on a tiny source: a real stdio server owns the brain, an MCP client
calls it while the real CLI adds a source and syncs it through the owner (seconds, the
offline hash embedder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import cli_contention


def test_a_cli_sync_runs_through_the_owner_while_the_agent_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    res = cli_contention.run(tmp_path, True, log=lambda _m: None, files=30, window_s=120,
                             idle_calls=4)
    assert res["idle"]["failed"] == 0 and res["idle"]["search_memory"]["n"] >= 4
    sync = res["sync"]
    assert sync["failed"] == 0, sync["failures"]
    assert sync["cli_exit"] == 0 and not sync["cancelled_at_window"], sync
    assert sync["job"]["status"] == "done", sync["job"]
    assert sync["job"]["progress"]["files_done"] == 30, sync["job"]
