"""The handoff job (``kind = "handoff"``): the chat model rewrites a session's heuristic
handoff from the transcript excerpt the hooks sent with it (brain/workflow/session.py keeps it,
redacted, in the summary's payload as ``handoff_excerpt`` only when a model is configured).

- Queued by close_session after the handoff is durable; the start-up sweep queues a summary
  that still holds an excerpt and has no open or failed job (a kill between the two).
- The model gets the heuristic fields and the excerpt, both as stored: redacted. It answers
  with JSON ``{objective, completed[], blockers[], next_steps[], key_files[]}``, parsed
  defensively and bounded (MAX_ITEMS items of at most MAX_ITEM_CHARS characters; a key file
  must appear in the draft or the excerpt).
- A usable reply rewrites the summary's content through the normal update path (redacted,
  re-embedded, re-enriched) and its ``session`` fields, with ``session.refined = true``; the
  open thread of the same handoff, while it is still the active one, gets the same. The
  excerpt is then dropped.
- A junk reply keeps the heuristic handoff: the excerpt is dropped, the job is done and
  ``junk`` is counted. An unreachable model is a failed step: the job is retried, then
  marked failed, and the heuristic handoff stays; the excerpt is dropped then too
  (:meth:`HandoffRefiner.give_up`): nothing of a transcript stays at rest without a use.
- Idempotent: a summary already refined, or without an excerpt, is skipped. A kill between
  the content write and the fields write leaves the excerpt, so the job's second run (the
  queue re-runs a running job at start) finishes it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any, Literal

from brain.agentic.enrichment import ChatRouter, Interrupted, Paused
from brain.errors import LLMError, NoteNotFound
from brain.llm.prompts import parse_json_object
from brain.memory import MemoryService
from brain.vector_store import Filter, Match
from brain.workflow.session import EXCERPT_KEY, summary_text, thread_text

log = logging.getLogger(__name__)

HANDOFF_JOB = "handoff"
FIELDS = ("completed", "blockers", "next_steps", "key_files")
MAX_ITEMS = 8
MAX_ITEM_CHARS = 300
_PROMPT = """Write the handoff of a coding session for the agent that continues the work.
The draft was built by heuristics from the transcript and may be wrong or incomplete; the
excerpt is the newest part of the session (secrets are already replaced by [REDACTED:...]).
Keep what the next session needs; do not invent work that the excerpt does not show.
Reply with JSON only:
{{"objective": "...", "completed": ["..."], "blockers": ["..."], "next_steps": ["..."],
"key_files": ["..."]}}
- objective: one sentence, what the session set out to do
- at most {items} items per list, each at most {chars} characters; [] when there is none
- blockers: what still fails or blocks; key_files: paths named in the draft or the excerpt

Draft:
{draft}

