"""Sessions of a coding agent: what to load at the start, what to leave at the end.

``get_session_context(project)`` gathers project_context notes, the current handoff (the
active ``open_thread`` and the ``session_summary`` written with it), recent decisions,
mistakes and fixes, pinned notes and counts. ``get_inbox(project)`` lists fleeting notes
waiting to be distilled, oldest first. ``open_session`` returns both in one call. On a git
branch, that branch's notes come first and other branches' open notes are left out
(:func:`on_branch`, brain/citations/branches.py).

``close_session`` writes the handoff in a crash-safe order: the session_summary, then the
new active open_thread (both carrying one ``handoff_id``), a flush, and only then archives
the older active open_threads. A crash before the flush leaves the previous open_thread
active and the context pairs it with its own summary; a crash after it leaves two active
threads and the context shows the newest one; the next close_session archives the rest.

With a ``transcript_excerpt`` (the hooks send the session's newest turns) and a chat model
configured, the redacted excerpt is kept in the summary's payload (``handoff_excerpt``) and
a background ``handoff`` job (brain/agentic/handoff.py) rewrites the handoff with the model;
close_session itself never waits on it. Without a model the excerpt is not stored.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from brain.citation import summary as citation_summary
from brain.clock import Clock, iso
from brain.errors import InvalidArgument
from brain.memory import MemoryService, check_project
from brain.notes import NOTE_KINDS
from brain.trust import tenancy
from brain.trust.limits import MAX_EXCERPT_CHARS, too_large
from brain.vector_store import Filter, Match, MatchAny, VectorStore, scroll_all
from brain.vector_store.base import Condition

DAY = 86_400.0
LIVE = ("permanent", "fleeting")
EXCERPT_KEY = "handoff_excerpt"  # the summary's payload field holding the redacted excerpt

# Test hook: called with a step name ("summary_written", "handoff_durable") during
# close_session. Crash tests set it in a subprocess to kill the process at that point.
after_step: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if after_step is not None:
        after_step(name)


def _lines(value: str | Sequence[str] | None, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(f"{name} must be a list of strings", field=name)
    return [v.strip() for v in value if v.strip()]


def _bullets(title: str, items: list[str]) -> str:
    body = "\n".join(f"- {i}" for i in items) if items else "- (none)"
    return f"{title}:\n{body}"


def summary_text(project: str, s: dict[str, Any]) -> str:
    """The content of a session_summary note from its ``session`` fields."""
    return "\n\n".join([
        f"Session summary ({project}): {s['objective']}",
        _bullets("Completed", s["completed"]),
        _bullets("Blockers", s["blockers"]),
        _bullets("Next steps", s["next_steps"]),
        _bullets("Key files", s["key_files"]),
    ])


def thread_text(project: str, s: dict[str, Any]) -> str:
    """The content of an open_thread note from its ``session`` fields."""
    return "\n\n".join([
        f"Open thread ({project}): continue '{s['objective']}'",
        _bullets("Next steps", s["next_steps"]),
        _bullets("Blockers", s["blockers"]),
        _bullets("Key files", s["key_files"]),
    ])


class HandoffRefinement(Protocol):
    """Who rewrites a handoff with the chat model in the background (AgenticService)."""

    def refines_handoffs(self) -> bool: ...

    def queue_handoff(self, zk_id: str) -> bool: ...


class SessionService:
    def __init__(
        self,
        memory: MemoryService,
        store: VectorStore,
        clock: Clock,
        *,
        refinement: Callable[[], HandoffRefinement | None] = lambda: None,
    ) -> None:
        self.memory = memory
        self.store = store
        self.clock = clock
        self.refinement = refinement  # called only when an excerpt comes with a handoff

    def _tenancy(self) -> tuple[Filter | Match, ...]:
        """Only the caller's notes: its user's, without sibling agents' private ones."""
        return tenancy.conditions(self.memory.identity)

    def _notes(
        self,
        project: str,
        kinds: Sequence[str],
        *,
        types: Sequence[str] = LIVE,
        pinned: bool = False,
        **match: str | int | bool,
    ) -> list[dict[str, Any]]:
        """Live notes of a project and kinds, newest first."""
        must: list[Condition | Filter] = [
            Match("kind", "note"),
            Match("project", project),
            MatchAny("memory_type", tuple(types)),
        ]
        if kinds:
            must.append(MatchAny("note_kind", tuple(kinds)))
        must += [Match(k, v) for k, v in match.items()]
        must += self._tenancy()
        # forgotten / pinned are checked here, not in the filter: boolean matches are not
        # reliable on every backend (qdrant-edge-py 0.9 turns True into 1).
        flt = Filter(must=tuple(must))
        notes = [
            p.payload
            for p in scroll_all(self.store, flt)
            if not p.payload.get("forgotten") and (not pinned or p.payload.get("pinned"))
            and not p.payload.get("valid_to")  # superseded: history (brain/memory/supersede.py)
        ]
        notes.sort(key=lambda p: (float(p.get("created_ts") or 0), p["zk_id"]), reverse=True)
        return notes

    # ------------------------------------------------------------------ reads
    def active_threads(self, project: str) -> list[dict[str, Any]]:
        return self._notes(project, ("open_thread",), thread_state="active")

    def get_session_context(self, project: str | None, limit: int = 5) -> dict[str, Any]:
        """What a session starts from, each fact once: the handoff (its session fields, not
        the two notes that render them), then context notes, recent decisions, recent
        mistakes with their fixes under them, fixes of mistakes not listed, and pinned notes
        not listed above, as compact rows (:func:`brief`); ``get_note`` reads one whole."""
        project = self.memory.project_of(project)
        branch = self._branch(project)
        threads = on_branch(self.active_threads(project), branch)
        thread = threads[0] if threads else None
        summaries = on_branch(self._notes(project, ("session_summary",)), branch)
        summary = summaries[0] if summaries else None
        if thread is not None:
            # The summary written with the active thread; a summary whose thread never got
            # written (a crash mid-close) is not the current handoff.
            paired = [s for s in summaries if s.get("handoff_id") == thread.get("handoff_id")]
            summary = paired[0] if paired else summary
        live = on_branch(self._notes(project, ()), branch)
        counts = {k: 0 for k in NOTE_KINDS}
        for p in live:
            counts[p["note_kind"]] = counts.get(p["note_kind"], 0) + 1
        kind = {k: [p for p in live if p["note_kind"] == k] for k in
                ("project_context", "decision", "mistake", "fix")}
        shown: set[str] = set()
        context = self._rows(kind["project_context"], shown)
        decisions = self._rows(kind["decision"][:limit], shown)
        mistakes = self._rows(kind["mistake"][:limit], shown)
        fixes_of: dict[str, list[dict[str, Any]]] = {}
        for fix in kind["fix"]:
            for target, relation in (fix.get("link_types") or {}).items():
                if relation == "fixes":
                    fixes_of.setdefault(target, []).append(fix)
        for row in mistakes:
            fixes = fixes_of.get(row["zk_id"], [])
            if fixes:
                row["fixes"] = self._rows(fixes, shown)
        orphan_fixes = self._rows([f for f in kind["fix"] if f["zk_id"] not in shown][:limit],
                                  shown)
        pinned = self._rows([p for p in live if p.get("pinned")], shown)
        return {
            "project": project,
            "handoff": _handoff(summary, thread),
            "other_active_threads": [t["zk_id"] for t in threads[1:]],
            "project_context": context,
            "recent_decisions": decisions,
            "recent_mistakes": mistakes,
            "recent_fixes": orphan_fixes,
            "pinned": pinned,
            "counts": {
                "by_note_kind": {k: v for k, v in counts.items() if v},
                "notes": sum(counts.values()),
                "inbox": sum(1 for p in live if p.get("memory_type") == "fleeting"),
            },
        }

    def _branch(self, project: str) -> str | None:
        """The caller's git branch in ``project`` (None: no git, no branch rule)."""
        view = self.memory.branches
        return view.current(project) if view is not None else None

    def _rows(self, notes: Sequence[dict[str, Any]], shown: set[str]) -> list[dict[str, Any]]:
        """Compact rows of the notes not yet ``shown`` (which it then records)."""
        rows = [brief(p) for p in notes if p["zk_id"] not in shown]
        shown.update(r["zk_id"] for r in rows)
        return rows

    def get_inbox(self, project: str | None = None, limit: int = 50) -> dict[str, Any]:
        """Fleeting notes to distill, oldest first, with their age in days."""
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 500:
            raise InvalidArgument("limit must be 1..500", field="limit")
        must: list[Condition | Filter] = [Match("kind", "note"), Match("memory_type", "fleeting"),
                           *self._tenancy()]
        if project is not None:
            must.append(Match("project", check_project(project)))
        flt = Filter(must=tuple(must))
        notes = [
            p.payload for p in scroll_all(self.store, flt) if not p.payload.get("forgotten")
        ]
        notes.sort(key=lambda p: (float(p.get("created_ts") or 0), p["zk_id"]))
        if project is not None:
            notes = on_branch(notes, self._branch(check_project(project)))
        now_ts = self.clock.now().timestamp()
        items = [
            self.memory.public(p, age_days=round((now_ts - float(p.get("created_ts") or now_ts)) / DAY, 3))
            for p in notes[:limit]
        ]
        return {
            "project": project,
            "notes": items,
            "count": len(notes),
            "truncated": len(notes) > limit,
        }

    def open_session(self, project: str | None) -> dict[str, Any]:
        """get_session_context and the inbox in one call; an inbox note already shown in the
        context is listed by id and age only."""
        project = self.memory.project_of(project)
        self.memory.begin_session(project)  # [memory] session_context: notes chain from here
        context = self.get_session_context(project)
        inbox = self.get_inbox(project)
        shown = {r["zk_id"] for key in _NOTE_SECTIONS for r in _with_fixes(context[key])}
        inbox["notes"] = [
            {"zk_id": n["zk_id"], "age_days": n["age_days"]} if n["zk_id"] in shown
            else {**brief(n), "age_days": n["age_days"]}
            for n in inbox["notes"]
        ]
        return {"context": context, "inbox": inbox}

    # ------------------------------------------------------------------ handoff
    def _clean(self, items: list[str], name: str, kinds: set[str]) -> list[str]:
        """Each item through the write path's redaction: the structured copy kept in the
        payload must not hold what the note's content had redacted."""
        out = []
        for item in items:
            text, found = self.memory.prepare_content(item, name)
            kinds.update(found)
            out.append(text)
        return out

    def close_session(
        self,
        project: str | None,
        objective: str,
        completed: str | Sequence[str] | None = None,
        blockers: str | Sequence[str] | None = None,
        next_steps: str | Sequence[str] | None = None,
        key_files: str | Sequence[str] | None = None,
        transcript_excerpt: str | None = None,
    ) -> dict[str, Any]:
        project = self.memory.project_of(project)
        if not isinstance(objective, str) or not objective.strip():
            raise InvalidArgument(
                "objective is empty: say what this session set out to do", field="objective"
            )
        excerpt = _excerpt(transcript_excerpt)
        refiner = self.refinement() if excerpt else None
        if refiner is not None and not refiner.refines_handoffs():
            refiner = None  # no model: the excerpt is not kept
        kinds: set[str] = set()
        objective = self._clean([objective.strip()], "objective", kinds)[0]
        done = self._clean(_lines(completed, "completed"), "completed", kinds)
        blocked = self._clean(_lines(blockers, "blockers"), "blockers", kinds)
        nxt = self._clean(_lines(next_steps, "next_steps"), "next_steps", kinds)
        files = self._clean(_lines(key_files, "key_files"), "key_files", kinds)
        previous = [t["zk_id"] for t in self.active_threads(project)]
        handoff_id = secrets.token_hex(6)
        now = iso(self.clock.now())
        session: dict[str, Any] = {
            "objective": objective.strip(),
            "completed": done,
            "blockers": blocked,
            "next_steps": nxt,
            "key_files": files,
            "closed_at": now,
        }
        extra: dict[str, Any] = {"handoff_id": handoff_id, "session": session}
        if refiner is not None and excerpt:
            # Redacted like the note: only the redacted text is ever at rest or sent out.
            kept = self._clean([excerpt], "transcript_excerpt", kinds)[0]
            extra[EXCERPT_KEY] = kept[-MAX_EXCERPT_CHARS:]
            session = {**session, "refined": False}
            extra["session"] = session
        summary = self.memory.add(
            summary_text(project, session),
            project,
            "permanent",
            "session_summary",
            tags=["session"],
            extra=extra,
            autolink=False,
            soft_cites=files,  # the key files it names: cited when they are in a source
        )
        _step("summary_written")
        links = [(summary.note["zk_id"], "extends")]
        thread = self.memory.add(
            thread_text(project, session),
            project,
            "permanent",
            "open_thread",
            tags=["handoff"],
            extra={"handoff_id": handoff_id, "thread_state": "active", "session": session},
            links=links,
            autolink=False,
        )
        self.store.flush()
        _step("handoff_durable")
        refining = refiner is not None and refiner.queue_handoff(summary.note["zk_id"])
        archived = []
        for zk in previous:
            self.memory.set_state(zk, thread_state="superseded", superseded_by=thread.note["zk_id"])
            self.memory.archive(zk)
            archived.append(zk)
        if archived:
            self.store.flush()
        redacted = sorted(kinds | set(summary.redacted) | set(thread.redacted))
        return {
            "session_summary": summary.note,
            "open_thread": {**thread.note, "thread_state": "active"},
            "archived_threads": archived,
            "handoff_id": handoff_id,
            "redacted": redacted,
            "refining": bool(refining),
        }


