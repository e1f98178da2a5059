"""What every ``brain`` command shares: its door to the brain (the running owner, else a Brain
opened for the length of the command), and JSON on stdout.

A command that reads or changes a brain names its work (brain/cli/ops.py) and runs it through
:func:`door`: posted to the owner's ``/command`` route when a server owns the data dir, run on
a Brain of its own otherwise. Only the few commands that need the store to themselves refuse
while a server runs (:func:`needs_the_store`), naming it and how to proceed."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.errors import BrainError, StoreLocked

if TYPE_CHECKING:
    from brain.process.owner import OwnerInfo


@contextmanager
def open_brain(**overrides: Any) -> Iterator[Any]:
    """A Brain on the configured data dir, closed on exit; config errors exit with code 2.

    Raises ``StoreLocked`` ("served by pid N; stop it or retry") while a server owns it.
    """
    from brain.app import Brain
    from brain.process.logs import setup_logging
    from config import load_settings

    try:
        settings = load_settings(**overrides)
    except ValueError as exc:
        print(f"brain: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    # The terminal gets warnings and errors (what a run through the server prints too);
    # brain.log keeps every record at [log] level.
    setup_logging(settings.home, settings.log.level, stderr_level="WARNING")
    from brain.process.owner import exclusive

    # One process owns a data dir; a running server keeps it, and this says so (StoreLocked).
    with exclusive(settings.home, "cli"):
        brain = Brain(settings, warm_up=False).open()  # the model loads if a command embeds
        try:
            yield brain
        finally:
            brain.close()


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


class Status:
    """One progress line on stderr: redrawn in place on a terminal, else a line per change
    every few seconds (a log or a pipe gets no escape codes)."""

    EVERY_S = 2.0  # off a terminal, a line at most this often

    def __init__(self, show: bool = True) -> None:
        self.on = show
        self.tty = sys.stderr.isatty()
        self.last = ""
        self.at = 0.0

    def show(self, line: str, final: bool = False) -> None:
        """``final``: the outcome, printed whatever the throttle (off a terminal the last
        line shown could be seconds older than the end)."""
        import time

        if not self.on or line == self.last:
            return
        if (not final and not self.tty and self.last
                and time.monotonic() - self.at < self.EVERY_S):
            return
        self.last, self.at = line, time.monotonic()
        if self.tty:
            print(f"\r{line}\033[K", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.on and self.tty and self.last:
            print(file=sys.stderr, flush=True)


def running_owner(home: Path) -> tuple[OwnerInfo, str] | None:
    """The live server that owns ``home`` and its owner token, or None when none runs."""
    from brain.process import owner as own

    info = own.read_info(home)
    token = own.read_owner_token(home)
    if info is not None and info.alive and info.address and token:
        return info, token
    return None


class OwnerRefused(BrainError):
    """The owner refused a command; ``code`` is the owner's error code, as a local run
    raises it."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, **(details or {}))
        self.code = code


class OwnerLost(BrainError):
    code = "OWNER_UNAVAILABLE"


def settings_of(**overrides: Any) -> Any:
    """The settings, or exit 2 with the reason (a bad setting is the user's to fix)."""
    from config import load_settings

    try:
        return load_settings(**overrides)
    except ValueError as exc:
        print(f"brain: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


class Door:
    """Where a command's work runs: ``owner`` (pid, token) when a server owns the data dir,
    else the Brain this command opened (``brain``)."""

    def __init__(self, settings: Any, owner: tuple[OwnerInfo, str] | None,
                 brain: Any = None) -> None:
        self.settings = settings
        self.owner = owner
        self.brain = brain

    @property
    def pid(self) -> int | None:
        return self.owner[0].pid if self.owner is not None else None

    def run(self, command: str, args: dict[str, Any] | None = None,
            timeout_s: float | None = None) -> Any:
        """The result of ``command`` (brain/cli/ops.py) with ``args``, from whichever side
        holds the brain; a refusal raises the BrainError with its code, either way."""
        from brain.cli import ops

        args = dict(args or {})
        if self.owner is None:
            with ops.running_here():
                return ops.execute(self.brain, command, args)
        ident = self.settings.identity
        body = {"command": command, "args": args, "pid": os.getpid(),
                "caller": {"user_id": ident.user_id, "agent_id": ident.agent_id}}
        return call_owner(self.owner, "/command", body, timeout_s)["result"]


@contextmanager
def door(home: str | None = None) -> Iterator[Door]:
    """The command's door to the brain of ``home`` (default: the configured data dir)."""
    overrides = {"home": home} if home else {}
    settings = settings_of(**overrides)
    owner = running_owner(settings.home)
    if owner is not None:
        yield Door(settings, owner)
        return
    with ExitStack() as stack:
        try:
            brain = stack.enter_context(open_brain(**overrides))
        except StoreLocked:
            owner = _starting_owner(settings.home)  # a server took the dir a moment ago
            if owner is None:
                raise
            brain = None
        yield Door(settings, owner, brain)


def _starting_owner(home: Path, wait_s: float = 10.0) -> tuple[OwnerInfo, str] | None:
    """The server that holds ``home`` once it serves its owner endpoint (it publishes it
    right after its election); None when the holder is not a server or never does."""
    import time

    from brain.process import owner as own

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        found = running_owner(home)
        if found is not None:
            return found
        info = own.read_info(home)
        if info is not None and info.alive and info.kind == "cli":
            return None  # another command holds it: its StoreLocked says so
        time.sleep(0.1)
    return None


def run(command: str, args: dict[str, Any] | None = None, home: str | None = None) -> Any:
    """One command's work through its door (see :func:`door`)."""
    with door(home) as d:
        return d.run(command, args)


def needs_the_store(home: Path, what: str, how: str) -> None:
    """Refuse ``what`` while a server owns ``home``: say which process and how to proceed."""
    from brain.process import owner as own

    info = own.read_info(home)
    if info is not None and info.alive:
        raise StoreLocked(f"{what} needs the store to itself, and the data dir {home} is "
                          f"served by pid {info.pid} ({info.kind}); {how}")


def call_owner(owner: tuple[OwnerInfo, str], route: str, body: dict[str, Any],
               timeout_s: float | None = None) -> dict[str, Any]:
    """POST ``body`` to ``route`` of the owner (owner token only). A refusal raises
    :class:`OwnerRefused` with the owner's code; a lost owner :class:`OwnerLost`."""
    import httpx

    info, token = owner
    transport = httpx.HTTPTransport(uds=info.address)
    try:
        with httpx.Client(transport=transport, timeout=timeout_s) as http:
            res = http.post(f"http://localhost{route}", json=body,
                            headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        raise OwnerLost(f"the server (pid {info.pid}) that owns this data dir stopped "
                        f"answering ({type(exc).__name__}: {exc}); run the command again "
                        "(without a server it opens the data dir itself)") from None
    try:
        data = res.json()
    except ValueError:
        data = None
    if res.status_code == 404 and not isinstance(data, dict):
        raise OwnerLost(f"the server (pid {info.pid}) is of an earlier release that does not "
                        f"take brain commands ({route}): restart it (close and reopen the "
                        "agent using this brain), then run the command again")
    if not isinstance(data, dict):
        raise OwnerLost(f"the server (pid {info.pid}) answered HTTP {res.status_code} "
                        "without a result; see its brain.log")
    if res.status_code != 200:
        raise OwnerRefused(str(data.get("error") or "BRAIN_ERROR"),
                           str(data.get("message") or f"HTTP {res.status_code}"),
                           data.get("details") if isinstance(data.get("details"), dict) else None)
    return data
