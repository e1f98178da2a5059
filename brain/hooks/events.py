"""What each lifecycle event does (stdlib only; runs in the hook process).

- ``session-start``: open_session for the project, rendered within the session budget (a
  turn starts, so the session's branch is known: its notes come first).
- ``user-prompt``: search_memory for the prompt above the confidence floor, within the prompt
  budget; nothing when nothing is relevant.
- ``post-tool``: a failed shell command becomes record_failure (signature = command shape +
  error class); a later success of the same shape becomes record_resolution of that failure.
  A file read or edited joins the session's turn (``turns`` in the state file): a note
  written in that turn cites it (brain/citations/turns.py). ``user-prompt`` starts a turn.
  Each turn also records its git work tree and branch: a note written in a turn on a
  branch stays on that branch until it merges (brain/citations/branches.py).
- ``pre-compact`` / ``session-end`` / ``stop``: close_session with a summary of the transcript
  (``stop`` only when the session has moved on since its last handoff, and not more often
  than STOP_EVERY_S: it fires after every turn), and a bounded ``transcript_excerpt``
  (summary.excerpt) the server's chat model, when one is configured, refines it from.

Payloads are Claude Code's hook input (see tests/fixtures/hooks); the OpenCode plugin sends
the same fields, with ``transcript`` (a list of records) in place of ``transcript_path``.
"""

from __future__ import annotations

import os
import time

from brain import projects
from brain.hooks import client

# shape (shlex + its patterns) and summary are imported by the handlers that use them: most
# hook runs (a file read, a prompt) need neither, and each costs a hook's start a few ms.

# typing and collections.abc cost a hook's start ~10 ms; annotations are strings here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from brain.hooks.client import Path

STOP_EVERY_S = 15 * 60
MAX_FAILURE_OUTPUT = 2000  # characters of a failed command's output kept in the note
MAX_COMMAND = 500  # characters of a command kept (in the note and the state file)
MAX_PENDING = 200  # failed shapes remembered while waiting for their fix
PENDING_TTL_S = 7 * 86_400
SHELL_TOOLS = frozenset({"Bash", "bash", "shell"})
FILE_TOOLS = frozenset({"Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "read", "edit",
                        "write", "patch"})
MAX_TURN_FILES = 32  # files remembered per turn (brain/citations/turns.py reads as many)
MAX_TURNS = 50  # sessions whose turn is remembered


class Context:
    """What a handler needs: the data dir, the owner channel, the hook's command line.
    (A plain class: dataclasses would import inspect, ~10 ms of a hook's start.)"""

    def __init__(self, home: Path, owner: client.Owner, args: Any) -> None:
        self.home = home
        self.owner = owner
        self.args = args

    @property
    def caller(self) -> dict[str, str]:
        return self.owner.caller


def git_root(payload: dict[str, Any]) -> str:
    """The git work tree above the session's cwd (a worktree's own folder), or ""."""
    return projects.git_root(str(payload.get("cwd") or "."))


def branch_of(worktree: str) -> str:
    """The branch checked out in ``worktree``, read from its HEAD file ("" when detached or
    unreadable; no git process: a hook starts fast). A linked worktree's ``.git`` is a file
    naming its git dir."""
    if not worktree:
        return ""
    dot = os.path.join(worktree, ".git")
    try:
        if os.path.isfile(dot):
            with open(dot, encoding="utf-8") as fh:
                line = fh.read(4096).strip()
            if not line.startswith("gitdir:"):
                return ""
            dot = os.path.join(worktree, line[7:].strip())
        with open(os.path.join(dot, "HEAD"), encoding="utf-8") as fh:
            head = fh.read(512).strip()
    except OSError:
        return ""
    return head[16:] if head.startswith("ref: refs/heads/") else ""


