"""The HyPE job (``kind = "hype"``): the chat model writes a few questions a permanent note
answers; each is stored as an extra vector of the note (storage and search:
brain/memory/hype.py).

- Queued for a permanent note when it is added, distilled from fleeting, updated or
  restored, and by the start-up sweep for a live permanent note that has no question point
  and never had a HyPE job (notes written while no model was configured, an import).
- The reply is a JSON list of questions (``{"questions": [...]}`` or a bare list), parsed
  defensively; each question is whitespace-normalised, cut to ``max_chars`` and redacted
  like any text entering the store. A reply with no usable question is a failed step: the
  job is retried and finally marked failed, the note keeps no question point, nothing else
  changes.
- Written under the memory write lock after checking the note still has the content the
  questions were asked about and is still a live permanent note; the note's earlier points
  are dropped first, so a re-run replaces them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from brain.agentic.enrichment import ChatRouter, Interrupted, Paused
from brain.embedding.registry import embed_passages
from brain.errors import LLMError, NoteNotFound
from brain.llm.prompts import Router, parse_json_object
from brain.memory import MemoryService, hype
from brain.trust.redact import redact
from brain.vector_store import Point

log = logging.getLogger(__name__)

HYPE_JOB = "hype"
MAX_QUESTIONS = 10
_CONTENT_CHARS = 4000
_PROMPT = """Write {n} short questions that a user of this memory might later ask and that this
note answers. Vary the wording; do not copy sentences from the note.
Reply with JSON only: {{"questions": ["...", "..."]}}
- at most {n} questions, each at most {chars} characters, each understandable on its own

Note:
{content}"""
_SYSTEM = "You maintain a Zettelkasten memory for a coding agent. Reply with JSON only."

Outcome = Literal["written", "skipped", "superseded"]


@dataclass(frozen=True, slots=True)
class HypeConfig:
    questions: int = 3  # per note; 0 disables HyPE
    max_chars: int = 200  # per question


def ask_questions(router: Router, content: str, n: int, max_chars: int) -> list[str] | None:
    """Up to ``n`` questions the note answers, or None when the model gave none usable."""
    prompt = _PROMPT.format(n=n, chars=max_chars, content=content[:_CONTENT_CHARS])
    messages = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}]
    # Roughly 4 characters a token, plus the JSON around them; within the fast tier's caps.
    max_tokens = min(800, 40 + n * (max_chars // 3 + 8))
    try:
        reply = router.complete(messages, "fast", max_tokens=max_tokens)
    except LLMError as error:
        log.info("HyPE: LLM call unavailable (%s)", error.code)
        return None
    questions = parse_questions(reply, n, max_chars)
    if not questions:
        log.info("HyPE: the reply held no usable question")
        return None
    return questions


def parse_questions(reply: Any, n: int, max_chars: int) -> list[str]:
    """The questions of a reply: ``{"questions": [...]}`` or a bare JSON list of strings."""
    if not isinstance(reply, str):
        return []
    data = parse_json_object(reply)
    raw: Any = None
    if data is not None:
        raw = data.get("questions", data.get("question"))
    if raw is None:
        start, end = reply.find("["), reply.rfind("]")
        if 0 <= start < end:
            try:
                raw = json.loads(reply[start : end + 1])
            except ValueError:
                raw = None
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        return []
    out: list[str] = []
    seen: set[str] = set()
    for item in raw:
        if not isinstance(item, str):
            continue
        text = " ".join(item.split())[:max_chars].strip()
        if len(text) < 3 or text.lower() in seen:
            continue
        seen.add(text.lower())
        out.append(text)
        if len(out) >= n:
            break
    return out


class HypeFailed(Exception):
    """The model gave no usable question: no point is written, the job is retried."""


class HypeWriter:
    def __init__(
        self,
        memory: MemoryService,
        router: ChatRouter,
        config: HypeConfig,
        *,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.memory = memory
        self.router = router
        self.cfg = config
        self.stopping = stopping
        self._lock = threading.Lock()
        self.counters = {"notes": 0, "questions": 0, "failures": 0}

    @property
    def enabled(self) -> bool:
        return self.cfg.questions > 0

    def run(self, zk_id: str) -> Outcome:
        memory = self.memory
        try:
            note = memory.get_payload(zk_id)
        except NoteNotFound:
            hype.drop(memory.store, [zk_id])
            return "skipped"
        if note.get("memory_type") != "permanent":
            hype.drop(memory.store, [note["zk_id"]])  # fleeting or archived: none
            return "skipped"
        n = min(self.cfg.questions, MAX_QUESTIONS)
        questions = ask_questions(self.router, note["content"], n, self.cfg.max_chars)
        if self.stopping():
            raise Interrupted("service stopping")
        if questions is None:
            self._count("failures")
            if self.router.status()["paused_by_cap"]:
                raise Paused("HyPE: daily token cap reached")
            raise HypeFailed(f"HyPE of {note['zk_id']}: no usable questions")
        if memory.cfg.redact_secrets:
            questions = [redact(q).text for q in questions]
        vectors = embed_passages(memory.embedder, questions, memory.cfg.pool_long_text)
        with memory._write_lock:
            try:
                current = memory.get_payload(note["zk_id"])
            except NoteNotFound:
                return "superseded"
            if current["content"] != note["content"] or current["memory_type"] != "permanent":
                return "superseded"  # its own job (updated / restored) follows
            _, ts = memory._now()
            by = f"llm:{self.router.fast_model}"
            points = [
                Point(hype.hype_point_id(current["zk_id"], i),
                      hype.hype_payload(current, i, q, memory.meta.model, by, ts),
                      [float(x) for x in vec])
                for i, (q, vec) in enumerate(zip(questions, vectors, strict=True))
            ]
            hype.drop(memory.store, [current["zk_id"]])
            memory.store.upsert(points)
            memory.hype_written()
        self._count("notes")
        self._count("questions", len(points))
        return "written"

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] += n
