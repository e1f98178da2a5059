"""Builds the model switch from its settings sections and the brain's live parts (called by
brain/app.py, the composition root)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brain.embedding.registry import Embedder, build_embedder, resolve_record
from brain.embedding.remote import RemoteEndpoint
from brain.generations.live import Gate, SwitchableEmbedder, TrackedStore
from brain.generations.rebuild import IDLE_BATCH
from brain.generations.service import ModelSwitch, SwitchConfig, SwitchDeps
from brain.generations.state import Target
from brain.store.guarded import GuardedStore
from brain.store.meta import StoreMeta
from brain.vector_store import VectorStore, build_store
from config import EmbeddingSettings, QdrantSettings


def generation_collection(qdrant: QdrantSettings, generation: int) -> str:
    return f"{qdrant.collection}_g{generation}"


def target_of(embedding: EmbeddingSettings) -> Target:
    record = resolve_record(embedding.model, embedding.dimension, provider=embedding.provider,
                            max_tokens=embedding.max_tokens, endpoints=embedding.endpoints)
    return Target(record.id, record.dimension, embedding.provider)


def build_switch(
    *, home: Path, qdrant: QdrantSettings, embedding: EmbeddingSettings,
    index_min_vectors: int, guarded: GuardedStore, tracked: TrackedStore, embedder: SwitchableEmbedder,
    meta: StoreMeta, gate: Gate, endpoint: RemoteEndpoint, pending: Callable[[], str | None],
    on_swap: Callable[[str], None], pool_long_text: bool, now: Callable[[], str],
    embedder_factory: Callable[[Target], Embedder] | None = None,
) -> ModelSwitch:
    def build(generation: int) -> VectorStore:
        return build_store(
            home=home, collection=generation_collection(qdrant, generation), url=qdrant.url,
            api_key=qdrant.api_key, prefer_grpc=qdrant.prefer_grpc,
            local_path=qdrant.local_path, index_min_vectors=index_min_vectors,
            # The new generation keeps the live store's quantization (health_quantization).
            quantization=guarded.quantization() or "none",
        )

    def open_generation(generation: int, dimension: int) -> VectorStore:
        store = build(generation)
        store.open(dimension)
        return store

    def drop_generation(store: VectorStore | None, generation: int) -> None:
        store = store or build(generation)  # not opened: only its name is needed
        client: Any = getattr(store, "_client", None)
        path = getattr(store, "path", None)
        store.close()
        if client is not None:
            client.delete_collection(generation_collection(qdrant, generation))
        elif path is not None:
            shutil.rmtree(path, ignore_errors=True)

    def make_embedder(target: Target) -> Embedder:
        if embedder_factory is not None:
            return embedder_factory(target)
        record = resolve_record(target.model, target.dimension, provider=target.provider,
                                max_tokens=embedding.max_tokens, endpoints=embedding.endpoints)
        return build_embedder(record, embedding.batch_size, embedding.backend, endpoint,
                              embedding.endpoints)

    def pending_target() -> Target | None:
        model = pending()
        if not model:
            return None
        if model == embedding.model or model.endswith(f":{embedding.model}"):
            return target_of(embedding)
        return Target(model, 0, embedding.provider)

    deps = SwitchDeps(
        home=home, guarded=guarded, tracked=tracked, embedder=embedder, meta=meta, gate=gate,
        open_generation=open_generation, drop_generation=drop_generation,
        build_embedder=make_embedder, pending=pending_target, on_swap=on_swap, now=now,
    )
    cfg = SwitchConfig(batch=embedding.rebuild_batch, pause_s=embedding.rebuild_pause_s,
                       busy_share=embedding.rebuild_busy_share, pool_long_text=pool_long_text,
                       idle_batch=max(embedding.rebuild_batch, IDLE_BATCH))
    switch = ModelSwitch(deps, cfg)
    switch.endpoints = embedding.endpoints
    switch.provider = embedding.provider
    return switch


COMMANDS = ("estimate", "switch", "status", "cancel", "resume", "rollback", "drop-previous",
            "wait")


def run_command(switch: ModelSwitch, name: str, model: str = "", dimension: int = 0,
                provider: str = "local", timeout_s: float = 0.0) -> dict[str, Any]:
    """One ``brain model`` command, in the process that holds the brain (the owner, or the
    command line when no server runs). ``model`` (a registry id, ``openai:<name>`` ...) names
    the target; without it the configured model pending a switch is the target."""
    from brain.errors import InvalidArgument

    target: Target | None = None
    if model:
        record = resolve_record(model, dimension, provider=provider, endpoints=switch.endpoints)
        target = Target(record.id, record.dimension, provider)
    if name == "estimate":
        return switch.estimate(target)
    if name == "switch":
        return switch.switch(target)
    if name == "status":
        return switch.status()
    if name == "cancel":
        return switch.cancel()
    if name == "resume":
        return switch.resume()
    if name == "rollback":
        return switch.rollback()
    if name == "drop-previous":
        return switch.drop_previous()
    if name == "wait":
        return switch.wait(max(0.0, timeout_s) or None)
    raise InvalidArgument(f"unknown model command {name!r}: one of {', '.join(COMMANDS)}",
                          field="command")