def project_of(payload: dict[str, Any], explicit: str = "") -> str:
    """The project a session works on: --project, else the name of the git root above cwd
    (brain/projects.py, which names a source added without a project the same way)."""
    if explicit:
        return explicit[: projects.MAX_CHARS]
    return projects.of_folder(str(payload.get("cwd") or "."))


def _where(payload: dict[str, Any], turn: dict[str, Any]) -> None:
    """The turn's work tree and branch (brain/citations/branches.py scopes its notes)."""
    worktree = git_root(payload)
    if worktree:
        turn["worktree"] = worktree
        turn["branch"] = branch_of(worktree)


def handle(event: str, payload: dict[str, Any], ctx: Context) -> str:
    project = project_of(payload, ctx.args.project)
    if event == "session-start":
        new_turn(payload, project, ctx)  # open_session sees the session's branch (worktree)
        return session_start(payload, project, ctx)
    if event == "user-prompt":
        new_turn(payload, project, ctx)
        briefing = deferred_briefing(payload, project, ctx)
        found = user_prompt(payload, project, ctx)
        return "\n\n".join(t for t in (briefing, found) if t)
    if event == "post-tool":
        post_tool(payload, project, ctx)
        return ""
    close(event, payload, project, ctx)
    return ""


# ------------------------------------------------------------------------------ recall
def session_start(payload: dict[str, Any], project: str, ctx: Context) -> str:
    from brain.hooks import summary

    try:
        opened = ctx.owner.call("open_session", {"project": project})
    except client.NoOwner:
        # The client starts its MCP server and this hook at the same moment, so the owner is
        # often still opening the store: brief the session at its first prompt instead.
        session = str(payload.get("session_id") or "")
        if session:
            with client.state(ctx.home) as st:
                waiting = st.setdefault("unbriefed", {})
                waiting[session] = time.time()
                for k in sorted(waiting, key=lambda k: waiting[k])[:-50]:
                    del waiting[k]
        return ""
    return summary.render_session(opened, ctx.args.session_budget)


def deferred_briefing(payload: dict[str, Any], project: str, ctx: Context) -> str:
    """The session-start briefing, at the first prompt of a session that started before
    its brain was up."""
    from brain.hooks import summary

    session = str(payload.get("session_id") or "")
    with client.state(ctx.home) as st:
        if session not in (st.get("unbriefed") or {}):
            return ""
    try:
        opened = ctx.owner.call("open_session", {"project": project})
    except client.NoOwner:
        return ""  # still no brain: try again at the next prompt
    with client.state(ctx.home) as st:
        (st.get("unbriefed") or {}).pop(session, None)
    return summary.render_session(opened, ctx.args.session_budget)


def user_prompt(payload: dict[str, Any], project: str, ctx: Context) -> str:
    from brain.hooks import summary

    prompt = str(payload.get("prompt") or "").strip()
    if len(prompt.split()) < 3 or prompt.startswith("/"):
        return ""  # "yes", "go on", slash commands: nothing to look up
    try:
        found = ctx.owner.call(
            "search_memory",
            {
                "query": prompt[:2000],
                "project": project,
                "top_k": 5,
                "filters": {"include_fleeting": True, "confidence_min": ctx.args.floor},
            },
        )
    except client.NoOwner:
        return ""
    return summary.render_hits(found.get("results") or [], ctx.args.prompt_budget)


# ------------------------------------------------------------------------------ capture
def _command_result(payload: dict[str, Any]) -> tuple[str, str, int | None, bool] | None:
    """``(command, output, exit code, failed)`` of a shell tool call, or None."""
    if payload.get("tool_name") not in SHELL_TOOLS:
        return None
    from brain.hooks import shape

    tool_input = payload.get("tool_input") or {}
    command = str(tool_input.get("command") or "").strip() if isinstance(tool_input, dict) else ""
    if not command:
        return None
    if payload.get("hook_event_name") == "PostToolUseFailure":
        if payload.get("is_interrupt"):
            return None  # the user stopped it: not a failure of the command
        error = str(payload.get("error") or "")
        return command, error, shape.exit_code_of(error), True
    resp = payload.get("tool_response")
    resp = resp if isinstance(resp, dict) else {"stdout": str(resp or "")}
    if resp.get("interrupted"):
        return None
    output = "\n".join(str(resp.get(k) or "") for k in ("stderr", "stdout") if resp.get(k))
    code = resp.get("exit_code", resp.get("exitCode"))
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    failed = (code is not None and code != 0) or (code is None and shape.looks_failed(output))
    return command, output, code, failed


