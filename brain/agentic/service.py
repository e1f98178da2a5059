"""Agentic memory: background LLM enrichment, typed links, evolution, deep search,
consolidation and the Obsidian mirror, as one service (``brain.agentic.service``).

The write path never waits on a model. ``memory.listeners`` hands each written note
("added", "updated", "distilled") to a durable SQLite queue (one insert); a worker thread
runs the jobs (see ``enrichment.py``). Decisions:

- No model configured (no ``llm.base_url`` and no ``llm.api_key``), or ``llm.enrichment``
  off: enrichment stays heuristic and nothing is queued; ``status()`` says
  ``enrichment_mode = "heuristic"``. When a model is configured later, a start-up sweep
  (``llm.backfill``) queues every still-heuristic note without an open or failed job.
- The same sweep closes the gaps of the listener: a process killed between the note's
  store write and the queue insert, or a power loss eating the last WAL commits.
- A failed job (junk reply, HTTP error, timeout) keeps the heuristic fields, is counted and
  retried with exponential backoff up to ``llm.job_max_attempts``, then marked failed.
- The daily token cap pauses the queue (``queue.paused``) without spending attempts.
- The same queue runs HyPE (``hype``, hype.py) and the refinement of session handoffs
  (``handoff``, handoff.py), which close_session queues when it got a transcript excerpt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.agentic.deep_search import deep_search
from brain.agentic.enrichment import (
    ChatRouter,
    EnrichConfig,
    Enricher,
    Interrupted,
    Paused,
    StepFailed,
)
from brain.agentic.handoff import HANDOFF_JOB, HandoffFailed, HandoffRefiner
from brain.agentic.hype import HYPE_JOB, HypeConfig, HypeFailed, HypeWriter
from brain.agentic.obsidian import ObsidianMirror
from brain.agentic.queue import Job, JobQueue
from brain.errors import LLMError, NoteNotFound
from brain.memory import MemoryService, RecallFilter, hype
from brain.notes import point_id
from brain.trust import tenancy
from brain.trust.identity import Identity, acting_as
from brain.vector_store import Filter, Match, VectorStore, scroll_all
from brain.workflow.session import EXCERPT_KEY

log = logging.getLogger(__name__)

ENRICH = "enrich"
_EVENTS = ("added", "updated", "distilled")
# A note that is (again) a live permanent one gets its hypothetical questions (re)written.
_HYPE_EVENTS = ("added", "updated", "distilled", "restored")


@dataclass(frozen=True, slots=True)
class AgenticConfig:
    """What the service reads of ``[llm]``, ``[workers.enrichment]`` and ``[memory]``."""

    enrichment: bool = True  # llm.enrichment and the enrichment worker both enabled
    backfill: bool = True
    max_attempts: int = 4
    backoff_s: float = 30.0
    poll_s: float = 1.0
    link_candidates: int = 5
    evolve_threshold: float = 0.6
    hype_questions: int = 3  # memory.hype_questions; 0: no HyPE
    hype_question_chars: int = 200


class AgenticService:
    def __init__(
        self,
        memory: MemoryService,
        store: VectorStore,
        router: ChatRouter,
        mirror: ObsidianMirror,
        config: AgenticConfig,
        *,
        home: Path,
        identity: Identity,
        save_graph: Callable[[], None],
    ) -> None:
        self.memory = memory
        self.store = store
        self.router = router
        self.mirror = mirror
        self.identity = identity  # the process's own: owner of notes that name none
        self.save_graph = save_graph
        self.enabled = router.configured and config.enrichment
        self.backfill = config.backfill
        self.max_attempts = config.max_attempts
        self.backoff_s = config.backoff_s
        self.poll_s = min(5.0, config.poll_s)
        self.queue: JobQueue | None = (
            JobQueue(Path(home) / "agentic" / "jobs.sqlite3") if self.enabled else None
        )
        self._stop = threading.Event()
        self.enricher = Enricher(
            memory,
            store,
            router,
            EnrichConfig(config.link_candidates, config.evolve_threshold),
            save_graph=save_graph,
            on_changed=self.mirror.enqueue,
            stopping=self._stop.is_set,
        )
        self.hype = HypeWriter(memory, router,
                               HypeConfig(config.hype_questions, config.hype_question_chars),
                               stopping=self._stop.is_set)
        self.handoffs = HandoffRefiner(memory, router, stopping=self._stop.is_set)
        self.jobs = {"done": 0, "retried": 0, "failed": 0, "paused": 0, "errors": 0}
        self._thread: threading.Thread | None = None
        self._busy = False
        self._paused = False

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        memory = self.memory
        if self.mirror.mode != "off":
            memory.listeners.append(self.mirror.on_event)
            self.mirror.start()
        if self.queue is None or self._thread is not None:
            return
        recovered = self.queue.recover()
        if recovered:
            log.info("enrichment: %d interrupted job(s) will run again", recovered)
        memory.listeners.append(self._on_event)
        self._stop.clear()
        self._thread = threading.Thread(target=self._worker, name="agentic-enrichment", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 3.0) -> None:
        for listener in (self._on_event, self.mirror.on_event):
            if listener in self.memory.listeners:
                self.memory.listeners.remove(listener)
        self._stop.set()
        if self.queue is not None:
            self.queue.wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout)
            alive = self._thread.is_alive()
            self._thread = None
            if alive:  # stuck in a model call: its job stays running and is re-run next start
                log.warning("enrichment worker still busy at close; its job resumes next start")
        self.mirror.stop()
        if self.queue is not None and not self._busy:
            self.queue.close()

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until no job is pending or running and the mirror is idle. True if drained."""
        deadline = time.monotonic() + timeout
        while self.queue is not None:
            counts = self.queue.counts()
            if counts["pending"] == 0 and counts["running"] == 0 and not self._busy:
                break
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return self.mirror.drain(max(0.0, deadline - time.monotonic()))

    # -- feeding ----------------------------------------------------------------------------
    def _on_event(self, event: str, payload: dict[str, Any]) -> None:
        if self.queue is None:
            return
        if event in _EVENTS:
            self.queue.enqueue(payload["zk_id"], ENRICH)
        if (event in _HYPE_EVENTS and self.hype.enabled
                and payload.get("memory_type") == "permanent" and not payload.get("forgotten")):
            self.queue.enqueue(payload["zk_id"], HYPE_JOB)

    def enqueue(self, zk_id: str) -> bool:
        """Queue (re-)enrichment of one note; False when LLM enrichment is off or queued."""
        return self.queue.enqueue(zk_id, ENRICH) if self.queue is not None else False

    def refines_handoffs(self) -> bool:
        """Whether close_session keeps a transcript excerpt for the model to refine."""
        return self.queue is not None

    def queue_handoff(self, zk_id: str) -> bool:
        """Queue the refinement of a session summary (brain/agentic/handoff.py)."""
        return self.queue.enqueue(zk_id, HANDOFF_JOB) if self.queue is not None else False

    def _backfill_handoffs(self) -> int:
        """Queue summaries that still hold an excerpt and have no open or failed job (a
        process killed between close_session's write and its enqueue)."""
        assert self.queue is not None
        flt = Filter(must=(Match("note_kind", "session_summary"),))
        waiting = [p["zk_id"] for p in self.memory.notes(flt)
                   if p.get(EXCERPT_KEY) and not p.get("forgotten")]
        tried = self.queue.open_or_failed(waiting, HANDOFF_JOB) if waiting else set()
        missing = [z for z in waiting if z not in tried]
        for zk_id in missing:
            self.queue.enqueue(zk_id, HANDOFF_JOB)
        return len(missing)

    def _backfill(self) -> int:
        assert self.queue is not None
        heuristic = [
            p["zk_id"]
            for p in self.memory.notes()
            if p.get("enriched_by") == "heuristic"
            and not p.get("forgotten")
            and p.get("memory_type") in ("permanent", "fleeting")
        ]
        covered = self.queue.open_or_failed(heuristic, ENRICH)
        missing = [z for z in heuristic if z not in covered]
        for zk_id in missing:
            self.queue.enqueue(zk_id, ENRICH)
        if missing:
            log.info("enrichment backfill: queued %d heuristic note(s)", len(missing))
        return len(missing)

    def backfill_hype(self) -> int:
        """Queue HyPE for notes that lack it (after an import); 0 when HyPE is off."""
        if self.queue is None or not self.hype.enabled:
            return 0
        return self._backfill_hype()

    def _backfill_hype(self) -> int:
        """Queue HyPE for each live permanent note without question points and without an
        open or failed HyPE job: written or updated while no model was configured, imported,
        or from before HyPE. (A finished job leaves points unless a later change dropped
        them; a failed one is not retried by the sweep.)"""
        assert self.queue is not None
        if not self.hype.enabled:
            return 0
        live = [p["zk_id"] for p in self.memory.notes()
                if p.get("memory_type") == "permanent" and not p.get("forgotten")]
        if not live:
            return 0
        have = {str(p.payload.get("parent_id"))
                for p in scroll_all(self.store, Filter(must=(Match("kind", hype.HYPE),)))}
        tried = self.queue.open_or_failed([z for z in live if z not in have], HYPE_JOB)
        missing = [z for z in live if z not in have and z not in tried]
        for zk_id in missing:
            self.queue.enqueue(zk_id, HYPE_JOB)
        if missing:
            log.info("HyPE backfill: queued %d note(s)", len(missing))
        return len(missing)

    # -- the worker -------------------------------------------------------------------------
    def _worker(self) -> None:
        assert self.queue is not None
        if self.backfill:
            try:
                self._backfill()
                self._backfill_hype()
                self._backfill_handoffs()
            except Exception:  # noqa: BLE001 - the queue still runs
                log.exception("enrichment backfill failed")
        while not self._stop.is_set():
            try:
                self._step()
            except Exception:  # noqa: BLE001 - e.g. store closing under us; retried
                log.exception("enrichment worker step failed")
                self._stop.wait(self.poll_s)

    def _step(self) -> None:
        assert self.queue is not None
        self._paused = bool(self.router.status()["paused_by_cap"])
        if self._paused:
            self._stop.wait(self.poll_s)
            return
        self.queue.wakeup.clear()
        self._busy = True
        try:
            job = self.queue.claim()
            if job is not None:
                self._run(job)
                return
        finally:
            self._busy = False
        due = self.queue.next_due_in()
        self.queue.wakeup.wait(self.poll_s if due is None else min(due, self.poll_s))

    def _run(self, job: Job) -> None:
        assert self.queue is not None
        try:
            # As the note's owner: its links and evolution stay within what it may see.
            with acting_as(self._owner(job.zk_id)):
                handler = {HYPE_JOB: self.hype.run,
                           HANDOFF_JOB: self.handoffs.run}.get(job.kind, self.enricher.run)
                outcome = handler(job.zk_id)
        except Paused as exc:
            self.jobs["paused"] += 1
            self.queue.retry(job.id, str(exc), self.poll_s, count_attempt=False)
            return
        except Interrupted as exc:
            self.queue.retry(job.id, str(exc), 0.0, count_attempt=False)
            return
        except Exception as exc:  # noqa: BLE001 - StepFailed or anything else: retried
            if (not isinstance(exc, StepFailed | HypeFailed | HandoffFailed)
                    and not self._stop.is_set()):
                self.jobs["errors"] += 1
                log.exception("enrichment of %s failed", job.zk_id)
            if job.attempts >= self.max_attempts:
                self.jobs["failed"] += 1
                self.queue.fail(job.id, str(exc))
                if job.kind == HANDOFF_JOB:
                    self.handoffs.give_up(job.zk_id)
            else:
                self.jobs["retried"] += 1
                self.queue.retry(job.id, str(exc), self.backoff_s * 2 ** (job.attempts - 1))
            return
        self.queue.complete(job.id)
        self.jobs["done"] += 1
        log.debug("enrichment of %s: %s", job.zk_id, outcome)

    def _owner(self, zk_id: str) -> Identity:
        default = self.identity
        pts = self.store.retrieve([point_id(zk_id)])
        return tenancy.owner_of(pts[0].payload, default) if pts else default

    # -- reporting --------------------------------------------------------------------------
    def queue_depth(self) -> int:
        """Jobs pending or running (``brain status`` shows it)."""
        if self.queue is None:
            return 0
        counts = self.queue.counts()
        return counts["pending"] + counts["running"]

    def status(self) -> dict[str, Any]:
        counts = (
            self.queue.counts()
            if self.queue is not None
            else dict.fromkeys(("pending", "running", "done", "failed"), 0)
        )
        llm = self.router.status()
        return {
            "llm": llm,
            "enrichment_mode": "llm" if self.enabled else "heuristic",
            "queue": {
                **counts,
                "paused": bool(llm["paused_by_cap"]),
                "paused_reason": "daily token cap reached" if llm["paused_by_cap"] else "",
            },
            "jobs": dict(self.jobs),
            "fallbacks": self.enricher.counters["fallbacks"],
            "enrichment": dict(self.enricher.counters),
            "hype": {"questions_per_note": self.hype.cfg.questions if self.enabled else 0,
                     **self.hype.counters},
            "handoffs": dict(self.handoffs.counters),
            "obsidian": self.mirror.status(),
        }

    # -- tools ------------------------------------------------------------------------------
    def deep_search(
        self, query: str, rf: RecallFilter | None = None, hops: int = 2, top_k: int = 10
    ) -> dict[str, Any]:
        return deep_search(self.memory, query, rf, hops, top_k)

    def consolidate_clusters(
        self,
        project: str | None,
        dry_run: bool = True,
        selected_cluster_ids: Sequence[str] | None = None,
        min_similarity: float = 0.9,
        min_link_similarity: float = 0.75,
        max_clusters: int = 20,
    ) -> dict[str, Any]:
        from brain.agentic.consolidation import consolidate  # numpy: loaded on first use

        result = consolidate(
            self.memory,
            self.router,
            self.memory.project_of(project),
            dry_run,
            selected_cluster_ids,
            min_similarity,
            min_link_similarity,
            max_clusters,
        )
        if not dry_run:
            self.save_graph()
            for item in result["applied"]:
                for zk_id in [item["merged_note"], *item["archived"]]:
                    self.mirror.enqueue(zk_id)
        return result


