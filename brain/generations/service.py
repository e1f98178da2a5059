"""``brain model estimate|switch|status|cancel|resume|rollback|drop-previous``.

A switch builds generation N+1 (collection ``<name>_g<N+1>``) with the new model in a
background thread, at ``[rebuild]`` pace, while generation N keeps serving every read and
write; writes meanwhile are logged (state.DirtyLog) and taken over. When the scroll pass is
done and few dirty ids remain, the swap holds the gate alone (no tool call or embed runs) and
the store's writes, takes over the last ids, points the store and the embedder at the new
generation, and records it as active: a start opens it from then on. Generation N stays on
disk, and the writes made after the swap are logged for it, so a rollback swaps back without
losing them; ``drop-previous`` deletes it.

A kill -9 leaves the state "running" on disk: the next start marks it paused (never resumes
by itself); ``resume`` carries on from the checkpoint, the last finished batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from brain.embedding.registry import Embedder
from brain.errors import ActionInProgress, Conflict, InvalidArgument
from brain.generations import state as st
from brain.generations.live import Gate, SwitchableEmbedder, TrackedStore
from brain.generations.rebuild import Pace, Rebuilder, Reembedder, dense_text, take_over
from brain.store.guarded import GuardedStore
from brain.store.integrity import Manifest, store_location
from brain.store.meta import META_ID, StoreMeta
from brain.vector_store import Filter, Match, Point, VectorStore

log = logging.getLogger(__name__)

SAMPLE = 32  # texts an estimate embeds


@dataclass(frozen=True)
class SwitchDeps:
    home: Path
    guarded: GuardedStore  # the store the services hold, the outermost layer of the stack
    tracked: TrackedStore  # the stack's layer over the live generation (built by brain/app.py)
    embedder: SwitchableEmbedder  # the embedder the services hold
    meta: StoreMeta
    gate: Gate
    open_generation: Callable[[int, int], VectorStore]  # (generation, dimension) -> opened
    drop_generation: Callable[[VectorStore | None, int], None]  # closes and deletes it
    build_embedder: Callable[[st.Target], Embedder]
    pending: Callable[[], st.Target | None]  # the configured model when it is not the active
    on_swap: Callable[[str], None]  # the new active model id, for the services' stamps
    now: Callable[[], str]


@dataclass(frozen=True)
class SwitchConfig:
    batch: int = 64
    pause_s: float = 0.05
    busy_share: float = 1.0  # while tool calls come in, the rebuild works this share of time
    idle_batch: int = 0  # points per batch while none come in (0 = batch)
    pool_long_text: bool = True


class ModelSwitch:
    def __init__(self, deps: SwitchDeps, cfg: SwitchConfig) -> None:
        self.d = deps
        self.cfg = cfg
        self.state = st.load(deps.home)
        self.rebuilder: Rebuilder | None = None
        self.target: VectorStore | None = None  # the generation being built, while open
        self.previous: VectorStore | None = None  # the generation before the swap, while open
        self._lock = threading.RLock()  # one command at a time
        # The embedding endpoint registry, so a command may name endpoint:<id>:<model>.
        self.endpoints: Mapping[str, Any] = {}
        # The configured embedding provider: a command's named model is looked up there.
        self.provider = "local"
        self.tracked = deps.tracked

    # ------------------------------------------------------------------ lifecycle
    def attach(self) -> None:
        """Start logging the writes a kept generation must take over; an interrupted rebuild
        is paused."""
        s = self.state
        before = s.as_dict()
        s.active_model = s.active_model or self.d.meta.model
        s.active_dimension = s.active_dimension or self.d.meta.dimension
        rb = s.rebuild
        if rb is not None and rb.status in ("queued", "running"):
            rb.status, rb.reason = "paused", "interrupted: the process stopped mid-rebuild; " \
                "`brain model resume` carries on from the last finished batch"
        if s.as_dict() != before:
            st.save(self.d.home, s)
        self.tracked.serve(self.tracked.inner, self._dirty(), epoch=self.d.embedder.epoch,
                           model=self.d.meta.model, reembed=None, previous=None)

    def _dirty(self) -> st.DirtyLog | None:
        rb = self.state.rebuild
        if rb is not None and rb.status in st.ACTIVE_STATUSES:
            return st.DirtyLog.for_generation(self.d.home, rb.generation)
        if self.state.previous is not None:
            return st.DirtyLog.for_generation(self.d.home, self.state.previous)
        return None

    def close(self) -> None:
        with self._lock:
            self._stop_rebuilder("stopped with the server; `brain model resume` carries on")
            for store in (self.target, self.previous):
                if store is not None:
                    store.close()
            self.target = self.previous = None
            self.tracked.forget_previous()

    def _stop_rebuilder(self, reason: str) -> None:
        r = self.rebuilder
        if r is None:
            return
        r.stop.set()
        r.join(timeout=60)
        self.rebuilder = None
        if r.rb.status == "running":
            r._save(status="paused", reason=reason)

    # ------------------------------------------------------------------ reporting
    def status(self) -> dict[str, Any]:
        s = self.state
        out = s.as_dict()
        rb = s.rebuild
        if rb is not None and rb.status in st.ACTIVE_STATUSES:
            out["rebuild"]["dirty_pending"] = st.DirtyLog.for_generation(
                self.d.home, rb.generation).pending()
            if rb.total:
                out["rebuild"]["progress"] = round(min(1.0, rb.done / rb.total), 4)
        pending = self.d.pending()
        out["pending_switch"] = pending.model if pending else None
        out["can_rollback"] = s.previous is not None and (rb is None or rb.status not in
                                                           st.ACTIVE_STATUSES)
        return out

    def estimate(self, model: st.Target | None = None) -> dict[str, Any]:
        """Counts per kind, a sample embedded with the target model, timed: a time range and,
        for a remote model, a token count. Writes nothing."""
        target = model or self.d.pending()
        if target is None:
            raise InvalidArgument("no model to estimate: configure embedding.model to the new "
                                  "model, or pass --model", field="model")
        store = self.d.guarded
        kinds: dict[str, int] = {}
        for kind in ("note", "chunk", "file", "doc_chunk"):
            kinds[kind] = int(store.count(_kind(kind)))
        total = int(store.count(None)) - 1  # the meta record
        texts = [t for p in store.scroll(None, limit=SAMPLE * 2)[0]
                 if p.id != META_ID and (t := dense_text(p.payload)) is not None][:SAMPLE]
        emb = self.d.build_embedder(target)
        per_text = 0.0
        if texts:
            t0 = time.perf_counter()
            emb.embed_documents(texts)
            per_text = (time.perf_counter() - t0) / len(texts)
        batches = -(-max(0, total) // self.cfg.batch)
        base = per_text * max(0, total)  # an idle brain: no pause between batches
        # Live traffic after every batch: the rebuild yields (1 - share) of its time.
        busy = max(base + batches * self.cfg.pause_s, base / self.cfg.busy_share)
        out: dict[str, Any] = {
            "model": target.model, "dimension": emb.dimension, "provider": target.provider,
            "points": max(0, total), "by_kind": kinds, "sampled": len(texts),
            "seconds_per_text": round(per_text, 5),
            "time_s": {"low": round(base * 0.8, 1), "high": round(busy * 1.5 + 1, 1)},
        }
        if target.provider != "local" and texts:
            sample_tokens = sum(emb.count_tokens(t) for t in texts)
            out["tokens"] = int(sample_tokens / len(texts) * max(0, total))
        return out

    # ------------------------------------------------------------------ commands
    def switch(self, model: st.Target | None = None) -> dict[str, Any]:
        with self._lock:
            s = self.state
            target = model or self.d.pending()
            if target is None:
                raise InvalidArgument("no model to switch to: set embedding.model to the new "
                                      "model (it shows as pending_switch), or pass --model",
                                      field="model")
            if target.model == self.d.meta.model:
                raise InvalidArgument(f"{target.model} is already the active model",
                                      field="model")
            if s.rebuild is not None and s.rebuild.status in st.ACTIVE_STATUSES:
                raise ActionInProgress(f"a rebuild to {s.rebuild.target.model} is "
                                       f"{s.rebuild.status}: `brain model cancel` it first")
            if s.previous is not None:
                raise Conflict(f"generation {s.previous} ({s.previous_model}) is still kept "
                               "for rollback: `brain model drop-previous` first")
            emb = self.d.build_embedder(target)  # refused here: a missing key, a bad dimension
            target = st.Target(target.model, emb.dimension, target.provider)
            gen = s.active + 1
            log_ = st.DirtyLog.for_generation(self.d.home, gen)
            log_.remove()
            s.rebuild = st.Rebuild(generation=gen, target=target, status="queued",
                                   total=max(0, int(self.d.guarded.count(None)) - 1),
                                   started_at=self.d.now())
            st.save(self.d.home, s)
            self.tracked.log_to(log_)  # from here on, every write is logged for gen N+1
            self._start(emb)
            return self.status()

    def resume(self) -> dict[str, Any]:
        with self._lock:
            rb = self.state.rebuild
            if rb is None or rb.status != "paused":
                raise Conflict("no paused rebuild to resume: `brain model status` shows it")
            emb = self.d.build_embedder(rb.target)
            self._start(emb)
            return self.status()

    def _start(self, emb: Embedder) -> None:
        rb = self.state.rebuild
        assert rb is not None
        if self.target is None:
            self.target = self.d.open_generation(rb.generation, rb.target.dimension)
        reembed = Reembedder(emb, rb.target.model, self.cfg.pool_long_text)
        self.rebuilder = Rebuilder(
            self.d.home, self.state, self.d.guarded, self.target, reembed,
            st.DirtyLog.for_generation(self.d.home, rb.generation),
            Pace(self.cfg.batch, self.cfg.pause_s, lambda: self.d.gate.entered,
                 self.cfg.busy_share, self.cfg.idle_batch), self.d.now,
            self._swap, hold=self.d.guarded.held)
        self.rebuilder.start()

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until the running rebuild ends (the CLI's foreground switch, tests)."""
        r = self.rebuilder
        if r is not None:
            r.join(timeout)
        return self.status()

    def cancel(self) -> dict[str, Any]:
        with self._lock:
            rb = self.state.rebuild
            if rb is None or rb.status not in st.ACTIVE_STATUSES:
                raise Conflict("no rebuild to cancel: `brain model status` shows it")
            self._stop_rebuilder("cancelled")
            if rb.status == "complete":
                raise Conflict("the rebuild completed before the cancel: `brain model "
                               "rollback` goes back")
            self.tracked.log_to(None)
            st.DirtyLog.for_generation(self.d.home, rb.generation).remove()
            self.d.drop_generation(self.target, rb.generation)
            self.target = None
            rb.status, rb.reason, rb.finished_at = "cancelled", "cancelled", self.d.now()
            st.save(self.d.home, self.state)
            return self.status()

    def rollback(self) -> dict[str, Any]:
        with self._lock:
            s = self.state
            if s.previous is None:
                raise Conflict("no previous generation to roll back to")
            if s.rebuild is not None and s.rebuild.status in st.ACTIVE_STATUSES:
                raise ActionInProgress("a rebuild is in progress: cancel it first")
            prev = self.previous or self.d.open_generation(s.previous, s.previous_dimension)
            meta = prev.retrieve([META_ID])
            model = str(meta[0].payload.get("model", s.previous_model)) if meta else \
                s.previous_model
            dim = int(meta[0].payload.get("dimension", 0)) if meta else 0
            emb = self.d.build_embedder(st.Target(model, dim))
            reembed = Reembedder(emb, model, self.cfg.pool_long_text)
            dirty = st.DirtyLog.for_generation(self.d.home, s.previous)
            self.previous = None
            self._swap_to(s.previous, prev, reembed, dirty, s.previous_model or model)
            return self.status()

    def drop_previous(self) -> dict[str, Any]:
        with self._lock:
            s = self.state
            if s.previous is None:
                raise Conflict("no previous generation to drop")
            self.tracked.log_to(None)
            self.tracked.forget_previous()
            st.DirtyLog.for_generation(self.d.home, s.previous).remove()
            self.d.drop_generation(self.previous, s.previous)
            self.previous = None
            s.previous, s.previous_model, s.previous_dimension = None, "", 0
            st.save(self.d.home, s)
            return self.status()

    # ------------------------------------------------------------------ the swap
    def _swap(self, r: Rebuilder) -> None:
        """Called by the rebuild thread when the scroll pass is done and few ids are dirty."""
        assert self.target is not None
        rb = r.rb
        self._swap_to(rb.generation, self.target, r.reembed, r.dirty, rb.target.model,
                      rebuilder=r)
        self.target = None
        self.rebuilder = None

    def _swap_to(self, gen: int, store: VectorStore, reembed: Reembedder, dirty: st.DirtyLog,
                 model: str, rebuilder: Rebuilder | None = None) -> None:
        """Make ``store`` (generation ``gen``, of ``model``) the active generation."""
        d, s = self.d, self.state
        with d.gate.exclusive(), d.guarded.paused():
            if rebuilder is not None:
                if rebuilder.stop.is_set():
                    return  # cancelled or closing: the live generation stays
                rebuilder.drain_all()
            else:
                _drain(dirty, d.guarded, store, reembed)
            payload = {**d.meta.data, "model": model, "dimension": reembed.embedder.dimension,
                       "generation": gen}
            store.upsert([Point(META_ID, payload)])
            store.flush()
            old, old_gen, old_model = self.tracked.inner, s.active, d.meta.model
            dim = reembed.embedder.dimension
            done = replace(s, active=gen, active_model=model, active_dimension=dim,
                           previous=old_gen, previous_model=old_model,
                           previous_dimension=d.meta.dimension)
            if s.rebuild is not None and rebuilder is not None:
                done.rebuild = replace(s.rebuild, status="complete", reason="",
                                       finished_at=d.now())
            back = st.DirtyLog.for_generation(d.home, old_gen)
            back.remove()
            st.save(d.home, done)  # the decision: from here on a start opens generation gen
            manifest = Manifest(d.home, store_location(store, d.home))
            try:
                manifest.save(int(store.count(None)))
            except OSError as exc:  # a start records a new baseline for the new location
                log.warning("cannot record the new generation in the manifest: %s", exc)
            # Nothing below can fail: the pointers move together, under the hold.
            d.embedder.switch(reembed.embedder)
            active = Reembedder(reembed.embedder, model, self.cfg.pool_long_text)
            self.tracked.serve(store, back, epoch=d.embedder.epoch, model=model,
                               reembed=active, previous=old)
            d.guarded.follow(manifest)
            d.meta.data.update(payload)
            self.previous = old
            rb = s.rebuild
            s.__dict__.update({k: v for k, v in done.__dict__.items() if k != "rebuild"})
            if rb is not None and done.rebuild is not None and rebuilder is not None:
                rb.status, rb.reason, rb.finished_at = "complete", "", done.rebuild.finished_at
            dirty.remove()
            d.on_swap(model)
        log.info("embedding model switched: %s (generation %d) -> %s (generation %d)",
                 old_model, old_gen, model, gen)


def _drain(dirty: st.DirtyLog, source: Any, target: VectorStore, reembed: Reembedder) -> None:
    ids, upto = dirty.read()
    for i in range(0, len(ids), 64):
        take_over(ids[i : i + 64], source, target, reembed)
    dirty.consume(upto)


def _kind(kind: str) -> Filter:
    return Filter(must=(Match("kind", kind),))