def new_turn(payload: dict[str, Any], project: str, ctx: Context) -> None:
    """A prompt starts the session's next turn: no file touched yet."""
    session = str(payload.get("session_id") or "")
    if not session:
        return
    with client.state(ctx.home) as st:
        turns = st.setdefault("turns", {})
        turns[session] = {"project": project, "user_id": ctx.caller.get("user_id", ""),
                          "at": time.time(), "files": []}
        _where(payload, turns[session])
        for k in sorted(turns, key=lambda k: float(turns[k].get("at") or 0))[:-MAX_TURNS]:
            del turns[k]


def touched_file(payload: dict[str, Any], project: str, ctx: Context) -> None:
    """A file the agent read or edited: it joins the session's current turn."""
    tool_input = payload.get("tool_input")
    if payload.get("tool_name") not in FILE_TOOLS or not isinstance(tool_input, dict):
        return
    path = tool_input.get("file_path") or tool_input.get("filePath") or tool_input.get("path")
    session = str(payload.get("session_id") or "")
    if not isinstance(path, str) or not path or not session or len(path) > 4096:
        return
    if not os.path.isabs(path):
        path = os.path.join(str(payload.get("cwd") or "."), path)
    join_turn(payload, project, ctx, path)


def join_turn(payload: dict[str, Any], project: str, ctx: Context, path: str = "") -> None:
    """The session's current turn goes on (now, in the payload's work tree and branch),
    with ``path`` among its files when given."""
    session = str(payload.get("session_id") or "")
    if not session:
        return
    with client.state(ctx.home) as st:
        turns = st.setdefault("turns", {})
        turn = turns.get(session)
        if not isinstance(turn, dict) or turn.get("project") != project:
            turn = turns[session] = {"project": project, "files": []}
        turn["user_id"] = ctx.caller.get("user_id", "")
        turn["at"] = time.time()
        _where(payload, turn)
        if path:
            files = [f for f in turn.get("files") or [] if f != path]
            turn["files"] = [*files, path][-MAX_TURN_FILES:]
        for k in sorted(turns, key=lambda k: float(turns[k].get("at") or 0))[:-MAX_TURNS]:
            del turns[k]


def post_tool(payload: dict[str, Any], project: str, ctx: Context) -> None:
    if payload.get("tool_name") in FILE_TOOLS:
        touched_file(payload, project, ctx)
        return
    res = _command_result(payload)
    if res is None:
        return
    from brain.hooks import shape

    command, output, code, failed = res
    sh, err, sig = shape.signature(command, output, code)
    key = f"{project}\x1f{sh}"
    if failed:
        join_turn(payload, project, ctx)  # the failure note is written on the turn's branch
        _record_failure(payload, project, ctx, key, (command, output, code, sh, err, sig))
    else:
        _maybe_resolve(project, ctx, key, command)


