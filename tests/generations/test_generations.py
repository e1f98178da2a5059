"""Switching the embedding model by rebuild generations (issue 16, part 2).

The second model is the offline hash embedder with its columns permuted: the same text gets
the same vector within one model, and a vector of the other model scores about 0 against it,
so a query embedded by one model and run against the other generation shows at once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from brain.app import Brain
from brain.clock import ManualClock
from brain.embedding.base import ModelRecord
from brain.embedding.registry import REGISTRY, HashEmbedder
from brain.errors import Conflict
from brain.generations import Target, state
from brain.store.meta import META_ID
from config import Settings
from tests.conftest import _seed_store

OLD = "offline/hash-384"


class Permuted(HashEmbedder):
    """Another model: the hash embedder's features in other columns; counts what it embeds."""

    def __init__(self, dimension: int = 384, model: str = "offline/perm-384") -> None:
        super().__init__(ModelRecord(model, "hash", dimension, (dimension,), 256))
        self.perm = np.random.default_rng(7).permutation(dimension)
        self.texts = 0
        self.lock = threading.Lock()

    def _vector(self, text: str) -> np.ndarray:
        return super()._vector(text)[self.perm]

    def embed_documents(self, texts: Any) -> np.ndarray:
        with self.lock:
            self.texts += len(texts)
        return super().embed_documents(texts)


def _open(settings: Settings, new: HashEmbedder, template: Path | None = None) -> Brain:
    settings.embedding.model = OLD
    settings.embedding.rebuild_batch = 8
    settings.embedding.rebuild_pause_s = 0.0
    if template is not None:
        _seed_store(settings, template)
    old = HashEmbedder(REGISTRY[OLD])
    b = Brain(settings, embedder=old, clock=ManualClock())
    b.embedder_factory = lambda t: new if t.model == new.record.id else old
    return b.open()


@pytest.fixture
def new() -> Permuted:
    return Permuted()


@pytest.fixture
def gb(settings: Settings, new: Permuted, _empty_shard: Path) -> Iterator[Brain]:
    b = _open(settings, new, _empty_shard)
    try:
        yield b
    finally:
        b.close()


def _target(new: HashEmbedder) -> Target:
    return Target(new.record.id, new.dimension)


def _notes(b: Brain, n: int, tag: str = "n") -> list[str]:
    return [b.memory.add(f"{tag} {i} note about topic{i} and word{i * 7}", None).note["zk_id"]
            for i in range(n)]


def _dense_of(embedder: Any, text: str) -> np.ndarray:
    """``text``'s document vector under ``embedder`` (a brain's, or a model not yet active)."""
    return np.asarray(embedder.embed_documents([text])[0])


def _all_stamped(b: Brain, model: str) -> None:
    """Every point with a vector in the active generation carries the active model's vector of
    its own text."""
    from brain.generations.rebuild import dense_text

    pts, off = [], None
    while True:
        page, off = b.store.scroll(None, limit=256, offset=off, with_vectors=True)
        pts += page
        if off is None:
            break
    for p in pts:
        if p.id == META_ID or p.dense is None:
            continue
        assert p.payload.get("embed_model", model) == model, p.payload
        text = dense_text(p.payload)
        assert text is not None
        want = _dense_of(b.embedder, text)
        assert float(np.dot(want, np.asarray(p.dense))) > 0.999, p.payload.get("kind")


