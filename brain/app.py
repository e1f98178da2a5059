"""Composition root: Settings -> embedder, store, graph, services. The only reader of config.

``Brain(settings)`` builds the production defaults; tests inject a store, an embedder or a
clock. ``open()`` / ``close()`` bracket its life (the MCP server's lifespan calls them).

Every service below is handed what it works on (store, embedder, graph, memory, clock, other
services, callbacks) and the values of its own settings section, here and nowhere else: a
service's constructor lists everything it touches. Services are built on first use; the
background ones are started at open and stopped at close by ``_start_background`` /
``_stop_background``, in that explicit order.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from brain import generations, heap, report
from brain.agentic import AgenticConfig, AgenticService, OfflineRouter, note_loader
from brain.agentic.enrichment import ChatRouter
from brain.agentic.obsidian import ObsidianMirror
from brain.citations.service import CitationConfig, CitationService
from brain.citations.turns import TURN_TTL_S, TurnFiles
from brain.clock import Clock, iso
from brain.embedding import endpoints as embed_endpoints
from brain.embedding.bm25 import BM25Encoder
from brain.embedding.credential import search_warnings
from brain.embedding.lanes import Lanes
from brain.embedding.registry import Embedder, build_embedder, resolve_record
from brain.embedding.remote import (
    RemoteEmbedder,
    RemoteEndpoint,
    embedding_status,
    endpoint_from_settings,
)
from brain.errors import ModelUnavailable
from brain.files.service import FilesService
from brain.generations.wiring import build_switch
from brain.health import HealthConfig, HealthDeps, HealthService, HotFiles
from brain.health.repair import Embedders
from brain.health.scan import Records
from brain.maintenance.service import MaintenanceService
from brain.memory import MemoryConfig, MemoryService
from brain.memory.decay import DecayPolicy, DecayService
from brain.memory.graph import LinkGraph
from brain.private import secure_home
from brain.search import adaptive as fusion_adapt
from brain.search import relevance, rerank
from brain.search.policy import Reranking, SearchPolicy
from brain.search.presentation import ResultPages
from brain.sources.fsio import FsConfig, FsService
from brain.sources.journal import ChangeJournal
from brain.sources.review import ChangeReview
from brain.sources.service import SourcesService
from brain.store import integrity, recall_key, sqlite_check
from brain.store.degraded import open_server_or_standin
from brain.store.guarded import GuardedStore
from brain.store.index_maintenance import IndexConfig, IndexMaintenance
from brain.store.meta import StoreMeta
from brain.store.snapshots import Snapshots
from brain.store.stamping import RequestStampingStore
from brain.trust.identity import Identity
from brain.trust.paths import PathPolicy
from brain.vector_store import VectorStore, build_store
from brain.vector_store.base import PayloadRewrites, ServerCollection
from brain.vector_store.forwarding import backend_of
from brain.vector_store.journal import Probe
from brain.workers import WorkerRegistry, run_every
from brain.workflow.mistakes import MistakeService
from brain.workflow.session import SessionService
from config import Settings, WorkerSettings, current_secret

log = logging.getLogger(__name__)

# The enrichment worker when ``[workers.enrichment]`` is not set: on, polling every second.
_ENRICHMENT_DEFAULT = WorkerSettings(enabled=True, interval_s=1.0)


class Brain:
    # Set by open(): the store stack as every service holds it, and what was read from it.
    store: GuardedStore
    meta: StoreMeta
    graph: LinkGraph
    embedder: Embedder
    memory: MemoryService
    _tracked: generations.TrackedStore  # the stack's layer over the live generation

    def __init__(
        self,
        settings: Settings,
        *,
        store: VectorStore | None = None,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        warm_up: bool = True,
    ) -> None:
        """``warm_up``: load the embedding model in the background at open (a server: its
        first search should not pay for it). A one-command process (the CLI) passes False:
        most of its commands embed nothing, and its close waited for the load, 7 s on a
        fresh data dir (the model's graph is written then) for `brain status`."""
        self.settings = settings
        self._warm_up_at_open = warm_up
        self.clock = clock or Clock()
        self.home = Path(settings.home)
        # Every path a caller names goes through this one policy (brain/trust/paths.py).
        self.paths = PathPolicy(settings.paths, self.home)
        self._store = store
        self._embedder = embedder
        self.bm25 = BM25Encoder()
        self.pending_model: str | None = None
        self.gate = generations.Gate()  # tool calls share it; a model swap holds it alone
        # Heavy work (uploads, syncs) embeds in batches behind the tool calls in flight.
        self.lanes = Lanes(busy=self.gate.busy, activity=lambda: self.gate.entered)
        self.embedder_factory: Callable[[Any], Embedder] | None = None  # tests: switch models
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._opened = False
        # Set when a Qdrant server is configured: whether it answers (degraded mode).
        self.probe: Probe | None = None
        self._graph_file: Path | None = None

    # ---------------------------------------------------------------- lifecycle
    def open(self) -> Brain:
        s = self.settings
        # Enabled means loaded or refused, before the store is opened or locked.
        reranker = rerank.load(s.rerank)
        secure_home(self.home)  # umask 077 and a private data dir, before anything is written
        # An endpoint a generation uses may not be removed, disabled or renamed: refused
        # before the store is opened, so nothing is written.
        generations.check_endpoints(self.home, s.embedding.endpoints)
        # A damaged sources.db or files.db is refused by name before anything opens (issue 50).
        for db in ("sources.db", "files/files.db"):
            sqlite_check.check_file(self.home / db)
        configured = resolve_record(s.embedding.model, s.embedding.dimension,
                                    provider=s.embedding.provider, max_tokens=s.embedding.max_tokens,
                                    endpoints=s.embedding.endpoints)
        embedder = self._embedder or build_embedder(configured, s.embedding.batch_size,
                                                    s.embedding.backend, self._endpoint(),
                                                    s.embedding.endpoints)
        raw = self._store or build_store(
            home=self.home,
            collection=f"{s.qdrant.collection}_g{generations.active_generation(self.home)}",
            url=s.qdrant.url, api_key=s.qdrant.api_key, prefer_grpc=s.qdrant.prefer_grpc,
            local_path=s.qdrant.local_path, index_min_vectors=s.index.min_unindexed,
            quantization=s.index.quantization,
        )
        integrity.check_present(self.home, raw)
        # Before Edge creates or maps a file: a page written on a full disk is a SIGBUS.
        space = integrity.SpaceGuard(self.home, s.storage.min_free_mb)
        space.require("open the store", extra=integrity.space_to_open(raw))
        if self._store is None and (s.qdrant.url or s.qdrant.local_path):
            served = open_server_or_standin(self.home, s.qdrant, raw, embedder.dimension,
                                            iso(self.clock.now()), self._collection_name)
            raw, self.probe, self._graph_file = served.store, served.probe, served.graph_file
        else:  # the store's own size: another configured model is a pending switch
            integrity.open_store(self.home, raw,
                                 generations.active_dimension(self.home) or embedder.dimension)
        try:
            self.embedder = generations.SwitchableEmbedder(
                self._load_records(raw, space, embedder), self.gate)
        except BaseException:
            raw.close()  # refused: release the shard so a restore can work on it
            raise
        self.memory = MemoryService(
            self.store, self.embedder, self.graph, self.meta, self._memory_config(), self.clock,
            self.bm25,
        )
        self.memory.reranker = reranker
        self.memory.citer = self.citations
        self.memory.branches = self.citations.branches  # branch scope (brain/citations)
        self.model_switch.attach()
        self._opened = True
        self._recall_keys()
        self._stale_indexes()
        # The idle thread's settles between calls wait for none in flight (brain/heap.py).
        heap.watch_calls(id(self), lambda: self.gate.busy(math.inf))
        self._start_thread("graph-saver", functools.partial(
            run_every, self._stop, self.graph.save_interval, self.save_graph, "housekeeping"))
        self._start_thread("access-stamper", functools.partial(
            run_every, self._stop, lambda: 0.1, self._flush_due_stamps, "access stamp flush"))
        # Load the model now, off the request path: the first search should not pay for it.
        if self._warm_up_at_open:
            self._start_thread("embedder-warmup", self._warm_up)
        self._start_background()
        return self

    def _start_background(self) -> None:
        """The services with background work, in order: the scheduler and its jobs, then the
        enrichment queue, then the source watcher and the file indexer."""
        self.workers.start()
        if self.probe is not None:
            self.probe.start()
        if self.snapshots.available:  # a Qdrant server keeps its own snapshots
            self.workers.register("snapshot", self.snapshots.worker, interval_s=6 * 3600)
        self.agentic.start()
        self.sources.start()
        self.files.start()

    def _stop_background(self) -> None:
        """Stop, in reverse order, what was started; a service never built is not built now."""
        built = self.__dict__
        stops: list[tuple[str, Callable[[], None]]] = []
        if "files" in built:
            stops.append(("files", self.files.close))
        if "sources" in built:
            stops.append(("sources", self._close_sources))
        if "agentic" in built:
            stops.append(("agentic", self.agentic.stop))
        if "index_maintenance" in built:  # an optimization in progress gives up first
            stops.append(("index", self.index_maintenance.cancel))
        if "workers" in built:
            stops.append(("workers", self.workers.stop))
        if self.probe is not None:
            stops.append(("qdrant probe", self.probe.stop))
        for name, stop in stops:
            try:
                stop()
            except Exception:  # noqa: BLE001 - closing goes on
                log.exception("stopping %s failed", name)

    def _close_sources(self) -> None:
        self.sources.stop()
        self.sources.registry.close()  # only once its threads are gone

    def _load_records(
        self, raw: VectorStore, space: integrity.SpaceGuard, embedder: Embedder
    ) -> Embedder:
        """Check the store against its records, then read its meta and graph. A store that
        lost data is refused (StoreDamaged) before anything writes to it."""
        s = self.settings
        manifest = integrity.Manifest(self.home, integrity.store_location(raw, self.home))
        checked = manifest.location is not None  # an in-memory store has nothing to lose
        if checked:
            integrity.check_counts(self.home, raw, manifest)
            integrity.check_sample(self.home, raw)
        self.store = self._assemble(raw, space, manifest)
        self.meta = StoreMeta(self.store)
        self.meta.load_or_init(embedder.record.id, embedder.dimension, iso(self.clock.now()),
                               quantization=self.store.quantization() or s.index.quantization)
        embed_endpoints.check_in_use(s.embedding.endpoints, {"active model": self.meta.model})
        if self.meta.model != embedder.record.id:
            # Never mix vectors: keep embedding with the model that built the store.
            self.pending_model = embedder.record.id
            log.warning("store was built with %s; configured %s is a pending switch",
                        self.meta.model, embedder.record.id)
            if self._embedder is None:
                try:
                    recorded = resolve_record(self.meta.model, self.meta.dimension)
                except ModelUnavailable as exc:
                    raise ModelUnavailable(
                        f"this store was built with {self.meta.model}, which cannot be loaded "
                        f"here ({exc.message}); install it or use another BRAIN__HOME"
                    ) from exc
                embedder = build_embedder(recorded, s.embedding.batch_size, s.embedding.backend,
                                          self._endpoint())
        self.graph = LinkGraph(self._graph_file or s.graph_path)
        self._load_graph()
        if checked:
            integrity.check_graph(self.home, self.graph, raw)
        return embedder

    def _assemble(self, raw: VectorStore, space: integrity.SpaceGuard,
                  manifest: integrity.Manifest) -> GuardedStore:
        """The store stack, built once; every service holds its outermost layer. Top down: the
        integrity guard (free space, the manifest, recall keys, pauses), request stamping
        (a forwarded call's notes carry its id), the model switch's tracking (which
        generation serves, the writes a kept generation must take over), the backend."""
        self._tracked = generations.TrackedStore(raw)
        return GuardedStore(RequestStampingStore(self._tracked), space, manifest)

    @property
    def _guarded(self) -> GuardedStore:
        """The guard, which is the store itself (kept for the tests that name it)."""
        return self.store

    def _collection_name(self) -> str:
        """The server collection the live generation is kept in ("" for an embedded store)."""
        live = backend_of(self.store)
        return live.collection if isinstance(live, ServerCollection) else ""

    def _recall_keys(self) -> None:
        """A store from before recall keys gets them (brain/store/recall_key.py); searches keep the
        full filter until it is done. An embedded store's notes are keyed in the copy an index
        run optimizes, so the live one keeps its HNSW index meanwhile."""
        s = self.settings
        reindex = None
        if not (s.qdrant.url or s.qdrant.local_path):
            edge = backend_of(self.store)
            if not s.index.enabled or not isinstance(edge, PayloadRewrites):
                reindex = lambda: False  # noqa: E731 - no index runs: the full filter stays
            else:
                reindex = functools.partial(self._reindex_rewriting, edge, recall_key.REWRITE)
        recall_key.at_open(self.store, self.meta, self._start_thread, self._stop, reindex)

    def _stale_indexes(self) -> None:
        """A large embedded store whose payload indexes an older version built (in RAM, with
        HNSW links for every field), or that lacks one a newer version declares, gets them
        built as declared in an index run's copy, now, off the request path; a small one had
        them built as it opened, and so does any store when index maintenance is off."""
        edge = backend_of(self.store)
        if not isinstance(edge, PayloadRewrites) or not edge.indexes_stale:
            return
        if self.settings.index.enabled:
            self._start_thread("index-rebuild", self._rebuild_stale_indexes)
        else:  # no index run will come: build them now, as the open waits
            edge.ensure_indexes(in_place=True)

    def _rebuild_stale_indexes(self) -> None:
        self.index_maintenance.run("payload indexes built otherwise than declared: rebuilt "
                                   "in the optimized copy")

    def _reindex_rewriting(self, edge: PayloadRewrites, target: str) -> bool:
        """Run index maintenance until a run that rewrote every payload by ``target`` has
        swapped in (a run already going on when it was asked for does not count)."""
        edge.payload_rewrite = target
        while not self._stop.is_set():
            if target in edge.rewrites_done:
                return True
            self.index_maintenance.run("recall keys: written in the optimized copy")
            if target in edge.rewrites_done:
                return True
            self._stop.wait(30)
        return False

    def _endpoint(self) -> RemoteEndpoint:
        """How a remote embedding model is reached. An HF token set for the chat models
        (llm.api_key without llm.base_url) serves provider hf when it has no key of its own."""
        s = self.settings
        hf_token = "" if s.llm.base_url else s.llm.api_key
        ep = endpoint_from_settings(s.embedding, self.home, hf_token)
        # A missing or rejected key is read again from the settings' sources (environment,
        # .env, brain.toml) at each probe, so a key set later works without a restart.
        return replace(ep, key_source=lambda: current_secret("embedding.api_key"),
                       secrets=current_secret)

    # ---------------------------------------------------------------- services
    # Built on first use, each from its collaborators and its own settings section.

    @functools.cached_property
    def model_switch(self) -> generations.ModelSwitch:
        s = self.settings
        return build_switch(
            home=self.home, qdrant=s.qdrant, embedding=s.embedding,
            index_min_vectors=s.index.min_unindexed, guarded=self.store, tracked=self._tracked,
            embedder=cast(generations.SwitchableEmbedder, self.embedder), meta=self.meta,
            gate=self.gate,
            endpoint=self._endpoint(), pending=lambda: self.pending_model,
            on_swap=self._model_swapped, pool_long_text=s.memory.pool_long_text,
            now=lambda: iso(self.clock.now()), embedder_factory=self.embedder_factory)

    def _model_swapped(self, model: str) -> None:
        self.pending_model = None if self.pending_model == model else self.pending_model
        self._recall_keys()  # the generation now served: its keys checked before they serve
        for name in ("sources", "files"):
            if name in self.__dict__:
                getattr(self, name).use_model(model)

    @functools.cached_property
    def identity(self) -> Identity:
        """The process's own identity (over stdio, and for the CLI and background work)."""
        return Identity(self.settings.identity.user_id, self.settings.identity.agent_id)

    @functools.cached_property
    def sessions(self) -> SessionService:
        return SessionService(self.memory, self.store, self.clock, refinement=lambda: self.agentic)

    @functools.cached_property
    def mistakes(self) -> MistakeService:
        return MistakeService(self.memory, self.store, self.clock, changed_since=lambda ref, p:
                              self.citations.changed_since(ref, project=p))

    @functools.cached_property
    def decay(self) -> DecayService:
        return DecayService(self.memory, self.store, self.graph, self.meta, self.clock,
                            policy=self._decay_policy)

    def _decay_policy(self) -> DecayPolicy:
        """Read on each use, so a changed ``[decay]`` or ``[forget]`` counts at once."""
        d, grace = self.settings.decay, self.settings.forget.grace_days
        return DecayPolicy(
            stale_days=float(d.stale_days),
            stale_accesses=int(d.stale_accesses),
            score_threshold=float(d.score_threshold),
            half_life_days=float(d.half_life_days),
            importance_cap=int(d.importance_cap),
            grace_days=float(grace),
        )

    @functools.cached_property
    def maintenance(self) -> MaintenanceService:
        return MaintenanceService(
            self.memory, self.store, self.graph, self.meta, self.bm25, self.clock, self.decay,
            home=self.home, identity=self.identity,
            default_project=self.settings.memory.default_project,
            save_graph=self.save_graph, stats=self.stats,
            sources=self.sources, files=self.files,
            requeue_hype=lambda: self.agentic.backfill_hype(),
        )

    @functools.cached_property
    def workers(self) -> WorkerRegistry:
        reg = WorkerRegistry(self.home, self.clock, self.meta, self.settings.workers)
        # Through the property: decay is built when a job first runs, not with the registry.
        reg.register("decay", lambda: self.decay.decay_salience(), interval_s=6 * 3600)
        reg.register("reclamation", lambda: self.decay.reclaim_forgotten(), interval_s=3600)
        h = self.settings.health
        # Destructive: the first run comes one interval after start, never at boot.
        reg.register("health_gc", lambda: self.health.scheduled_gc(), enabled=h.gc_enabled,
                     interval_s=h.gc_interval_s, delay_first=True)
        reg.register("index", lambda: self.index_maintenance.tick(), interval_s=30)
        return reg

    @functools.cached_property
    def index_maintenance(self) -> IndexMaintenance:
        i = self.settings.index
        config = IndexConfig(enabled=i.enabled, min_unindexed=i.min_unindexed,
                             max_segments=i.max_segments, max_deleted_share=i.max_deleted_share)
        return IndexMaintenance(self.store, config, self.clock)

    @functools.cached_property
    def snapshots(self) -> Snapshots:
        return Snapshots(self.store, self.home, self.settings.storage, lambda: self.meta.model)

    @functools.cached_property
    def agentic(self) -> AgenticService:
        s = self.settings
        worker = s.workers.get("enrichment", _ENRICHMENT_DEFAULT)
        config = AgenticConfig(
            enrichment=s.llm.enrichment and worker.enabled,
            backfill=s.llm.backfill,
            max_attempts=s.llm.job_max_attempts,
            backoff_s=s.llm.job_backoff_s,
            poll_s=worker.interval_s,
            link_candidates=s.memory.link_candidates,
            evolve_threshold=s.llm.evolve_threshold,
            hype_questions=s.memory.hype_questions,
            hype_question_chars=s.memory.hype_question_chars,
        )
        o = s.obsidian
        mirror = ObsidianMirror(note_loader(self.memory), api_key=o.api_key, host=o.host,
                                subfolder=o.subfolder, vault_path=o.vault_path,
                                timeout_s=o.timeout_s)
        return AgenticService(self.memory, self.store, self._chat_router(), mirror, config,
                              home=self.home, identity=self.identity, save_graph=self.save_graph)

    def _chat_router(self) -> ChatRouter:
        llm = self.settings.llm
        if not (llm.base_url or llm.api_key):
            return OfflineRouter(llm.fast_model, llm.hard_model, llm.daily_token_cap)
        from brain.llm.router import ModelRouter  # the HF client costs most of a second

        return ModelRouter(
            base_url=llm.base_url, api_key=llm.api_key, provider=llm.provider,
            hard_provider=llm.hard_provider,
            fast_model=llm.fast_model, hard_model=llm.hard_model, timeout_s=llm.timeout_s,
            max_retries=llm.max_retries, daily_token_cap=llm.daily_token_cap,
            usage_path=self.home / "llm_usage.json", clock=self.clock,
        )

    @functools.cached_property
    def sources(self) -> SourcesService:
        from brain.sources.service import SourcesConfig, SourcesDeps

        s, sync = self.settings, self.settings.sync
        deps = SourcesDeps(
            store=self.store, embedder=self.embedder, bm25=self.bm25, paths=self.paths,
            clock=self.clock, identity=self.identity,
            model_id=self.meta.model, home=self.home, on_file_written=self.hot_files.record,
            on_files_changed=lambda sid, rels: self.citations.files_changed(sid, rels),
            lanes=self.lanes,
        )
        cfg = SourcesConfig(
            default_project=s.memory.default_project, concurrency=sync.concurrency,
            max_scan_files=sync.max_scan_files, debounce_s=sync.debounce_s,
            poll_interval_s=sync.poll_interval_s, embed_batch=sync.embed_batch,
            grep_timeout_s=sync.grep_timeout_s, exact_max_points=s.retrieval.exact_max_points,
            policy=self.search_policy, auto=sync.auto,
        )
        return SourcesService(deps, cfg)

    @functools.cached_property
    def citations(self) -> CitationService:
        """Notes' code citations and their staleness (brain/citations)."""
        cfg = CitationConfig(redact_secrets=self.settings.memory.redact_secrets,
                             hook_turn_ttl_s=TURN_TTL_S)
        return CitationService(self.memory, self.sources, self.clock, cfg, TurnFiles(self.home))

    @functools.cached_property
    def fs(self) -> FsService:
        """fs_read / fs_list / fs_write over the sources, with the change journal."""
        f = self.settings.fs
        cfg = FsConfig(max_read_bytes=f.max_read_bytes, max_write_bytes=f.max_write_bytes,
                       list_limit=f.list_limit, index_timeout_s=f.index_timeout_s)
        return FsService(self.sources, ChangeJournal(self.home / "changes"), self.clock, cfg)

    @functools.cached_property
    def changes(self) -> ChangeReview:
        """Review of what fs_write journalled: list, preview, approve, revert."""
        return ChangeReview(self.fs)

    @functools.cached_property
    def files(self) -> FilesService:
        from brain.files.service import FilesDeps

        s = self.settings
        deps = FilesDeps(
            store=self.store, embedder=self.embedder, bm25=self.bm25, paths=self.paths,
            clock=self.clock, identity=self.identity,
            model_id=self.meta.model, home=self.home, default_project=s.memory.default_project,
            redact_secrets=s.memory.redact_secrets,
            exact_max_points=s.retrieval.exact_max_points, policy=self.search_policy,
            lanes=self.lanes,
        )
        return FilesService(deps, s.files)  # the live section: tests tune it at run time

    @functools.cached_property
    def hot_files(self) -> HotFiles:
        h = self.settings.health
        return HotFiles(lambda: self.clock.now().timestamp(), threshold=h.hot_file_threshold,
                        window_s=h.hot_file_window_s, max_files=h.hot_files_max)

    @functools.cached_property
    def health(self) -> HealthService:
        h = self.settings.health
        deps = HealthDeps(
            store=self.store, graph=self.graph, bm25=self.bm25, identity=self.identity,
            records=self._health_records, embedders=self._health_embedders,
            queues=self._queue_depths,
            model=lambda: {"active": self.meta.model, "pending_switch": self.pending_model},
            graph_changed=self.meta.mark_graph_dirty, save_graph=self.save_graph,
            hot_files=self.hot_files, quantization=self.settings.index.quantization,
            recorded_quantization=lambda: self.meta.quantization,
            record_quantization=lambda mode: self.meta.set(quantization=mode),
        )
        return HealthService(deps, HealthConfig(sample_ids=h.sample_ids,
                                                duplicate_threshold=h.duplicate_threshold))

    def _health_records(self) -> Records:
        """What the integrity scan checks the store against, read now."""
        registry = self.sources.registry
        return Records(
            source_ids={r.id for r in registry.list()},
            source_files=lambda sid: set(registry.file_states(sid)),
            states_complete=lambda sid: bool((rec := registry.find(sid)) and rec.state_complete),
            file_ids={str(r["id"]) for r in self.files.records.list()},
            graph_nodes=self.graph.node_ids(),
            model=self.meta.model,
            keys_trusted=recall_key.complete(self.meta.data),
        )

    def _health_embedders(self) -> Embedders:
        return Embedders(notes=self.memory.embed_notes, texts=self.embedder.embed_documents,
                         model=self.embedder.record.id, store_model=self.meta.model)

    def _queue_depths(self) -> dict[str, Any]:
        """Queue depths, counts only (they span every owner)."""
        queue = self.agentic.queue
        jobs = self.sources.queue.jobs()
        return {
            "enrichment": queue.counts() if queue is not None else {},
            "sync": {s: sum(1 for j in jobs if j.status == s) for s in ("queued", "running")},
            "files_processing": len(self.files.records.list(status="processing")),
        }

    @functools.cached_property
    def search_policy(self) -> SearchPolicy:
        """The one ranking policy of search_memory, search_files and fs_search."""
        r = self.settings.retrieval
        return SearchPolicy(
            fusion=r.fusion, dense_weight=r.dense_weight, keyword_lead=r.keyword_lead,
            code_dense_weight=r.code_dense_weight, rrf_k=r.rrf_k, candidates=r.candidates,
            relative_floor=r.relative_floor, neighbour_weight=r.neighbour_weight,
            relevance_band=self.settings.memory.relevance_band,
            # the model whose vectors the store holds (settings' until the store is open)
            relevance=relevance.floor_for(
                self.meta.model if "meta" in vars(self) else self.settings.embedding.model,
                enabled=r.relevance_floor, threshold=r.relevance_threshold),
            adaptive=fusion_adapt.fitted() if r.adaptive_weight else None,
            reranking=Reranking(self.settings.rerank.candidates),
        )  # fmt: skip

    @functools.cached_property
    def pages(self) -> ResultPages:
        """The one result-page helper of the search tools: the relevance band and the
        snippet size of ``[memory]``, and the embedder's warnings while dense is off."""
        m = self.settings.memory
        return ResultPages(m.relevance_band, m.snippet_chars,
                           warnings=lambda: search_warnings(self.embedder))

    def _memory_config(self) -> MemoryConfig:
        s = self.settings
        return MemoryConfig(
            max_content_chars=s.memory.max_content_chars,
            link_threshold=s.memory.link_threshold,
            link_candidates=s.memory.link_candidates,
            redact_secrets=s.memory.redact_secrets,
            default_project=s.memory.default_project,
            policy=self.search_policy,
            pool_long_text=s.memory.pool_long_text,
            session_context=s.memory.session_context,
            graph_decay=s.retrieval.graph_decay,
            related_decay=s.retrieval.related_decay,
            exact_max_points=s.retrieval.exact_max_points,
            user_id=s.identity.user_id, agent_id=s.identity.agent_id,
            half_life_days=s.decay.half_life_days,
        )

    def _load_graph(self) -> None:
        """The cache, or the graph rebuilt from the store with a warning naming what the cache
        had lost (brain/store/integrity.py, load_graph)."""
        integrity.load_graph(self.home, self.graph, self.store, self.meta.graph_seq)

    def save_graph(self) -> None:
        if self.meta.graph_dirty:
            # Under the notes' write lock: a write bumps the sequence number before its store
            # write and changes the graph after, so a cache taken between the two would carry
            # the new number without the links (and a crash then load it as current).
            with self.memory._write_lock:
                data = self.graph.dump(self.meta.graph_saved())
            self.graph.save(data)

    def _warm_up(self) -> None:
        if isinstance(getattr(self.embedder, "inner", self.embedder), RemoteEmbedder):
            return  # nothing to load, and a call to a paid endpoint costs
        try:
            self.embedder.embed_query("warm up")
        except Exception:  # noqa: BLE001 - the first real call reports the error
            log.exception("embedding model warm-up failed")
        heap.settle_if_due()  # the loaded process's objects out of later collections

    def _flush_due_stamps(self) -> None:
        if self.memory.stamps.due():
            self.memory.flush_stamps()

    def _start_thread(self, name: str, target: Callable[[], None]) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def close(self) -> None:
        if not self._opened:
            return
        self._stop.set()
        heap.unwatch_calls(id(self))
        self.model_switch.close()
        self._stop_background()
        for t in self._threads:
            t.join(timeout=10)
        try:
            self.memory.flush_stamps()
            self.save_graph()
        finally:
            self.store.flush()
            self.store.close()
            self._opened = False

    def __enter__(self) -> Brain:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- reporting
    def capabilities(self) -> dict[str, Any]:
        """brain_capabilities (brain/report.py)."""
        info = self.store.info()
        return report.capabilities(
            self.agentic.status(), info, embedding_status(self.embedder), self.pending_model,
            Probe.state_of(self.probe, info.backend), self.memory.reranker)

    def stats(self) -> dict[str, Any]:
        info = self.store.info()
        return {
            **self.memory.stats(),
            "backend": info.backend,
            "backend_state": Probe.state_of(self.probe, info.backend),
            "store": {"location": info.location, "points": info.points},
            "model": {
                "active": self.meta.model,
                "dimension": self.meta.dimension,
                "pending_switch": self.pending_model,
                "generations": self.model_switch.status(),
            },
            "embedding": embedding_status(self.embedder),
            "data_dir": str(self.home),
            "rerank": report.reranker_status(self.memory.reranker),
            "capabilities": self.agentic.status(),
            "index": self.index_maintenance.status(),
            # Sources this caller cannot read now, and why (never a silently empty search).
            "sources_unreachable": self.sources.unreachable(),
        }
