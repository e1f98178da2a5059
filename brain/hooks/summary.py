"""Text in and out of the hooks (stdlib only): the context injected at session start and per
prompt, cut to a token budget, and the heuristic handoff built from a transcript.

Budgets are in tokens, estimated at CHARS_PER_TOKEN characters each (the hook loads no
tokenizer); items go in priority order and the first one that does not fit ends the list.
"""

from __future__ import annotations

import os

from brain.hooks import CHARS_PER_TOKEN, wire

# typing and collections.abc cost a hook's start ~10 ms; annotations are strings here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_TRANSCRIPT = 4 * 1024 * 1024  # read at most the last 4 MB of a transcript
# close_session's transcript_excerpt: the newest turns, within the server's cap
# (brain.trust.limits.MAX_EXCERPT_CHARS = 8,000; not imported: brain.trust.limits loads re and pathspec).
EXCERPT_CHARS = 6000
_EXCERPT_CUTS = {"User": 1500, "Assistant": 1500, "$": 300, "Failed": 600}
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "edit", "write", "patch"})
PATH_KEYS = ("file_path", "filePath", "notebook_path", "path")
SHELL_TOOLS = frozenset({"Bash", "bash"})
# A "what is left" line of an answer; compiled by summarize only (re costs a hook ~5 ms).
_NEXT = r"^\s*(?:[-*]\s*)?(?:\[ \]\s*|next\b|todo\b|remaining\b|still to do\b)"


def _one_line(text: Any, cap: int) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= cap else s[: cap - 1].rstrip() + "…"


def _kept_line(text: Any, cap: int) -> str:
    """A line of a handoff or excerpt, which the server stores: redacted before it is cut (a
    cut first leaves a token's head, which no pattern then recognises). Imports the
    redaction only here, on the close path."""
    from brain.trust.redact import redact_head

    s = " ".join(str(text or "").split())
    if len(s) <= cap:
        return redact_head(s, cap)
    return redact_head(s, cap - 1).rstrip() + "…"


class _Budget:
    def __init__(self, tokens: int) -> None:
        self.left = max(tokens, 0) * CHARS_PER_TOKEN
        self.lines: list[str] = []

    def add(self, line: str) -> bool:
        if len(line) + 1 > self.left:
            return False
        self.lines.append(line)
        self.left -= len(line) + 1
        return True

    def text(self) -> str:
        return "\n".join(self.lines)


# ------------------------------------------------------------------------------ injected
def code_mark(note: dict[str, Any]) -> str:
    """What a note's citations say, when its cited code is no longer what it saw:
    `` [cited code changed: a.py::f]`` or `` [cited code gone: b.py]``; "" when fresh."""
    cites = note.get("citations")
    if not isinstance(cites, dict) or cites.get("state") in (None, "fresh"):
        return ""
    refs = [str(r) for r in (cites.get("changed") or []) + (cites.get("gone") or [])][:3]
    return f" [cited code {cites.get('state')}: {_one_line(', '.join(refs), 160)}; read the code first]"