def _record_failure(
    payload: dict[str, Any], project: str, ctx: Context, key: str, res: tuple[Any, ...]
) -> None:
    # Redacted before it is cut (a cut first would keep a key's body without its BEGIN line,
    # or the head of a token), and before anything is kept in the state file.
    from brain.trust.redact import redact_head, redact_tail

    command, output, code, sh, err, sig = res
    tail = redact_tail(output.strip(), MAX_FAILURE_OUTPUT)
    shown = redact_head(command, MAX_COMMAND)
    exit_note = f", exit {code}" if code is not None else ""
    content = f"`{shown}` failed ({err}{exit_note}).\n\n{tail}".strip()
    args = {"content": content, "project": project, "failure_signature": sig}
    zk = ""
    try:
        zk = str((ctx.owner.call("record_failure", args).get("note") or {}).get("zk_id") or "")
    except client.NoOwner:
        client.spool(
            ctx.home, {"op": "call", "name": "record_failure", "args": args, "caller": ctx.caller}
        )
    with client.state(ctx.home) as st:
        pending = st.setdefault("pending", {})
        pending[key] = {
            "sig": sig,
            "zk": zk,
            "command": shown,
            "error": err,
            "session": str(payload.get("session_id") or ""),
            "at": time.time(),
        }
        _prune(pending)


def _prune(pending: dict[str, Any]) -> None:
    now = time.time()
    for k in [k for k, v in pending.items() if now - float(v.get("at") or 0) > PENDING_TTL_S]:
        del pending[k]
    while len(pending) > MAX_PENDING:
        del pending[min(pending, key=lambda k: float(pending[k].get("at") or 0))]


def _maybe_resolve(project: str, ctx: Context, key: str, command: str) -> None:
    """A success of a shape that failed before: the change in between is a fix candidate."""
    with client.state(ctx.home) as st:
        failure = (st.get("pending") or {}).pop(key, None)
    if failure is None:
        return  # the common case: no socket, no store, just the state file
    from brain.trust.redact import redact_head

    shown = redact_head(command, MAX_COMMAND)
    fix = (
        f"Candidate fix (captured by the hook): `{shown}` succeeded after "
        f"`{failure.get('command', '')}` had failed with {failure.get('error', 'an error')}. "
        "What changed between the two runs is the fix."
    )
    zk = str(failure.get("zk") or "")
    try:
        if not zk:
            raise client.NoOwner("failure id unknown (it was spooled)")
        ctx.owner.call(
            "record_resolution", {"failure_zk_id": zk, "fix_content": fix, "project": project}
        )
    except client.NoOwner:
        client.spool(
            ctx.home,
            {
                "op": "resolve",
                "project": project,
                "signature": failure["sig"],
                "fix_content": fix,
                "caller": ctx.caller,
            },
        )


# ------------------------------------------------------------------------------ handoff
def close(event: str, payload: dict[str, Any], project: str, ctx: Context) -> None:
    from brain.hooks import summary

    session = str(payload.get("session_id") or "")
    records = summary.load_transcript(payload)
    with client.state(ctx.home) as st:
        pending = [v for v in (st.get("pending") or {}).values() if v.get("session") == session]
    handoff = summary.summarize(records, pending)
    if handoff is None:
        return  # nothing happened in this session worth a handoff
    import hashlib  # only here: it costs a hook's start ~5 ms

    digest = hashlib.sha256(repr(sorted(handoff.items())).encode()).hexdigest()[:16]
    with client.state(ctx.home) as st:
        last = (st.get("closed") or {}).get(session) or {}
    if last.get("digest") == digest:
        return  # PreCompact then SessionEnd with nothing new: one handoff is enough
    if event == "stop" and time.time() - float(last.get("at") or 0) < STOP_EVERY_S:
        return
    args = {"project": project, **handoff}
    text = summary.excerpt(records, pending)
    if text:  # for the server's background LLM refinement of the handoff
        args["transcript_excerpt"] = text
    try:
        ctx.owner.call("close_session", args)
    except client.NoOwner:
        client.spool(
            ctx.home, {"op": "call", "name": "close_session", "args": args, "caller": ctx.caller}
        )
    with client.state(ctx.home) as st:
        closed = st.setdefault("closed", {})
        closed[session] = {"digest": digest, "at": time.time()}
        for k in sorted(closed, key=lambda k: closed[k]["at"])[:-50]:
            del closed[k]
