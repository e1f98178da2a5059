"""The scripting API: a small public Python interface for seed and maintenance scripts.

    from brain import open_brain

    with open_brain() as brain:                     # the configured data dir (BRAIN__HOME, .env)
        brain.add_memory(content="...", project="api")
        print(brain.search_memory(query="rate limits", project="api")["results"])
        print(brain.archive_stale_notes(dry_run=True))

Every method is an MCP tool of the same name, called with keyword arguments and answering the
tool's structured result (a dict); ``brain.call("tool", **args)`` does the same by name. A
tool's refusal raises :class:`ToolCallError` with its stable
code (``NOTE_NOT_FOUND``, ``INVALID_ARGUMENT``, ...).

One process owns a data dir (the server your agent launched). A script never opens a second
store: it calls the running owner over its local call channel (the one the hooks use), as
the configured identity. When no server runs, ``open_brain`` starts one for the length of the
``with`` block (``python -m brain.cli serve`` on stdio, with the same settings) and stops it at
the end, so the same script works with the agent open or closed.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brain.errors import BrainError
from brain.hooks.client import NoOwner, Owner


class ToolCallError(BrainError):
    """A tool refused the call; ``code`` is its stable error code."""

    code = "TOOL_ERROR"

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, **(details or {}))
        self.code = code


class BrainUnavailable(BrainError):
    code = "BRAIN_UNAVAILABLE"


class _Channel(Owner):
    """The owner's call channel, keeping a refused call's code and details."""

    def request(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if self._sock is None:
            self._connect()
        self._next += 1
        rid = self._next
        self._send({"id": rid, "name": name, "args": args, "caller": self.caller,
                    "transport": "local", "request_id": os.urandom(16).hex(), "retry": False})
        while True:
            frame = self._read()
            if frame.get("id") == rid:
                break
        if "error" in frame:
            raise ToolCallError("TOOL_ERROR", str(frame["error"])[:500])
        result = frame.get("result") or {}
        structured = result.get("structuredContent")
        if result.get("isError"):
            err = (structured or {}).get("error") if isinstance(structured, dict) else None
            if isinstance(err, dict):
                raise ToolCallError(str(err.get("code") or "TOOL_ERROR"),
                                    str(err.get("message") or ""), err.get("details") or {})
            text = " ".join(c.get("text", "") for c in result.get("content") or [])
            raise ToolCallError("TOOL_ERROR", text[:500] or "tool error")
        return structured if isinstance(structured, dict) else {}


class ScriptBrain:
    """A connection to the brain of one data dir; use :func:`open_brain`."""

    def __init__(self, home: Path, caller: dict[str, str],
                 server: subprocess.Popen[bytes] | None = None) -> None:
        self.home = home
        self.caller = dict(caller)
        self._channel = _Channel(home, self.caller)
        self._server = server

    @property
    def started_server(self) -> bool:
        """True when no server ran and this connection started one for itself."""
        return self._server is not None

    def call(self, tool: str, /, **args: Any) -> dict[str, Any]:
        """Call the MCP tool ``tool`` with ``args``; its structured result."""
        try:
            return self._channel.request(tool, args)
        except NoOwner as exc:
            raise BrainUnavailable(f"the brain at {self.home} stopped answering ({exc}); "
                                   "start it again (brain serve) and retry") from None

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        if name.startswith("_"):
            raise AttributeError(name)

        def tool(**args: Any) -> dict[str, Any]:
            return self.call(name, **args)

        tool.__name__ = name
        return tool

    def close(self) -> None:
        self._channel.close()
        server, self._server = self._server, None
        if server is None:
            return
        with contextlib.suppress(OSError):
            if server.stdin is not None:
                server.stdin.close()  # end of stdin: the stdio server shuts down cleanly
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.terminate()
            server.wait(timeout=10)

    def __enter__(self) -> ScriptBrain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_brain(home: str | Path | None = None, *, start_timeout_s: float = 120.0,
               **overrides: Any) -> ScriptBrain:
    """Connect to the brain of the configured data dir (or ``home``): through the running
    server when there is one, else through one started for this connection. ``overrides``
    are settings sections, as for ``config.load_settings`` (they apply to a started server)."""
    from config import load_settings

    if home is not None:
        overrides["home"] = Path(home)
    settings = load_settings(**overrides)
    path = Path(settings.home)
    caller = {"user_id": settings.identity.user_id, "agent_id": settings.identity.agent_id}
    channel = _Channel(path, caller)
    try:
        channel._connect()
    except NoOwner:
        pass
    else:
        brain = ScriptBrain(path, caller)
        brain._channel = channel
        return brain
    server = _start_server(path, _env_of(overrides), start_timeout_s)
    return ScriptBrain(path, caller, server)


def _env_of(overrides: dict[str, Any]) -> dict[str, str]:
    """Settings overrides as the started server's environment (BRAIN__SECTION__KEY)."""
    env: dict[str, str] = {}
    for section, values in overrides.items():
        if isinstance(values, dict):
            for key, value in values.items():
                env[f"BRAIN__{section.upper()}__{key.upper()}"] = (
                    json.dumps(value) if isinstance(value, (list, dict)) else str(value))
        else:
            env[f"BRAIN__{section.upper()}"] = str(values)
    return env


def _start_server(home: Path, settings_env: dict[str, str],
                  timeout_s: float) -> subprocess.Popen[bytes]:
    env = {**os.environ, **settings_env, "BRAIN__HOME": str(home)}
    log = open(os.devnull, "wb")  # noqa: SIM115 - the server logs to <home>/logs itself
    server = subprocess.Popen(
        [sys.executable, "-m", "brain.cli", "serve"], stdin=subprocess.PIPE,
        stdout=log, stderr=log, env=env, start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + timeout_s
    probe = _Channel(home, {"user_id": "", "agent_id": ""})
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise BrainUnavailable(
                f"the brain server for {home} exited with code {server.returncode} while "
                f"starting; run `brain serve` to see why")
        try:
            probe._connect()
        except NoOwner:
            time.sleep(0.1)
            continue
        probe.close()
        return server
    server.terminate()
    server.wait(timeout=10)
    raise BrainUnavailable(f"the brain server for {home} did not answer within {timeout_s:g} s")
