"""What a door may reach, typed: the services a tool or an explorer page calls, and the call
gate that runs them.

A tool body never gets the whole :class:`~brain.app.Brain`: it gets :class:`Services`, the
services and the result-page helper the app built, each typed, and nothing else (no store,
no graph, no Settings; ARCHITECTURE.md, "Layers"). ``Brain`` satisfies the protocol as it
is, so the server hands its Brain over and mypy checks every tool body against the services'
real signatures. :class:`Call` is the gate's type (``mcp_server.create_server``'s ``call``):
every tool group registers with ``register(mcp: FastMCP, call: Call)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from brain.agentic import AgenticService
    from brain.app import Brain
    from brain.citations.service import CitationService
    from brain.embedding.registry import Embedder
    from brain.files.service import FilesService
    from brain.generations import ModelSwitch
    from brain.health import HealthService
    from brain.maintenance.service import MaintenanceService
    from brain.memory import MemoryService
    from brain.memory.decay import DecayService
    from brain.search.presentation import ResultPages
    from brain.sources.fsio import FsService
    from brain.sources.review import ChangeReview
    from brain.sources.service import SourcesService
    from brain.workflow.mistakes import MistakeService
    from brain.workflow.session import SessionService

from brain.errors import BrainError

T = TypeVar("T")


class Services(Protocol):
    """The services a door asks (read-only attributes: a door never replaces one)."""

    @property
    def memory(self) -> MemoryService: ...
    @property
    def sessions(self) -> SessionService: ...
    @property
    def mistakes(self) -> MistakeService: ...
    @property
    def decay(self) -> DecayService: ...
    @property
    def agentic(self) -> AgenticService: ...
    @property
    def maintenance(self) -> MaintenanceService: ...
    @property
    def sources(self) -> SourcesService: ...
    @property
    def files(self) -> FilesService: ...
    @property
    def fs(self) -> FsService: ...
    @property
    def changes(self) -> ChangeReview: ...
    @property
    def citations(self) -> CitationService: ...
    @property
    def health(self) -> HealthService: ...
    @property
    def model_switch(self) -> ModelSwitch: ...
    @property
    def embedder(self) -> Embedder: ...  # a search embeds its query once for every leg
    @property
    def pages(self) -> ResultPages: ...  # the relevance band and snippet size, applied

    def capabilities(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, Any]: ...


class Call(Protocol):
    """The call gate: runs ``fn`` on the services in a worker thread, as the caller, under
    the generation gate; a ``BrainError`` comes back as a coded tool error."""

    async def __call__(self, fn: Callable[[Services], T], /) -> T: ...


class BrainHolder(Protocol):
    """What holds the live Brain of a server process (None until it owns the data dir)."""

    brain: Brain | None


class NotReady(BrainError):
    code = "NOT_READY"


def live(holder: BrainHolder) -> Brain:
    """The Brain ``holder`` holds; NOT_READY while this process does not hold one yet."""
    if holder.brain is None:
        raise NotReady("the brain is still starting; retry in a moment")
    return holder.brain


__all__ = ["BrainHolder", "Call", "NotReady", "Services", "live"]