Transcript excerpt:
{excerpt}"""
_SYSTEM = "You write handoff notes between sessions of a coding agent. Reply with JSON only."

Outcome = Literal["refined", "junk", "skipped", "superseded"]


class HandoffFailed(Exception):
    """The model could not be reached: the heuristic handoff stays, the job is retried."""


def _line(value: Any, cap: int = MAX_ITEM_CHARS) -> str:
    return " ".join(str(value).split())[:cap].strip() if isinstance(value, str) else ""


def parse_handoff(reply: Any, sources: str) -> dict[str, Any] | None:
    """The handoff of a model reply, bounded; None when it is no JSON object or has no
    objective. A string where a list belongs is a list of one.

    ``sources`` is the text the model saw: a key file it does not contain is dropped."""
    data = parse_json_object(reply)
    if data is None:
        return None
    out: dict[str, Any] = {"objective": _line(data.get("objective"))}
    for name in FIELDS:
        raw = data.get(name)
        raw = [raw] if isinstance(raw, str) else raw
        items: list[str] = []
        for item in raw if isinstance(raw, list) else []:
            text = _line(item)
            if text and text not in items and (name != "key_files" or text in sources):
                items.append(text)
        out[name] = items[:MAX_ITEMS]
    return out if out["objective"] else None  # the one field a handoff cannot lack


class HandoffRefiner:
    def __init__(
        self,
        memory: MemoryService,
        router: ChatRouter,
        *,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.memory = memory
        self.router = router
        self.stopping = stopping
        self._lock = threading.Lock()
        self.counters = {"refined": 0, "junk": 0, "failures": 0}

    def run(self, zk_id: str) -> Outcome:
        memory = self.memory
        try:
            note = memory.get_payload(zk_id)
        except NoteNotFound:
            return "skipped"
        session = note.get("session") or {}
        excerpt = str(note.get(EXCERPT_KEY) or "")
        if note.get("note_kind") != "session_summary" or session.get("refined") or not excerpt:
            return "skipped"  # refined already, or nothing to refine from
        draft = json.dumps({k: session.get(k) for k in ("objective", *FIELDS)}, indent=1)
        reply = self._ask(draft, excerpt)
        if self.stopping():
            raise Interrupted("service stopping")
        handoff = parse_handoff(reply, draft + "\n" + excerpt)
        with memory._write_lock:
            try:
                current = memory.get_payload(zk_id)
            except NoteNotFound:
                return "superseded"
            if current.get(EXCERPT_KEY) != excerpt or current.get("session") != session:
                return "superseded"
            if handoff is None:
                log.info("handoff of %s: the reply held no usable handoff; heuristic kept",
                         zk_id)
                memory.apply_fields(zk_id, {EXCERPT_KEY: ""}, reembed=False)
                self._count("junk")
                return "junk"
            refined = {**session, **handoff, "refined": True,
                       "refined_by": f"llm:{self.router.fast_model}"}
            project = current["project"]
            self._rewrite(current, summary_text(project, refined), refined)
            for thread in self._active_threads(current):
                self._rewrite(thread, thread_text(project, refined), refined)
            # Last: while the excerpt is there, a re-run (after a kill) finishes the job.
            memory.apply_fields(zk_id, {EXCERPT_KEY: ""}, reembed=False)
        self._count("refined")
        return "refined"

    def give_up(self, zk_id: str) -> None:
        """The job failed for good: keep the heuristic handoff, drop the excerpt."""
        with self.memory._write_lock:
            try:
                if self.memory.get_payload(zk_id).get(EXCERPT_KEY):
                    self.memory.apply_fields(zk_id, {EXCERPT_KEY: ""}, reembed=False)
            except NoteNotFound:
                pass

    def _ask(self, draft: str, excerpt: str) -> str:
        prompt = _PROMPT.format(items=MAX_ITEMS, chars=MAX_ITEM_CHARS // 2, draft=draft,
                                excerpt=excerpt)
        messages = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}]
        try:
            return self.router.complete(messages, "fast", max_tokens=900)
        except LLMError as error:
            self._count("failures")
            if self.router.status()["paused_by_cap"]:
                raise Paused("handoff: daily token cap reached") from error
            raise HandoffFailed(f"handoff: LLM call unavailable ({error.code})") from error

    def _rewrite(self, note: dict[str, Any], content: str, session: dict[str, Any]) -> None:
        """New content through the update path (redaction, embedding, the "updated" jobs),
        then the structured fields (apply_fields redacts them too)."""
        if note["content"] != content:
            self.memory.update(note["zk_id"], content)
        self.memory.apply_fields(note["zk_id"], {"session": session}, reembed=False)

    def _active_threads(self, summary: dict[str, Any]) -> list[dict[str, Any]]:
        flt = Filter(must=(Match("note_kind", "open_thread"),
                           Match("handoff_id", str(summary.get("handoff_id") or "")),
                           Match("project", summary["project"])))
        return [p for p in self.memory.notes(flt)
                if p.get("thread_state") == "active" and not p.get("forgotten")]

    def _count(self, name: str) -> None:
        with self._lock:
            self.counters[name] += 1