def test_switch_rebuilds_notes_sources_and_documents(gb: Brain, new: Permuted,
                                                      tmp_path: Path) -> None:
    zks = _notes(gb, 12)
    root = tmp_path / "src"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nalpha notes about the deployment pipeline\n")
    gb.sources.add(str(root), name="src", project="p", sync=False)
    assert gb.sources.sync("src", wait=True, timeout=60)["status"] == "done"
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nWhen the payment queue backs up, drain it with the replay "
                   "worker.\n")
    assert gb.files.wait(gb.files.ingest(doc)["id"], 60)["status"] == "ready"
    before = gb.store.count(None)

    gb.model_switch.switch(_target(new))
    out = gb.model_switch.wait(60)

    assert out["active"] == 2 and out["previous"] == 1 and out["rebuild"]["status"] == "complete"
    assert {"note", "chunk", "file", "doc_chunk"} <= set(out["rebuild"]["by_kind"])
    assert gb.meta.model == new.record.id and gb.meta.data["generation"] == 2
    assert gb.store.count(None) == before
    _all_stamped(gb, new.record.id)
    hit = gb.memory.search("n 3 note about topic3", 1, stamp=False)
    assert hit and hit[0]["zk_id"] == zks[3]
    # The source's files count as embedded with the new model: a sync re-embeds nothing.
    sid = gb.sources.registry.list()[0].id
    assert {s.embed_model for s in gb.sources.registry.file_states(sid).values()} == {
        new.record.id}
    embedded = new.texts
    assert gb.sources.sync("src", wait=True, timeout=60)["status"] == "done"
    assert new.texts == embedded
    assert gb.files.search("payment queue replay worker", 3)
    stats = gb.stats()["model"]
    assert stats["active"] == new.record.id and stats["generations"]["active"] == 2
    # A start opens the new generation.
    assert state.load(gb.home).active == 2


def test_switch_under_concurrent_searches_and_adds(gb: Brain, new: Permuted) -> None:
    texts = [f"seed {i} about subject{i} and item{i * 3}" for i in range(60)]
    for t in texts:
        gb.memory.add(t, None)
    errors: list[BaseException] = []
    wrong: list[str] = []
    added: list[tuple[str, str]] = []
    stop = threading.Event()

    def searcher(gated: bool) -> None:
        i = 0
        while not stop.is_set():
            t = texts[i % len(texts)]
            i += 1
            try:
                if gated:  # as a tool call runs (mcp_server._gated)
                    with gb.gate.shared():
                        q = gb.embedder.embed_query(t).tolist()
                        hits = gb.store.query_dense(q, None, 1)
                else:  # background work, outside any tool call
                    q = gb.embedder.embed_query(t).tolist()
                    hits = gb.store.query_dense(q, None, 1)
                if not hits or hits[0].score < 0.99:
                    wrong.append(f"{t}: {hits[0].score if hits else None}")
            except BaseException as exc:  # noqa: BLE001 - counted
                errors.append(exc)

    def adder() -> None:
        i = 0
        while not stop.is_set():
            try:
                with gb.gate.shared():
                    text = f"live {i} written during the rebuild word{i}"
                    added.append((gb.memory.add(text, None).note["zk_id"], text))
            except BaseException as exc:  # noqa: BLE001 - counted
                errors.append(exc)
            i += 1
            time.sleep(0.01)

    threads = [threading.Thread(target=searcher, args=(g,)) for g in (True, True, False)]
    threads.append(threading.Thread(target=adder))
    for t in threads:
        t.start()
    time.sleep(0.2)
    gb.model_switch.switch(_target(new))
    out = gb.model_switch.wait(120)
    time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join(30)
    assert out["rebuild"]["status"] == "complete", out
    assert errors == [] and wrong == []
    assert added
    _all_stamped(gb, new.record.id)
    for zk, text in added:  # every note written during the rebuild is found after
        hits = gb.memory.search(text, 3, stamp=False)
        assert zk in [h["zk_id"] for h in hits], text


