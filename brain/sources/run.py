"""The state one run over one source shares between its phases.

A run (see indexer.py) goes: walk and plan (reconcile.py), diff each file against the sync
state and chunk it (changes.py), embed and upsert in batches, delete what vanished
(writer.py). Each phase reads and updates this one :class:`Run`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from brain.embedding.bm25 import BM25Encoder
from brain.sources.filters import SourceFilter
from brain.sources.points import Piece
from brain.sources.registry import FileState, Registry, SourceRecord
from brain.vector_store import VectorStore


class Control(Protocol):
    cancel: threading.Event
    progress: dict[str, Any]


class Engine(Protocol):
    """What a run uses of the indexer: the store, the state, and how to chunk and embed."""

    store: VectorStore
    bm25: BM25Encoder
    registry: Registry
    model_id: str
    user_id: str
    embed_batch: int
    max_scan_files: int

    def chunk(
        self, text: str, offset: int = 0, first_index: int = 0, line_offset: int = 0
    ) -> list[Piece]: ...

    def embed(self, texts: list[str], ctl: Control) -> list[list[float]] | None: ...

    def pause(self) -> None:
        """Wait for the tool calls in flight (brain/embedding/lanes.py)."""

    def file_written(self, rec: SourceRecord, rel: str) -> None:
        """A file's points were written (the hot-file count)."""


@dataclass(slots=True)
class RunStats:
    mode: str = "sync"
    files_walked: int = 0
    capped: bool = False
    files_unchanged: int = 0
    files_indexed: int = 0
    files_refreshed: int = 0
    files_renamed: int = 0
    files_appended: int = 0
    files_deleted: int = 0
    files_unindexed: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    cancelled: bool = False
    escalated: bool = False
    elapsed_s: float = 0.0
    embed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(slots=True)
class Run:
    """One run over one source: what it works on, how far it got, what it has counted."""

    ix: Engine
    rec: SourceRecord
    ctl: Control
    mode: str  # sync | rescan | reembed; a sync becomes a rescan when the filters changed
    scope: str | None
    root: Path = field(init=False)
    flt: SourceFilter = field(init=False)
    stats: RunStats = field(init=False)
    states: dict[str, FileState] = field(init=False)
    progress: dict[str, Any] = field(init=False)
    # Files whose points were written or deleted by this run (the citations re-check them).
    touched: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.scope = self.scope.strip("/") if self.scope else None
        self.root = Path(self.rec.root)
        self.flt = SourceFilter(
            self.root, self.rec.exclude, self.rec.include, self.rec.use_gitignore
        )
        self.stats = RunStats(mode=self.mode)
        self.states = self.ix.registry.file_states(self.rec.id)
        self.progress = self.ctl.progress

    def cancelled(self) -> bool:
        return self.ctl.cancel.is_set()

    def in_scope(self, rel: str) -> bool:
        return self.scope is None or rel == self.scope or rel.startswith(self.scope + "/")
