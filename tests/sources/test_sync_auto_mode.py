"""[sync] auto: on | off | packages-only decides what background work syncs.

Real parts: Qdrant Edge in a temp dir, the real watcher (watchfiles) on temp folders, the
interval timer's tick on the injected clock. Manual sync works in every mode."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from brain.app import Brain
from brain.clock import ManualClock
from brain.errors import InvalidArgument
from config import Settings
from tests.conftest import _seed_store, hash_embedder


def _w(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


@pytest.fixture
def make_brain(settings: Settings, clock: ManualClock, _empty_shard: Path) -> Iterator:  # noqa: ANN201
    opened: list[Brain] = []

    def make(mode: str) -> Brain:
        settings.embedding.model = "offline/hash-384"
        settings.sync.auto = mode  # type: ignore[assignment]
        _seed_store(settings, _empty_shard)
        b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
        opened.append(b)
        return b

    yield make
    for b in opened:
        b.close()


def _found(b: Brain, word: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if b.sources.search(word, "filter")["count"]:
            return True
        time.sleep(0.05)
    return False


def _trees(tmp_path: Path) -> tuple[Path, Path]:
    pkg, plain = tmp_path / "pkg", tmp_path / "plain"
    _w(pkg, "skills/deploy/SKILL.md", "---\nname: deploy\n---\nDeploy with the wombat script.\n")
    _w(plain, "notes.md", "plain notes about the cache\n")
    return pkg, plain


def test_the_mode_comes_from_the_environment_and_is_checked(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("BRAIN__SYNC__AUTO", "packages-only")
    assert Settings().sync.auto == "packages-only"
    monkeypatch.setenv("BRAIN__SYNC__AUTO", "sometimes")
    with pytest.raises(ValidationError, match="auto"):
        Settings()
    monkeypatch.delenv("BRAIN__SYNC__AUTO")
    assert Settings().sync.auto == "on"


def test_off_means_no_watcher_no_timer_and_manual_sync_still_works(make_brain,  # noqa: ANN001
                                                                    tmp_path: Path,
                                                                    clock: ManualClock) -> None:
    pkg, plain = _trees(tmp_path)
    b = make_brain("off")
    b.sources.add(str(pkg), name="pkg", trigger="auto")  # the first sync of an add is manual
    b.sources.add(str(plain), name="plain", trigger="interval", interval_s=60, sync=False)
    assert b.sources.wait_idle(30)
    assert b.sources.search("wombat", "filter")["count"] == 1
    assert b.sources._watched() == []
    assert b.sources.scheduler_tick() == []
    clock.advance(seconds=3600)
    assert b.sources.scheduler_tick() == []
    assert [s["background_sync"] for s in b.sources.list()] == [False, False]
    time.sleep(0.5)
    _w(pkg, "skills/deploy/more.md", "the numbat checklist\n")
    assert not _found(b, "numbat", 2.0)  # no watcher in "off"
    # A watcher batch that still arrives (sent before a switch) is dropped too.
    b.sources._on_changes(b.sources.get("pkg").id, {"skills/deploy/more.md"}, False)
    assert b.sources.wait_idle(30) and b.sources.search("numbat", "filter")["count"] == 0
    # Manual work: a targeted sync and a full one.
    b.sources.sync("pkg", paths=["skills/deploy/more.md"], wait=True, timeout=60)
    assert b.sources.search("numbat", "filter")["count"] == 1
    assert b.sources.sync("plain", wait=True, timeout=60)["status"] == "done"
    assert b.sources.search("cache", "filter")["count"] == 1


def test_off_skips_the_catch_up_at_start(make_brain, tmp_path: Path,  # noqa: ANN001
                                         settings: Settings) -> None:
    pkg, _ = _trees(tmp_path)
    b = make_brain("on")
    b.sources.add(str(pkg), name="pkg", trigger="auto", sync=False)
    b.close()
    b = make_brain("off")
    assert b.sources.wait_idle(30)
    assert b.sources.jobs("pkg") == []  # "on" would have queued a startup sync
    b.close()
    b = make_brain("on")
    assert b.sources.wait_idle(60)
    assert [j["reason"] for j in b.sources.jobs("pkg")] == ["startup"]


def test_packages_only_syncs_pinned_sources_in_the_background(make_brain,  # noqa: ANN001
                                                              tmp_path: Path,
                                                              clock: ManualClock) -> None:
    pkg, plain = _trees(tmp_path)
    manifest = tmp_path / "manifest"
    _w(manifest, "package.json", '{"name": "tool", "version": "1.0.0"}')
    b = make_brain("packages-only")
    for root in (pkg, plain, manifest):
        b.sources.add(str(root), name=root.name, trigger="auto")
    assert b.sources.wait_idle(30)
    watched = {w.source_id for w in b.sources._watched()}
    ids = {n: b.sources.get(n).id for n in ("pkg", "plain", "manifest")}
    assert watched == {ids["pkg"], ids["manifest"]}  # package content pins by default
    listed = {s["name"]: s["background_sync"] for s in b.sources.list()}
    assert listed == {"pkg": True, "plain": False, "manifest": True}
    time.sleep(1.0)  # the watcher restarts on the new set
    _w(pkg, "skills/deploy/more.md", "the numbat checklist\n")
    _w(plain, "more.md", "the bilby notes\n")
    assert _found(b, "numbat", 10.0)
    assert not _found(b, "bilby", 1.5)
    # Pinned by hand: the plain source joins; unpinned by hand: the package one leaves.
    b.sources.update("plain", pinned=True)
    b.sources.update("pkg", pinned=False)
    assert {w.source_id for w in b.sources._watched()} == {ids["plain"], ids["manifest"]}
    # Interval sources: the timer honours the same rule.
    b.sources.update("plain", trigger="interval", interval_s=60)
    b.sources.update("pkg", trigger="interval", interval_s=60)
    assert b.sources.wait_idle(30)
    clock.advance(seconds=61)
    assert b.sources.scheduler_tick() == ["plain"]


def test_a_first_sync_that_finds_package_content_starts_the_watch(make_brain,  # noqa: ANN001
                                                                  tmp_path: Path) -> None:
    plain = tmp_path / "later"
    _w(plain, "notes.md", "nothing packaged yet\n")
    b = make_brain("packages-only")
    b.sources.add(str(plain), name="later", trigger="auto")
    assert b.sources.wait_idle(30) and b.sources._watched() == []
    _w(plain, "SKILL.md", "---\nname: later\n---\nthe quoll skill\n")
    b.sources.sync("later", wait=True, timeout=60)  # manual: finds the skill, pins the source
    assert [w.source_id for w in b.sources._watched()] == [b.sources.get("later").id]


def test_switching_the_mode_at_run_time_catches_up(make_brain, tmp_path: Path) -> None:  # noqa: ANN001
    pkg, plain = _trees(tmp_path)
    b = make_brain("off")
    b.sources.add(str(pkg), name="pkg", trigger="auto", sync=False)
    b.sources.add(str(plain), name="plain", trigger="auto", sync=False)
    with pytest.raises(InvalidArgument):
        b.sources.set_auto_mode("sometimes")
    assert b.sources.auto_mode == "off"
    assert sorted(b.sources.set_auto_mode("on")) == ["pkg", "plain"]
    assert b.sources.wait_idle(30)
    assert b.sources.search("wombat", "filter")["count"] == 1
    assert [j["reason"] for j in b.sources.jobs("plain")] == ["auto mode"]
    assert b.sources.set_auto_mode("on") == []  # nothing newly let through


async def test_the_sources_tool_sets_pinned_and_lists_background_sync(make_brain,  # noqa: ANN001
                                                                      tmp_path: Path) -> None:
    from fastmcp import Client

    from mcp_server import create_server

    _, plain = _trees(tmp_path)
    b = make_brain("packages-only")
    async with Client(create_server(profile="full", brain=b)) as client:
        await client.call_tool("sources", {"action": "add", "path": str(plain),
                                           "name": "plain", "trigger": "auto"})
        assert b.sources.wait_idle(30)
        listed = (await client.call_tool("sources", {"action": "list"})).structured_content
        assert [(s["pinned"], s["background_sync"]) for s in listed["sources"]] == [(None, False)]
        await client.call_tool("sources", {"action": "update", "source": "plain",
                                           "pinned": True})
        listed = (await client.call_tool("sources", {"action": "list"})).structured_content
        assert [(s["pinned"], s["background_sync"]) for s in listed["sources"]] == [(True, True)]