@contextlib.contextmanager
def _traffic(b: Brain) -> Iterator[None]:
    """Tool calls coming in all the while (mcp_server holds the gate for each)."""
    stop = threading.Event()

    def calls() -> None:
        while not stop.is_set():
            with b.gate.shared():
                time.sleep(0.002)

    t = threading.Thread(target=calls, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(5)


def test_cancel_keeps_the_current_generation(gb: Brain, new: Permuted) -> None:
    _notes(gb, 30)
    gb.settings.embedding.rebuild_pause_s = 0.5  # slow, so the cancel lands mid-way
    gb.model_switch.cfg = type(gb.model_switch.cfg)(batch=4, pause_s=0.5)
    with _traffic(gb):  # the pause applies while tool calls come in
        gb.model_switch.switch(_target(new))
        time.sleep(0.3)
        out = gb.model_switch.cancel()
    assert out["rebuild"]["status"] == "cancelled" and out["active"] == 1
    assert gb.meta.model == OLD
    assert not (gb.home / "store" / "opencode_brain_g2").exists()
    _all_stamped(gb, OLD)
    with pytest.raises(Conflict):
        gb.model_switch.resume()


def test_rollback_and_drop_previous(gb: Brain, new: Permuted) -> None:
    _notes(gb, 10)
    gb.model_switch.switch(_target(new))
    gb.model_switch.wait(60)
    after = gb.memory.add("written after the swap about rollback", None).note["zk_id"]
    out = gb.model_switch.rollback()
    assert out["active"] == 1 and out["previous"] == 2 and gb.meta.model == OLD
    _all_stamped(gb, OLD)
    hits = gb.memory.search("written after the swap about rollback", 3, stamp=False)
    assert after in [h["zk_id"] for h in hits]
    out = gb.model_switch.drop_previous()
    assert out["previous"] is None
    assert not (gb.home / "store" / "opencode_brain_g2").exists()
    with pytest.raises(Conflict):
        gb.model_switch.rollback()


def test_dimension_change(gb: Brain) -> None:
    small = Permuted(64, "offline/perm-64")
    gb.embedder_factory = lambda _t: small
    gb.model_switch.d = type(gb.model_switch.d)(
        **{**gb.model_switch.d.__dict__, "build_embedder": lambda _t: small})
    zks = _notes(gb, 10)
    gb.model_switch.switch(_target(small))
    out = gb.model_switch.wait(60)
    assert out["rebuild"]["status"] == "complete"
    assert gb.meta.dimension == 64 and gb.embedder.dimension == 64
    p = gb.store.retrieve([gb.store.scroll(None, limit=2)[0][-1].id], with_vectors=True)[0]
    assert p.dense is not None and len(p.dense) == 64
    hit = gb.memory.search("n 4 note about topic4", 1, stamp=False)
    assert hit and hit[0]["zk_id"] == zks[4]
    new_zk = gb.memory.add("after the change of dimension", None).note["zk_id"]
    assert new_zk in [h["zk_id"] for h in gb.memory.search("change of dimension", 3,
                                                           stamp=False)]


def test_estimate_changes_nothing(gb: Brain, new: Permuted) -> None:
    _notes(gb, 10)
    before = (gb.store.count(None), (gb.home / "generations.json").read_text())
    out = gb.model_switch.estimate(_target(new))
    assert out["points"] == 10 and out["by_kind"]["note"] == 10 and out["sampled"] == 10
    assert out["time_s"]["low"] <= out["time_s"]["high"]
    assert (gb.store.count(None), (gb.home / "generations.json").read_text()) == before
    assert not (gb.home / "store" / "opencode_brain_g2").exists()


_CHILD = """
import sys, time
from config import load_settings
from tests.generations.test_generations import Permuted, _open, _target, _traffic
settings = load_settings(home=sys.argv[1])
new = Permuted()
b = _open(settings, new)
b.model_switch.cfg = type(b.model_switch.cfg)(batch=5, pause_s=0.3)
with _traffic(b):  # tool calls keep coming: the rebuild paces itself, and is killed mid-way
    b.model_switch.switch(_target(new))
    print("started", flush=True)
    time.sleep(600)
"""


def test_kill_9_pauses_and_resume_redoes_no_finished_batch(
    settings: Settings, new: Permuted, _empty_shard: Path
) -> None:
    b = _open(settings, new, _empty_shard)
    _notes(b, 40)
    b.close()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(settings.home)], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rb = state.load(settings.home).rebuild
            if rb is not None and rb.done >= 10:
                break
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    killed = state.load(settings.home).rebuild
    assert killed is not None and killed.status == "running" and 10 <= killed.done < 40
    done_at_kill = killed.done

    again = Permuted()
    b = _open(settings, again)
    try:
        st = b.model_switch.status()
        assert st["rebuild"]["status"] == "paused" and "interrupted" in st["rebuild"]["reason"]
        assert st["active"] == 1 and b.meta.model == OLD  # never resumed by itself
        time.sleep(0.2)
        assert again.texts == 0
        b.model_switch.resume()
        out = b.model_switch.wait(60)
        assert out["rebuild"]["status"] == "complete" and out["active"] == 2
        # Only what the kill left undone was embedded again: no finished batch twice.
        assert again.texts == 40 - done_at_kill
        _all_stamped(b, again.record.id)
    finally:
        b.close()


