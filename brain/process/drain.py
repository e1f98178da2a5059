"""The owner's side of the spool: what hooks wrote while no server owned the data dir is
applied when the next owner opens the Brain (mcp_surface/routing.py calls :func:`drain`).

The spool is renamed before it is read, so hooks running meanwhile start a fresh one; each
entry is applied as the caller that spooled it, through the same services the tools call
(redaction included). An entry that fails is logged and dropped: a spool must not block a
server's start. A failure recorded here gets its note id written back to the hooks' state,
so its later fix links to it live.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.hooks import client

if TYPE_CHECKING:  # the brain these functions serve is built above them, in app.py
    from brain.app import Brain

log = logging.getLogger("brain.hooks")
MAX_ENTRIES = 5000


def _apply(brain: Brain, entry: dict[str, Any]) -> str:
    """Apply one entry; returns the failure's note id for record_failure, else ""."""
    op, args = entry.get("op"), dict(entry.get("args") or {})
    if op == "call" and entry.get("name") == "record_failure":
        res = brain.mistakes.record_failure(
            str(args["content"]), str(args["project"]), str(args["failure_signature"])
        )
        return str(res["note"]["zk_id"])
    if op == "call" and entry.get("name") == "close_session":
        brain.sessions.close_session(
            str(args["project"]), str(args["objective"]), completed=args.get("completed"),
            blockers=args.get("blockers"), next_steps=args.get("next_steps"),
            key_files=args.get("key_files"), transcript_excerpt=args.get("transcript_excerpt"),
        )
        return ""
    if op == "resolve":
        failure = brain.mistakes.find_failure(str(entry["project"]), str(entry["signature"]))
        if failure is not None:
            brain.mistakes.record_resolution(
                failure["zk_id"], str(entry["fix_content"]), str(entry["project"])
            )
        return ""
    raise ValueError(f"unknown spool entry {op!r}")


def _entries(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[:MAX_ENTRIES]:
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if isinstance(data, dict):
                out.append(data)
    return out


def drain(brain: Brain) -> int:
    """Apply and remove the spool of ``brain``'s data dir; the number of entries applied.
    Never raises: the server starts whatever the spool holds."""
    from brain.trust.identity import Identity, acting_as

    home = Path(brain.home)
    path = home / client.SPOOL_FILE
    work = home / (client.SPOOL_FILE + ".draining")
    try:
        if path.exists():
            os.replace(path, work)
        if not work.exists():
            return 0
        entries = _entries(work)
    except OSError as exc:
        log.warning("hook spool not drained: %s", exc)
        return 0
    applied = 0
    for entry in entries:
        caller = entry.get("caller") or {}
        ident = Identity(str(caller.get("user_id") or "default"),
                         str(caller.get("agent_id") or "default"))
        try:
            with acting_as(ident):
                zk = _apply(brain, entry)
            applied += 1
        except Exception as exc:  # noqa: BLE001 - one bad entry must not stop the rest
            log.warning("hook spool entry %s dropped: %s", entry.get("op"), type(exc).__name__)
            continue
        if zk:
            _remember(home, str((entry.get("args") or {}).get("failure_signature")), zk)
    with contextlib.suppress(OSError):
        work.unlink()
    if applied:
        log.info("applied %d hook event(s) spooled while no server ran", applied)
    return applied


def _remember(home: Path, signature: str, zk: str) -> None:
    with client.state(home) as st:
        for failure in (st.get("pending") or {}).values():
            if failure.get("sig") == signature and not failure.get("zk"):
                failure["zk"] = zk
