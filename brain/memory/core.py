"""What every part of the memory service shares: its settings, its collaborators, the caller's
identity, and reading one note by id.

The write path (write.py), the reads (read.py, filters.py) and the lifecycle (lifecycle.py)
are module functions over a :class:`NoteCore`; :class:`brain.memory.MemoryService` is the
core with those functions as its methods.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from brain.clock import Clock, iso
from brain.embedding.bm25 import BM25Encoder
from brain.embedding.registry import Embedder, embed_passages
from brain.errors import InvalidArgument, NoteNotFound
from brain.memory import salience
from brain.memory.access import AccessStamps
from brain.memory.graph import LinkGraph
from brain.notes import ZK_ID_RE, normalise_zk_id, point_id, public_note
from brain.search.policy import SearchPolicy
from brain.search.rerank import AnyReranker
from brain.store.meta import StoreMeta
from brain.trust import tenancy
from brain.trust.identity import Identity
from brain.trust.limits import MAX_LABEL_CHARS, check_text
from brain.vector_store import Filter, Match, VectorStore

log = logging.getLogger(__name__)

NOTE_FILTER = Filter(must=(Match("kind", "note"),), must_not=(Match("forgotten", True),))
MAX_TOP_K = 100


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """The memory and retrieval settings the service runs with. No field has a default:
    config.py is the one place defaults live, and brain/app.py hands every value over."""

    max_content_chars: int
    link_threshold: float
    link_candidates: int
    redact_secrets: bool
    default_project: str
    policy: SearchPolicy  # how searches rank: the same object files and sources get
    pool_long_text: bool
    session_context: bool  # a note in an open session links its predecessor (thread_prev)
    graph_decay: float
    related_decay: float
    exact_max_points: int
    user_id: str
    agent_id: str
    half_life_days: float  # of salience, until the store records the one its keys use


class Citer(Protocol):
    """What the memory asks of the citations (brain/citations/service.py): anchor a new
    note's citations, re-anchor an updated one, and check and rank search hits."""

    def attach(self, payload: dict[str, Any], cites: Sequence[str] = (),
               soft: Sequence[str] = ()) -> None: ...

    def reanchor(self, payload: dict[str, Any]) -> None: ...

    def refresh(self, payloads: list[dict[str, Any]]) -> None: ...

    def demote(self, cands: list[Any]) -> list[Any]: ...


class BranchView(Protocol):
    """The caller's git branch in a project (brain/citations/branches.py); None without git."""

    def current(self, project: str) -> str | None: ...


class SessionThreads:
    """The last note each (user, agent, project) added in its open session: the next note's
    ``thread_prev`` neighbour when ``session_context`` is on (never its context). open_session
    starts a thread (empty); process memory only, like the session itself."""

    MAX_THREADS = 10_000

    def __init__(self) -> None:
        self._last: dict[tuple[str, str, str], tuple[str, str]] = {}  # (zk_id, content)
        self._lock = threading.Lock()

    def begin(self, key: tuple[str, str, str]) -> None:
        with self._lock:
            self._last.pop(key, None)
            if len(self._last) >= self.MAX_THREADS:
                self._last.pop(next(iter(self._last)))
            self._last[key] = ("", "")

    def is_open(self, key: tuple[str, str, str]) -> bool:
        with self._lock:
            return key in self._last

    def previous(self, key: tuple[str, str, str]) -> tuple[str, str] | None:
        """(zk_id, content) of the thread's last note; None when no session is open or
        nothing was added in it yet."""
        with self._lock:
            last = self._last.get(key)
            return last if last and last[0] else None

    def advance(self, key: tuple[str, str, str], zk_id: str, content: str) -> None:
        with self._lock:
            if key in self._last:
                self._last[key] = (zk_id, content)


@dataclass(slots=True)
class WriteResult:
    note: dict[str, Any]
    redacted: tuple[str, ...] = ()
    linked: list[dict[str, str]] = field(default_factory=list)
    # What the write superseded or proposes to (brain/memory/supersede.py); None: nothing.
    supersession: dict[str, Any] | None = None