def test_restart_opens_the_new_generation_and_rolls_back_after(
    settings: Settings, new: Permuted, _empty_shard: Path
) -> None:
    b = _open(settings, new, _empty_shard)
    zks = _notes(b, 8)
    b.model_switch.switch(_target(new))
    b.model_switch.wait(60)
    after = b.memory.add("written after the swap before the restart", None).note["zk_id"]
    b.close()

    b = Brain(settings, embedder=new, clock=ManualClock())  # a start on the new model
    b.embedder_factory = lambda t: new if t.model == new.record.id else HashEmbedder(
        REGISTRY[OLD])
    b.open()
    try:
        assert b.meta.model == new.record.id and b.meta.data["generation"] == 2
        assert b.pending_model is None
        assert b.memory.search("n 2 note about topic2", 1, stamp=False)[0]["zk_id"] == zks[2]
        later = b.memory.add("written after the restart about rollbacks", None).note["zk_id"]
        out = b.model_switch.rollback()
        assert out["active"] == 1 and b.meta.model == OLD
        _all_stamped(b, OLD)
        for zk, text in ((after, "written after the swap before the restart"),
                         (later, "written after the restart about rollbacks")):
            assert zk in [h["zk_id"] for h in b.memory.search(text, 3, stamp=False)]
    finally:
        b.close()


async def test_model_tools(gb: Brain, new: Permuted) -> None:
    from fastmcp import Client

    from mcp_server import create_server

    _notes(gb, 3)
    async with Client(create_server(profile="full", brain=gb)) as c:
        st = (await c.call_tool("model_status", {})).structured_content
        assert st is not None and st["active"] == 1 and st["rebuild"] is None
        est = (await c.call_tool("model_estimate", {"model": OLD, "dimension": 64}))
        assert est.structured_content is not None
        assert est.structured_content["points"] == 3
        stats = (await c.call_tool("brain_stats", {})).structured_content
        assert stats is not None and stats["model"]["generations"]["active"] == 1


