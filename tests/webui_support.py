"""Shared by the explorer's tests: a brain seeded through its services, and the explorer
served for real (webui.host.UIHost on a loopback port, in a thread of its own) over it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio

from brain.app import Brain
from brain.trust.identity import Identity, acting_as
from config import Settings, load_settings
from tests.conftest import hash_embedder


def make_brain(base: Path, template: Path) -> tuple[Brain, Settings]:
    """A brain on Qdrant Edge under ``base`` with the deterministic offline embedder."""
    home = base / "home"
    settings = load_settings(home=home)
    settings.embedding.model = "offline/hash-384"
    settings.paths.allowed_roots = [str(base)]
    settings.ui.port = 0
    target = home / "store" / f"{settings.qdrant.collection}_g1"
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-r", "--sparse=always", str(template), str(target)], check=True)
    return Brain(settings, embedder=hash_embedder()).open(), settings


def seed(b: Brain, base: Path, word: str, who: Identity) -> dict[str, Any]:
    """Notes (linked), a handoff, a mistake with its fix, a source of two files and a
    document, all carrying ``word`` and owned by ``who``. Returns their ids and names."""
    with acting_as(who):
        m = b.memory
        hub = m.add(f"{word} caching decision: Redis with a 60 s TTL for session data",
                    "shop", "permanent", "decision", ["cache", word]).note
        other = m.add(f"{word} eviction policy: allkeys-lru keeps the hot keys in Redis",
                      "shop", "permanent", "pattern", ["cache"]).note
        third = m.add(f"{word} deploy runbook: roll the web tier one node at a time",
                      "shop", "permanent", "general", ["ops"]).note
        m.link(hub["zk_id"], other["zk_id"], "related")
        m.link(third["zk_id"], hub["zk_id"], "extends")
        fail = b.mistakes.record_failure(f"{word} pytest ImportError: no module qdrant_edge",
                                         "shop", f"pytest:ImportError:{word}")
        fail_id = fail["note"]["zk_id"]
        b.mistakes.record_failure(f"{word} pytest ImportError again, in CI this time",
                                  "shop", f"pytest:ImportError:{word}")
        b.mistakes.record_resolution(fail_id, f"{word} fix: pip install qdrant-edge-py", "shop")
        b.sessions.close_session("shop", f"{word} set up the cache", ["redis wired"], None,
                                 ["measure hit rate"], ["app/cache.py"], None)
        folder = base / f"src-{word}"
        folder.mkdir(exist_ok=True)
        (folder / f"{word}_cache.py").write_text(f"# {word}\nTTL = 60  # redis cache ttl\n")
        (folder / "notes.md").write_text(f"# {word} notes\nThe cache warms at start.\n")
        src = b.sources.add(str(folder), name=f"{word}-src", project="shop", sync=False)
        b.sources.sync(src["source"]["id"], wait=True, timeout=60)
        doc = base / f"{word}-guide.md"
        doc.write_text(f"# {word} guide\n\nThe cache tier uses Redis; eviction is LRU.\n")
        rec = b.files.ingest(str(doc), project="shop")
        b.files.wait(rec["id"], timeout=60)
    return {"hub": hub["zk_id"], "other": other["zk_id"], "third": third["zk_id"],
            "mistake": fail_id, "source": f"{word}-src", "file_id": rec["id"],
            "file": doc.name}


@contextmanager
def live_ui(b: Brain, settings: Settings) -> Iterator[Any]:
    """The explorer served by webui.host.UIHost on 127.0.0.1:<any port>, as an owner
    serves it (its own event loop, in a thread), until the block ends."""
    from webui.host import UIHost

    host = UIHost(settings, SimpleNamespace(brain=b),
                  Identity(settings.identity.user_id, settings.identity.agent_id))

    async def main(task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            await host.start(tg)
            task_status.started()

    with anyio.from_thread.start_blocking_portal() as portal:
        future, _ = portal.start_task(main)
        try:
            yield host
        finally:
            portal.call(host.stop)
            future.result(timeout=10)


def chromium() -> tuple[str, str] | None:
    """(chromium, chromedriver) on PATH, or None."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None
