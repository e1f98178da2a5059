"""The files the agent read or edited in its current turn, as the hooks recorded them.

The post-tool hook (brain/hooks/events.py) appends each Read / Edit / Write target to the
turn of its session in the hooks' state file (``<home>/hooks.state.json``, key ``turns``);
the prompt hook starts a new turn. A note written meanwhile by the same user in the same
project (add_memory, a mistake, a handoff) cites those files as ``hook`` citations: the turn
that produced the note. The newest such turn is taken when several sessions work on one
project; a turn older than the TTL is not "the turn" any more. The hooks also record the
branch and work tree the turn runs in (``branch``, ``worktree``): a note written in it is
scoped to that branch (brain/citations/branches.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from brain.hooks import client

MAX_TURN_FILES = 32
TURN_TTL_S = 1800.0  # a turn older than this is not "the turn" that produced a note


class TurnFiles:
    def __init__(self, home: Path) -> None:
        self.home = home

    def files(self, project: str, user_id: str, ttl_s: float) -> list[str]:
        best = self.turn(project, user_id, ttl_s)
        if best is None:
            return []
        return [str(f) for f in (best.get("files") or [])[:MAX_TURN_FILES] if isinstance(f, str)]

    def turn(self, project: str, user_id: str, ttl_s: float) -> dict[str, Any] | None:
        """The newest turn of ``user_id`` in ``project`` younger than ``ttl_s``, or None."""
        path = Path(self.home) / client.STATE_FILE
        if not path.exists():
            return None
        try:
            with client.state(self.home) as st:
                turns: dict[str, Any] = dict(st.get("turns") or {})
        except OSError:
            return None
        now = time.time()
        best: dict[str, Any] | None = None
        for turn in turns.values():
            if not isinstance(turn, dict) or turn.get("project") != project:
                continue
            if turn.get("user_id") != user_id or now - float(turn.get("at") or 0) > ttl_s:
                continue
            if best is None or float(turn.get("at") or 0) > float(best.get("at") or 0):
                best = turn
        return best