def note_loader(memory: MemoryService) -> Callable[[str], dict[str, Any] | None]:
    """How the Obsidian mirror reads a note: its current payload, None once it is gone."""

    def load(zk_id: str) -> dict[str, Any] | None:
        try:
            return memory.get_payload(zk_id)
        except NoteNotFound:
            return None

    return load


class OfflineRouter:
    """Stands in for ModelRouter when no model is configured, without importing the HF
    client (it costs most of a second at every server start)."""

    configured = False
    mode = "offline"

    def __init__(self, fast_model: str, hard_model: str, daily_token_cap: int = 0) -> None:
        self.fast_model = fast_model
        self.hard_model = hard_model
        self.daily_token_cap = daily_token_cap

    def complete(self, messages: list[dict[str, Any]], tier: object, max_tokens: int = 512) -> str:
        """Fails as ModelRouter does without a model (callers check ``configured`` first)."""
        raise LLMError("No chat model configured: set an OpenAI-compatible base URL or an API "
                       "key for HF Inference Providers.", mode="offline")

    def status(self) -> dict[str, Any]:
        return {
            "configured": False,
            "mode": "offline",
            "fast_model": self.fast_model,
            "hard_model": self.hard_model,
            "tokens_today": 0,
            "daily_token_cap": self.daily_token_cap,
            "paused_by_cap": False,
            "calls": 0,
            "failures": 0,
            "last_error": "",
        }


__all__ = ["AgenticConfig", "AgenticService", "OfflineRouter", "note_loader"]