def _excerpt(value: str | None) -> str:
    """The transcript excerpt, checked before anything is written: at most
    MAX_EXCERPT_CHARS characters; blank means none."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument("transcript_excerpt must be a string", field="transcript_excerpt")
    if len(value) > MAX_EXCERPT_CHARS:
        raise too_large("transcript_excerpt", len(value), MAX_EXCERPT_CHARS,
                        "Send the newest part of the transcript only.")
    return value.strip()


_NOTE_SECTIONS = ("project_context", "recent_decisions", "recent_mistakes", "recent_fixes",
                  "pinned")
_SESSION_FIELDS = ("objective", "completed", "blockers", "next_steps", "key_files",
                   "closed_at", "refined")


def brief(payload: dict[str, Any]) -> dict[str, Any]:
    """A note as a session opening lists it: id, text, when; the title only where it says
    more than the start of the text; pinned and the state of cited code only when they
    matter."""
    content = str(payload.get("content", ""))
    title = str(payload.get("title", ""))
    row: dict[str, Any] = {"zk_id": payload.get("zk_id"), "content": content}
    if title and not content.startswith(title.rstrip("\u2026").rstrip()):
        row["title"] = title
    row["created"] = payload.get("created")
    if payload.get("pinned"):
        row["pinned"] = True
    if payload.get("cites"):
        cites = citation_summary(payload["cites"])
        if cites.get("state") != "fresh":
            row["citations"] = cites
    return row


def on_branch(notes: list[dict[str, Any]], branch: str | None) -> list[dict[str, Any]]:
    """A session on ``branch`` sees that branch's open notes first (newest first among
    them), then the project-wide ones; notes still open on another branch are left out
    (brain/citations/branches.py). ``None`` (no git): every note, as listed."""
    if branch is None:
        return notes

    def open_on(p: dict[str, Any]) -> bool:
        return float(p.get("branch_open") or 0) >= 1

    kept = [p for p in notes if not open_on(p) or (branch and p.get("branch") == branch)]
    return sorted(kept, key=lambda p: not open_on(p))  # stable: the order within each holds


def _with_fixes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*rows, *(f for r in rows for f in r.get("fixes", []))]


def _handoff(summary: dict[str, Any] | None,
             thread: dict[str, Any] | None) -> dict[str, Any] | None:
    """The current handoff once: its session fields (the summary and the thread notes are two
    renderings of them) with the ids of both notes."""
    note = summary or thread
    if note is None:
        return None
    session = note.get("session") or {}
    return {
        "summary_zk_id": summary["zk_id"] if summary else None,
        "thread_zk_id": thread["zk_id"] if thread else None,
        "handoff_id": note.get("handoff_id"),
        "thread_state": thread.get("thread_state") if thread else None,
        **{k: session[k] for k in _SESSION_FIELDS if k in session},
    }

