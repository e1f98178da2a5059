"""The work of every ``brain`` command that reads or changes a brain, registered by name.

One mechanism serves both doors. A command's work is a function of (the Brain, its JSON
arguments) returning a JSON-able result, registered here with :func:`op`. The command line
(brain/cli/common.py, :func:`~brain.cli.common.door`) runs it on a Brain it opens itself when
no server owns the data dir, or posts ``{command, args, caller}`` to the owner's one
``/command`` route (mcp_surface/owner_endpoint.py), which runs the same function against the
live Brain in a worker thread, as the CLI's caller, under the same generation gate and path
policy as a tool call. The command prints the result the same way either way.

Long work (``background=True``: an import, an index rebuild) becomes a job in the owner
(:class:`Jobs`), which the command follows; source syncs and re-embeds are jobs of the
sources queue already (brain/sources/queue.py).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from brain.errors import BrainError, InvalidArgument

Work = Callable[[Any, dict[str, Any]], Any]


@dataclass(frozen=True)
class Op:
    name: str
    work: Work
    # Held under the generation gate shared, as every tool call is (a model switch's swap
    # never lands inside one); the model commands take the gate themselves.
    gated: bool = True
    # Long work: in an owner it runs as a job the command follows (and may detach from).
    background: bool = False


REGISTRY: dict[str, Op] = {}
# True while the work runs in the command's own process: progress bars go to its stderr.
_here: ContextVar[bool] = ContextVar("brain_cli_local", default=False)


def op(name: str, *, gated: bool = True, background: bool = False) -> Callable[[Work], Work]:
    """Register ``work`` as command ``name`` (its module is imported by :func:`load`)."""

    def register(work: Work) -> Work:
        if name in REGISTRY and REGISTRY[name].work is not work:
            raise ValueError(f"command {name!r} is registered twice")
        REGISTRY[name] = Op(name, work, gated, background)
        return work

    return register


def load() -> dict[str, Op]:
    """Every command's work (importing the command modules registers it)."""
    import brain.cli  # noqa: F401 - registers every command module's ops

    return REGISTRY


def get(name: str) -> Op:
    found = load().get(name)
    if found is None:
        raise InvalidArgument(f"no brain command {name!r}; this server knows "
                              f"{', '.join(sorted(REGISTRY))}: update the CLI and the server "
                              "together", field="command")
    return found


def local() -> bool:
    """True when the work runs in the ``brain`` command's own process (progress shown)."""
    return _here.get()


@contextmanager
def running_here() -> Iterator[None]:
    token = _here.set(True)
    try:
        yield
    finally:
        _here.reset(token)


def plain(result: Any) -> Any:
    """The result as JSON carries it (what both doors print): tuples as lists, the rest as
    their text."""
    return json.loads(json.dumps(result, default=str))


def execute(brain: Any, name: str, args: dict[str, Any]) -> Any:
    """Run command ``name`` on ``brain``: the same call in the CLI's process and in the
    owner's (which sets the caller and the path policy around it)."""
    found = get(name)
    if found.gated:
        with brain.gate.shared():
            return plain(found.work(brain, args))
    return plain(found.work(brain, args))


# ---------------------------------------------------------------------- owner jobs
@dataclass
class Job:
    id: str
    command: str
    caller: object  # who started it: only they follow it
    status: str = "running"
    started: float = field(default_factory=time.time)
    finished: float | None = None
    result: Any = None
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.id, "command": self.command, "status": self.status,
                "elapsed_s": round((self.finished or time.time()) - self.started, 1),
                "result": self.result, "error": self.error}


class Jobs:
    """The owner's background commands: each runs in its own thread while the owner keeps
    serving; the command that started it follows it by id (``job.status``)."""

    KEEP = 50  # finished jobs remembered

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(self, name: str, run: Callable[[], Any], caller: object) -> dict[str, Any]:
        job = Job(f"cmd-{uuid.uuid4().hex[:12]}", name, caller)

        def body() -> None:
            try:
                job.result = run()
                job.status = "done"
            except BrainError as exc:
                job.error, job.status = exc.to_dict(), "failed"
            except Exception as exc:  # noqa: BLE001 - recorded on the job, and the log
                job.error = {"code": "BRAIN_ERROR", "message": f"{type(exc).__name__}: {exc}"}
                job.status = "failed"
            finally:
                job.finished = time.time()

        with self._lock:
            done = [j for j in self._jobs.values() if j.finished is not None]
            for old in sorted(done, key=lambda j: j.started)[: max(0, len(done) - self.KEEP)]:
                del self._jobs[old.id]
            self._jobs[job.id] = job
        threading.Thread(target=body, name=f"brain-{name}", daemon=True).start()
        return job.to_dict()

    def get(self, job_id: str, caller: object) -> dict[str, Any]:
        """The job ``job_id`` as ``caller`` may see it: one it started; another's reads as
        missing, as every record a caller may not see does (brain/trust/tenancy.py)."""
        job = self._jobs.get(job_id)
        if job is None or job.caller != caller:
            raise InvalidArgument(f"no command job {job_id!r} in this server (it restarted, "
                                  "or the id is wrong)", field="job")
        return job.to_dict()