def test_cli_switch_in_the_foreground(settings: Settings, _empty_shard: Path,
                                      monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from brain.cli import main

    b = _open(settings, Permuted(), _empty_shard)
    _notes(b, 3)
    b.close()
    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", OLD)
    target = "sentence-transformers/all-MiniLM-L6-v2"
    monkeypatch.setenv("BRAIN__EMBEDDING__BACKEND", "torch")
    assert main(["model", "estimate", "--model", target]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["points"] == 3 and est["dimension"] == 384
    assert main(["model", "switch", "--model", target]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["active"] == 2 and out["rebuild"]["status"] == "complete"
    assert main(["model", "cancel"]) == 1  # nothing to cancel: said, not a traceback


def test_switch_to_the_loopback_endpoint_changes_dimension(home: Path) -> None:
    """The configured model pending a switch is the target: a remote model on a real
    /v1/embeddings server on loopback, at 64 columns instead of 384."""
    from config import load_settings
    from tests.fake_embeddings import FakeEmbeddings

    local = load_settings(home=home, embedding={"model": OLD, "rebuild_pause_s": 0})
    with Brain(local) as b:
        zk = b.memory.add("kafka consumer lag alarms page the on-call", None).note["zk_id"]
    with FakeEmbeddings(dimension=64) as server:
        remote = load_settings(home=home, embedding={
            "provider": "openai", "model": "fake-embed", "dimension": 64,
            "base_url": server.base_url, "rebuild_pause_s": 0})
        with Brain(remote) as b:
            assert b.pending_model == "openai:fake-embed"
            est = b.model_switch.estimate()
            assert est["dimension"] == 64 and est["tokens"] > 0
            b.model_switch.switch()
            out = b.model_switch.wait(60)
            assert out["rebuild"]["status"] == "complete" and out["pending_switch"] is None
            assert b.meta.dimension == 64 and b.pending_model is None
            assert b.memory.search("kafka consumer lag", 3, stamp=False)[0]["zk_id"] == zk
        with Brain(remote) as b:  # a start opens generation 2 on the endpoint's model
            assert b.meta.model == "openai:fake-embed" and b.pending_model is None
            assert b.memory.search("kafka consumer lag", 3, stamp=False)[0]["zk_id"] == zk


async def test_tool_calls_through_a_switch(gb: Brain, new: Permuted) -> None:
    """search_memory and add_memory over MCP while the rebuild runs and swaps: no error, every
    search finds its note, every note added meanwhile is found after."""
    import anyio
    from fastmcp import Client

    from mcp_server import create_server

    texts = [f"tool {i} note about gadget{i} and part{i * 5}" for i in range(30)]
    for t in texts:
        gb.memory.add(t, None)
    gb.model_switch.cfg = type(gb.model_switch.cfg)(batch=4, pause_s=0.02)
    added: list[tuple[str, str]] = []
    async with Client(create_server(profile="full", brain=gb)) as c:
        gb.model_switch.switch(_target(new))
        i = 0
        while gb.model_switch.rebuilder is not None and i < 400:
            t = texts[i % len(texts)]
            res = await c.call_tool("search_memory", {"query": t, "top_k": 1})
            assert res.structured_content is not None
            assert res.structured_content["results"][0]["title"].startswith(t[:20]), t
            if i % 5 == 0:
                text = f"added {i} during the switch widget{i}"
                res = await c.call_tool("add_memory", {"content": text})
                assert res.structured_content is not None
                added.append((res.structured_content["note"]["zk_id"], text))
            i += 1
            await anyio.sleep(0)
        assert gb.model_switch.wait(60)["rebuild"]["status"] == "complete"
        assert added  # the calls ran while it rebuilt
        for zk, text in added:
            res = await c.call_tool("search_memory", {"query": text, "top_k": 3,
                                                      "detail": "full"})
            assert res.structured_content is not None
            assert zk in [h["zk_id"] for h in res.structured_content["results"]], text
    _all_stamped(gb, new.record.id)


class _HeldWrites:
    """The live generation with its next upsert held until ``release``: the moment between a
    write's log entry and its store write, where a rebuild's drain may read the log."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.entered = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def upsert(self, points: Any) -> None:
        self.entered.set()
        assert self.release.wait(30)
        self.inner.upsert(points)


def test_a_write_in_flight_while_the_drain_reads_reaches_the_new_generation(
    gb: Brain, new: Permuted
) -> None:
    """A write logs its id, then stores it. A drain that read the log in between took the id
    over as gone and consumed it: the acknowledged write never reached the new generation
    (seen once in test_tool_calls_through_a_switch). The drain now reads the log with the
    store's writes held, so it waits for the write in flight and takes it over."""
    import uuid

    from brain.generations.rebuild import Pace, Rebuilder, Reembedder
    from brain.vector_store import Point

    ms, d = gb.model_switch, gb.model_switch.d
    assert ms.tracked is not None
    gen = ms.state.active + 1
    ms.target = target = d.open_generation(gen, new.dimension)  # closed with the brain
    dirty = state.DirtyLog.for_generation(d.home, gen)
    ms.tracked.dirty = dirty
    ms.state.rebuild = state.Rebuild(generation=gen, target=_target(new), status="running",
                                     scrolled=True)
    held = _HeldWrites(ms.tracked.inner)
    ms.tracked.inner = held
    text = "a chunk written while the drain reads widget77"
    point = Point(str(uuid.uuid4()), {"kind": "chunk", "content": text},
                  [float(x) for x in _dense_of(gb.embedder, text)])
    writer = threading.Thread(target=d.guarded.upsert, args=([point],))
    writer.start()
    assert held.entered.wait(30)  # logged, not yet stored
    r = Rebuilder(d.home, ms.state, d.guarded, target, Reembedder(new, new.record.id), dirty,
                  Pace(8, 0.0), d.now, lambda _: None, hold=d.guarded.held)
    drain = threading.Thread(target=r.drain)
    drain.start()
    drain.join(0.5)
    waited = drain.is_alive()
    held.release.set()
    writer.join(30)
    drain.join(30)
    ms.tracked.inner = held.inner
    r.drain()  # whatever is left in the log
    assert waited, "the drain read the log while a logged write was still in flight"
    got = target.retrieve([point.id], with_vectors=True)
    assert [p.id for p in got] == [point.id], "the write in flight missed the new generation"
    assert float(np.dot(_dense_of(new, text), np.asarray(got[0].dense))) > 0.999


def test_a_new_generation_keeps_the_stores_quantization(
    settings: Settings, new: Permuted, _empty_shard: Path
) -> None:
    """A store switched to int8 (health_quantization) stays int8 through a model switch."""
    settings.index.quantization = "int8"
    b = _open(settings, new)
    try:
        assert b.store.quantization() == "int8"
        _notes(b, 5)
        b.model_switch.switch(_target(new))
        b.model_switch.wait(60)
        assert b.meta.model == new.record.id and b.store.quantization() == "int8"
    finally:
        b.close()


def test_under_traffic_the_rebuild_works_its_busy_share_of_the_time() -> None:
    from brain.generations.rebuild import Pace

    pace = Pace(32, 0.2, None, busy_share=0.25)
    assert pace.pause_after(0.3) == pytest.approx(0.9)  # 0.3 s of work, then 0.9 s of rest
    assert pace.pause_after(0.01) == 0.2  # a cheap batch still rests at least pause_s
    assert Pace(32, 0.0, None, busy_share=0.25).pause_after(1.0) == 0.0  # 0 = never yield
    assert Pace(32, 0.2, None, busy_share=1.0).pause_after(5.0) == 0.2
    # Bigger batches while no tool call comes in, the small ones under traffic.
    assert Pace(32, 0.2, None, idle_batch=256).batch_for(busy=False) == 256
    assert Pace(32, 0.2, None, idle_batch=256).batch_for(busy=True) == 32
    assert Pace(32, 0.2).batch_for(busy=False) == 32  # 0 = the batch


def test_the_rebuild_pauses_only_for_live_traffic(gb: Brain, new: Permuted) -> None:
    """Between batches the rebuild pauses only when tool calls came in meanwhile: an idle
    brain rebuilds at full speed, a busy one yields."""
    _notes(gb, 24)
    gb.model_switch.cfg = type(gb.model_switch.cfg)(batch=4, pause_s=0.05)
    gb.model_switch.switch(_target(new))
    idle = gb.model_switch.rebuilder
    gb.model_switch.wait(60)
    assert idle is not None and idle.pauses == 0 and gb.meta.model == new.record.id
    gb.model_switch.rollback()
    gb.model_switch.drop_previous()

    with _traffic(gb):
        gb.model_switch.switch(_target(new))
        busy = gb.model_switch.rebuilder
        gb.model_switch.wait(60)
    assert busy is not None and busy is not idle and busy.pauses >= 3