def require_text(value: str, name: str, cap: int) -> str:
    # Blank means no visible character: NUL-only or whitespace-only text is refused too.
    return check_text(value, name, cap, "Split it into several notes, or raise "
                      "BRAIN__MEMORY__MAX_CONTENT_CHARS.")


def require_enum(value: str, allowed: Sequence[str], name: str) -> str:
    if value not in allowed:
        raise InvalidArgument(
            f"{name}={value!r} is not valid; use one of: {', '.join(allowed)}", field=name
        )
    return value


def check_top_k(top_k: int, upper: int = MAX_TOP_K) -> int:
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= upper:
        raise InvalidArgument(f"top_k={top_k!r} is out of range: use 1..{upper}", field="top_k")
    return top_k


def check_project(project: str) -> str:
    project = (project or "").strip()
    if not project or len(project) > MAX_LABEL_CHARS:
        raise InvalidArgument(
            f"project must be a non-empty name of at most {MAX_LABEL_CHARS} characters",
            field="project")
    return project


def embed_text(payload: dict[str, Any]) -> str:
    """What the dense vector of a note encodes: content plus its context (A-MEM), when the
    context says something (given by the caller or written by the LLM); the heuristic
    placeholder ("Decision note in shop") would only add noise."""
    text = payload["content"]
    context = payload.get("context", "")
    meaningful = payload.get("context_by") == "caller" or not str(
        payload.get("enriched_by", "heuristic")).startswith("heuristic")
    return f"{text}\n{context}" if context and meaningful else text


def keyword_text(payload: dict[str, Any]) -> str:
    """What the BM25 vector of a note indexes: title, content, keywords and tags."""
    parts = [payload.get("title", ""), payload["content"], " ".join(payload.get("keywords", [])),
             " ".join(payload.get("tags", []))]
    return "\n".join(p for p in parts if p)


def merge_tags(given: list[str], derived: list[str], cap: int = 5) -> list[str]:
    out: list[str] = []
    for t in [*given, *derived]:
        t = t.strip().lower()
        if t and t not in out:
            out.append(t)
    return out[: max(cap, len(given))]