def render_session(opened: dict[str, Any], budget_tokens: int) -> str:
    """open_session's answer as a short briefing: handoff, open thread, mistakes with their
    fixes, decisions, context notes, pinned notes, inbox count."""
    ctx = opened.get("context") or {}
    project = ctx.get("project") or "?"
    b = _Budget(budget_tokens)
    if not b.add(
        f"Memory from opencode-brain for project '{project}' (loaded by the session-start hook:"
        " open_session has already run)."
    ):
        return ""
    handoff = ctx.get("handoff")
    if handoff:
        b.add(f"Last handoff: {_one_line(handoff.get('objective'), 200)}")
        for name in ("completed", "blockers", "next_steps"):
            items = [_one_line(x, 160) for x in (handoff.get(name) or [])][:4]
            if items:
                b.add(f"  {name.replace('_', ' ')}: " + "; ".join(items))
    fixes_by_mistake = {
        str(m.get("zk_id")): [_one_line(f.get("title") or f.get("content"), 200)
                              for f in m.get("fixes") or []]
        for m in ctx.get("recent_mistakes") or []
    }
    sections: tuple[tuple[str, list[dict[str, Any]], dict[str, list[str]]], ...] = (
        ("Recent mistakes", ctx.get("recent_mistakes") or [], fixes_by_mistake),
        ("Decisions", ctx.get("recent_decisions") or [], {}),
        ("Project context", ctx.get("project_context") or [], {}),
        ("Pinned", ctx.get("pinned") or [], {}),
    )
    for heading, notes, fixes in sections:
        if not notes or not b.add(f"{heading}:"):
            continue
        for note in notes:
            line = f"- [{note.get('zk_id')}] {_one_line(note.get('title') or note.get('content'), 160)}"
            line += code_mark(note)
            for fix in fixes.get(str(note.get("zk_id")), [])[:2]:
                line += f" -> fix: {fix}"
            if not b.add(line):
                break
    inbox = ((opened.get("inbox") or {}).get("count")) or (ctx.get("counts") or {}).get("inbox")
    if inbox:
        b.add(f"Inbox: {inbox} fleeting note(s) waiting to be distilled (get_inbox).")
    return b.text() if len(b.lines) > 1 else ""


def render_hits(hits: list[dict[str, Any]], budget_tokens: int) -> str:
    """Memories relevant to the prompt; empty when there are none."""
    if not hits:
        return ""
    b = _Budget(budget_tokens)
    if not b.add("Relevant memories from opencode-brain (found by the prompt hook):"):
        return ""
    for hit in hits:
        title = _one_line(hit.get("title"), 120)
        body = _one_line(hit.get("snippet") or hit.get("content"), 300)  # compact or full hits
        short = f"- [{hit.get('zk_id')}] ({hit.get('note_kind')}) {title}{code_mark(hit)}"
        # A compact hit whose title is its whole content has an empty snippet: title alone.
        if not b.add(f"{short}: {body}" if body else short) and (not body or not b.add(short)):
            break
    return b.text() if len(b.lines) > 1 else ""


# ------------------------------------------------------------------------------ transcript
def _records_from_claude(line: dict[str, Any]) -> list[dict[str, Any]]:
    """One Claude Code transcript line -> normalised records ``{role, text}`` and
    ``{tool, input}``."""
    kind = line.get("type")
    msg: dict[str, Any] = line["message"] if isinstance(line.get("message"), dict) else {}
    if kind not in ("user", "assistant") or line.get("isMeta") or line.get("isSidechain"):
        return []
    content = msg.get("content")
    if isinstance(content, str):
        return [{"role": kind, "text": content}]
    out: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            out.append({"role": kind, "text": str(part.get("text") or "")})
        elif part.get("type") == "tool_use":
            out.append({"tool": part.get("name"), "input": part.get("input") or {}})
        elif part.get("type") == "tool_result" and part.get("is_error"):
            out.append({"role": "error", "text": _result_text(part.get("content"))})
    return out


