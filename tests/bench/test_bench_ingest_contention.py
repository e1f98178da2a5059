"""bench/ingest_contention.py on a tiny document and source (the offline hash embedder):
``--search-only`` keeps the brain's size through the busy phases, so the idle it is compared
with is the same brain; the default client's adds grow it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import ingest_contention


def test_search_only_keeps_the_brain_its_idle_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    res = ingest_contention.run(tmp_path, True, log=lambda _m: None, files=20, window_s=60,
                                doc_bytes=20_000, adds=False, idle_calls=10)["yield"]
    assert res["idle"]["search_memory"]["n"] >= 10 and res["idle"]["add_memory"]["n"] == 0
    for phase in ("document", "sync"):
        assert res[phase]["add_memory"]["n"] == 0
        assert "p99_vs_idle" in res[phase]["search_memory"]
    assert res["sync"]["status"] == "done" and res["sync"]["files_done"] == 20
