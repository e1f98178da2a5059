"""One hook run: parse the command line, read the payload, handle the event under its deadline
and print what the client injects. The transport (owner channel, spool, state) is client.py,
what each event does is events.py; this module sits above both, so neither imports the other.
Standard library only, like the rest of brain/hooks (a hook starts in ~30 ms of CPU)."""

from __future__ import annotations

import os
import sys

from brain.hooks import (
    CONFIDENCE_FLOOR,
    DEADLINE_MS,
    EVENTS,
    PROMPT_BUDGET_TOKENS,
    SESSION_BUDGET_TOKENS,
    events,
    wire,
)
from brain.hooks.client import MAX_STDIN, Owner, deadline, log

# typing costs a hook's start; annotations are strings here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Args:
    """The hook's command line: ``<event> [--flag value]...``. Parsed by hand: argparse
    imports shutil, bz2 and lzma, a third of a hook's start."""

    def __init__(self) -> None:
        self.event = ""
        self.client = "claude"  # output: Claude Code hook JSON, or plain text for the plugin
        self.home = os.environ.get("BRAIN__HOME", "~/.opencode-brain")
        self.project = ""  # default: the name of the git root above the payload's cwd
        self.user_id = os.environ.get("BRAIN__IDENTITY__USER_ID", "default")
        self.agent_id = os.environ.get("BRAIN__IDENTITY__AGENT_ID", "default")
        self.session_budget = SESSION_BUDGET_TOKENS
        self.prompt_budget = PROMPT_BUDGET_TOKENS
        self.floor = CONFIDENCE_FLOOR
        self.deadline_ms = 0  # 0: the event's default


_FLAGS: dict[str, Any] = {
    "--client": str,
    "--home": str,
    "--project": str,
    "--user-id": str,
    "--agent-id": str,
    "--session-budget": int,
    "--prompt-budget": int,
    "--floor": float,
    "--deadline-ms": int,
}


def parse_args(argv: list[str]) -> Args:
    """Raises ValueError on anything unexpected (the hook then fails open)."""
    args = Args()
    if not argv or argv[0] not in EVENTS:
        raise ValueError(f"first argument must be one of {', '.join(EVENTS)}")
    args.event = argv[0]
    rest = argv[1:]
    if len(rest) % 2:
        raise ValueError("every flag takes a value")
    for flag, value in zip(rest[::2], rest[1::2], strict=True):
        if flag not in _FLAGS:
            raise ValueError(f"unknown flag {flag}")
        setattr(args, flag[2:].replace("-", "_"), _FLAGS[flag](value))
    if args.client not in ("claude", "opencode"):
        raise ValueError("--client is claude or opencode")
    return args


def _read_stdin() -> dict[str, Any]:
    raw = sys.stdin.buffer.read(MAX_STDIN + 1)
    if len(raw) > MAX_STDIN:
        raise ValueError(f"hook input over {MAX_STDIN} bytes")
    data = wire.loads(raw or b"{}")
    if not isinstance(data, dict):
        raise ValueError("hook input is not a JSON object")
    return data


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:  # a broken hook command line must not stop the agent either
        log(
            os.path.expanduser(os.environ.get("BRAIN__HOME", "~/.opencode-brain")), "args", str(exc)
        )
        return 0
    home = os.path.expanduser(args.home)
    limit = (args.deadline_ms or DEADLINE_MS[args.event]) / 1000.0
    owner = Owner(home, {"user_id": args.user_id, "agent_id": args.agent_id})
    text = ""
    try:
        with deadline(limit):
            payload = _read_stdin()
            text = events.handle(args.event, payload, events.Context(home, owner, args))
    except Exception as exc:  # noqa: BLE001 - fail open: the agent carries on
        log(home, args.event, f"{type(exc).__name__}: {exc}")
        text = ""
    finally:
        owner.close()
    if text:
        sys.stdout.write(events_output(args.event, args.client, text))
        sys.stdout.flush()
    return 0


def events_output(event: str, client: str, text: str) -> str:
    """Claude Code reads ``hookSpecificOutput.additionalContext``; the OpenCode plugin reads
    plain text."""
    if client == "opencode":
        return text
    name = {"session-start": "SessionStart", "user-prompt": "UserPromptSubmit"}.get(event)
    if name is None:
        return ""
    return wire.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}})