class NoteCore:
    """The collaborators and settings of the memory service, and what every part of it
    needs: who is calling, the time, one note by id, a note's vectors."""

    @property
    def reranker(self) -> AnyReranker | None:
        """The reranker of every search (the policy's; set by Brain.open with [rerank])."""
        reranker: AnyReranker | None = self.cfg.policy.reranking.reranker
        return reranker

    @reranker.setter
    def reranker(self, value: AnyReranker | None) -> None:
        self.cfg.policy.reranking.reranker = value

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        graph: LinkGraph,
        meta: StoreMeta,
        config: MemoryConfig,
        clock: Clock | None = None,
        bm25: BM25Encoder | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.graph = graph
        self.meta = meta
        self.cfg = config
        self.clock = clock or Clock()
        self.bm25 = bm25 or BM25Encoder()
        self._write_lock = threading.RLock()
        self.stamps = AccessStamps()
        self.threads = SessionThreads()
        # Called after a note is durably written: (event, payload). The enrichment queue and
        # the Obsidian mirror subscribe here.
        self.listeners: list[Callable[[str, dict[str, Any]], None]] = []
        self._hype: bool | None = None  # whether the store holds HyPE points (lazy)
        # Set by brain/app.py: the citations of notes (none: notes carry no citations).
        self.citer: Citer | None = None
        # Set by brain/app.py: the caller's branch (none: every note is project-wide).
        self.branches: BranchView | None = None

    def has_hype(self) -> bool:
        """Whether any hypothetical-question point exists: a search skips the HyPE leg
        (one more query) in a brain that has none."""
        if self._hype is None:
            self._hype = self.store.count(Filter(must=(Match("kind", "hype"),))) > 0
        return self._hype

    def hype_written(self) -> None:
        self._hype = True

    @property
    def identity(self) -> Identity:
        return tenancy.caller(Identity(self.cfg.user_id, self.cfg.agent_id))

    def project_of(self, project: str | None) -> str:
        """A call's project, checked, else ``[memory] default_project`` (a stdio call that
        names none has its workspace's filled in before: mcp_surface/workspace.py)."""
        return check_project(project or self.cfg.default_project)

    def visible(self, payload: dict[str, Any]) -> bool:
        return tenancy.visible(payload, self.identity)

    def _tenancy(self) -> tuple[Any, ...]:
        """Conditions that keep the caller to what it may see (brain/trust/tenancy.py)."""
        return tenancy.conditions(self.identity)

    def _emit(self, event: str, payload: dict[str, Any]) -> None:
        for listener in self.listeners:
            try:
                listener(event, payload)
            except Exception:  # noqa: BLE001 - a listener never breaks a write
                log.exception("listener failed on %s", event)

    def _now(self) -> tuple[str, float]:
        now = self.clock.now()
        return iso(now), now.timestamp()

    def embed_notes(self, payloads: Sequence[dict[str, Any]]) -> np.ndarray:
        """Dense vectors of notes (embed_text of each; long ones pooled over the window)."""
        return embed_passages(self.embedder, [embed_text(p) for p in payloads],
                              self.cfg.pool_long_text)

    def _vectors(self, payload: dict[str, Any]) -> tuple[list[float], Any]:
        dense = self.embed_notes([payload])[0]
        return dense.tolist(), self.bm25.document(keyword_text(payload))

    def half_life_s(self) -> float:
        """The salience half-life the store's keys are computed with (brain/memory/salience.py):
        the recorded one, else the configured one (a store not yet keyed by the decay
        worker)."""
        recorded = self.meta.salience_half_life_days
        return (recorded or self.cfg.half_life_days) * salience.DAY

    def salience_of(self, payload: dict[str, Any]) -> float:
        """The note's salience now (it decays on read; brain/memory/salience.py)."""
        return salience.salience_now(payload, self.clock.now().timestamp(), self.half_life_s())

    def keyed(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` with its ``salience_key`` (set in place) for the store's half-life."""
        payload["salience_key"] = salience.salience_key(payload, self.half_life_s())
        return payload

    def public(self, payload: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """What a tool returns for a note (public_note), with its salience as of now."""
        return public_note(payload, **extra, salience=round(self.salience_of(payload), 4))

    def stamp_access(self, zk_ids: Sequence[str], boost: float = 0.05) -> None:
        """access_count + 1 and last_accessed = now on each note (decay tracking), written
        later by :meth:`flush_stamps` (see brain/memory/access.py)."""
        if not zk_ids:
            return
        now, ts = self._now()
        self.stamps.stamp(zk_ids, now, ts, boost)

    def flush_stamps(self) -> int:
        """Write the coalesced access stamps; returns how many notes were stamped."""
        return self.stamps.flush(self.store, self.half_life_s())

    def get_payload(self, zk_id: str, *, include_forgotten: bool = False) -> dict[str, Any]:
        self.flush_stamps()
        if not isinstance(zk_id, str) or not ZK_ID_RE.match(normalise_zk_id(zk_id)):
            raise InvalidArgument(f"{zk_id!r} is not a note id: ids look like ZK-1A2B3C4D",
                                  field="zk_id")
        zk_id = normalise_zk_id(zk_id)
        pts = self.store.retrieve([point_id(zk_id)])
        if not pts or pts[0].payload.get("kind") != "note":
            raise NoteNotFound(f"no note {zk_id}: check the id (search_memory lists ids)",
                               zk_id=zk_id)
        payload = pts[0].payload
        if tenancy.in_call() and not self.visible(payload):
            # A caller with its own identity (HTTP token, proxied agent) never reaches
            # another user's notes or a sibling agent's private ones, even by id.
            raise NoteNotFound(f"no note {zk_id}: check the id (search_memory lists ids)",
                               zk_id=zk_id)
        if payload.get("forgotten") and not include_forgotten:
            raise NoteNotFound(f"note {zk_id} was forgotten; restore_note brings it back "
                               "within the grace period", zk_id=zk_id)
        return payload