def _result_text(content: Any) -> str:
    """A tool result's text: a string or a list of text parts."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return str(content or "")


def load_transcript(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Records from the payload's ``transcript`` (the OpenCode plugin) or the JSONL file at
    ``transcript_path`` (Claude Code), its last MAX_TRANSCRIPT bytes."""
    inline = payload.get("transcript")
    if isinstance(inline, list):
        return [r for r in inline if isinstance(r, dict)]
    path = payload.get("transcript_path")
    if not path:
        return []
    try:
        with open(os.path.expanduser(str(path)), "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - MAX_TRANSCRIPT))
            raw = fh.read()
    except OSError:
        return []
    records: list[dict[str, Any]] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            data = wire.loads(line)
        except ValueError:
            continue  # the first line of a tail read, or a partial last one
        if isinstance(data, dict):
            records.extend(_records_from_claude(data))
    return records


def _is_prompt(text: str) -> bool:
    t = text.strip()
    # Client-made user turns: slash-command echoes, reminders, interrupted-request markers.
    return bool(t) and not t.startswith(("<", "[Request interrupted", "Caveat:"))


def summarize(
    records: list[dict[str, Any]], pending: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """close_session arguments from the session's records, or None for an empty session.

    objective: the first prompt; completed: what the last answer said it did, with counts;
    blockers: commands of this session that failed and never succeeded since; next_steps:
    "next/todo" lines of the last answer, and the last prompt when it was another request;
    key_files: files the session edited."""
    prompts = [
        str(r["text"])
        for r in records
        if r.get("role") == "user" and _is_prompt(str(r.get("text") or ""))
    ]
    answers = [str(r["text"]) for r in records if r.get("role") == "assistant" and r.get("text")]
    tools = [r for r in records if r.get("tool")]
    if not prompts or not (answers or tools):
        return None  # nothing was done: a handoff would only archive the last real one
    files: list[str] = []
    for r in tools:
        inp: dict[str, Any] = r["input"] if isinstance(r.get("input"), dict) else {}
        if r.get("tool") in EDIT_TOOLS:
            for key in PATH_KEYS:
                if inp.get(key) and str(inp[key]) not in files:
                    files.append(str(inp[key]))
    import re

    is_next = re.compile(_NEXT, re.I).match
    last = answers[-1] if answers else ""
    lines = [ln.strip() for ln in last.splitlines() if ln.strip()]
    nxt = [_kept_line(ln, 200) for ln in lines if is_next(ln)][:5]
    completed = [_kept_line(ln, 200) for ln in lines if not is_next(ln)][:3]
    commands = sum(1 for r in tools if r.get("tool") in SHELL_TOOLS)
    if commands or files:
        completed.append(f"ran {commands} shell command(s), edited {len(files)} file(s)")
    if len(prompts) > 1 and prompts[-1] != prompts[0]:
        nxt.append("last request: " + _kept_line(prompts[-1], 200))
    blockers = [
        f"`{_kept_line(p.get('command'), 160)}` still fails ({p.get('error')})" for p in pending
    ][:5]
    return {
        "objective": _kept_line(prompts[0], 240),
        "completed": completed,
        "blockers": blockers,
        "next_steps": nxt,
        "key_files": files[-10:],
    }


def excerpt(
    records: list[dict[str, Any]], pending: list[dict[str, Any]], cap: int = EXCERPT_CHARS
) -> str:
    """The session's newest turns as plain lines for close_session's ``transcript_excerpt``:
    user prompts, assistant answers, shell commands, failed tool results and the commands
    still failing; each line cut (_EXCERPT_CUTS), the newest kept within ``cap`` characters.
    The server redacts it like any content (the spool redacts it too)."""
    raw: list[tuple[str, Any, int, str]] = []  # (prefix, text, cut, suffix), redacted when kept
    for r in records:
        role, text = r.get("role"), str(r.get("text") or "")
        if role == "user" and _is_prompt(text):
            raw.append(("User: ", text, _EXCERPT_CUTS["User"], ""))
        elif role == "assistant" and text.strip():
            raw.append(("Assistant: ", text, _EXCERPT_CUTS["Assistant"], ""))
        elif role == "error" and text.strip():
            raw.append(("Failed: ", text, _EXCERPT_CUTS["Failed"], ""))
        elif r.get("tool") in SHELL_TOOLS and isinstance(r.get("input"), dict):
            command = r["input"].get("command")
            if command:
                raw.append(("$ ", command, _EXCERPT_CUTS["$"], ""))
    for p in pending:
        raw.append(("Still failing: `", p.get("command"), 300, f"` ({p.get('error')})"))
    kept: list[str] = []
    left = cap
    for prefix, text, cut, suffix in reversed(raw):
        line = prefix + _kept_line(text, cut) + suffix
        if len(line) + 1 > left:
            break
        kept.append(line)
        left -= len(line) + 1
    return "\n".join(reversed(kept))
