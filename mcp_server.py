"""opencode-brain MCP server: the tool surface over the brain's services.

Each tool converts arguments, calls one service method in a worker thread, and shapes the
result; ``BrainError`` becomes an MCP error result carrying its stable code and details, as
``[CODE] message`` text and as ``structuredContent.error`` (mcp_surface/tool_errors.py). Run it with
``python mcp_server.py`` or ``brain serve`` (stdio); nothing but MCP messages go to stdout.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
from fastmcp import FastMCP
from fastmcp.server.auth import AuthProvider
from pydantic import Field

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brain import heap  # noqa: E402
from brain.app import Brain  # noqa: E402
from brain.errors import BrainError, disk_full, is_no_space  # noqa: E402
from brain.memory import WriteResult  # noqa: E402
from brain.notes import NewMemoryType, Visibility  # noqa: E402
from brain.process.logs import setup_logging  # noqa: E402
from brain.search import rerank  # noqa: E402
from brain.trust import tenancy  # noqa: E402
from brain.trust.identity import acting_as  # noqa: E402
from config import Settings, load_settings  # noqa: E402
from mcp_surface import (  # noqa: E402
    agentic,
    citations,
    files,
    fs,
    health,
    models,
    sources,
    workflow,
)
from mcp_surface import outputs as out  # noqa: E402
from mcp_surface.args import (  # noqa: E402
    Cites,
    Detail,
    Ids,
    Query,
    Similarity,
    TagList,
    Text,
    TypedArgumentErrors,
    WorkProject,
    ZkId,
)
from mcp_surface.calls import Services  # noqa: E402
from mcp_surface.idempotency import IdempotentCalls  # noqa: E402
from mcp_surface.lean import DESTRUCTIVE, PURE_READ, READ, WRITE, tool  # noqa: E402
from mcp_surface.profiles import Profile, ProfileGate  # noqa: E402
from mcp_surface.recall import (  # noqa: E402
    NoteKind,
    NoteSearch,
    RecallFilters,
    search_notes,
)
from mcp_surface.text_guard import ValidText  # noqa: E402
from mcp_surface.tool_errors import CodedToolError, StructuredErrors  # noqa: E402

log = logging.getLogger("brain.mcp")

T = TypeVar("T")

TopK = Annotated[int, Field(ge=1, le=100)]


INSTRUCTIONS = (
    "Persistent memory for coding agents. Start with search_memory for what you already "
    "know; add_memory for decisions, mistakes, fixes and context worth keeping; get_related "
    "to follow links. See AGENTS.md for the full protocol."
)


def _gated(fn: Callable[[Services], T], b: Brain) -> T:
    """A tool call holds the generation gate shared: a model switch's swap never lands inside
    one, so a query embedded by one model never runs against the other's generation."""
    with b.gate.shared():
        return fn(b)


class _State:
    def __init__(self, brain: Brain | None) -> None:
        self.brain = brain


def create_server(
    settings: Settings | None = None,
    brain: Brain | None = None,
    *,
    http: bool = False,
    auth: AuthProvider | None = None,
    shared_state: _State | None = None,
    profile: Profile | None = None,
) -> FastMCP:
    """A server over ``brain`` (tests) or, without one, a server that shares its data dir with
    every other server on it: the first one owns the Brain, the rest forward to it
    (mcp_surface/routing.py). ``http`` adds bearer tokens and per-token identity for ``brain
    serve --http``. ``shared_state`` is the router's: the owner's sibling endpoint, built
    before the election, serves whatever Brain the state holds once this process owns it.
    ``profile`` (default ``[mcp] tools``) picks the tools listed (mcp_surface/profiles.py); the
    owner's sibling lists them all, since a forwarding server already applied its own."""
    from mcp_surface import routing

    state = shared_state or _State(brain)
    router: routing.Router | None = None
    if brain is None and shared_state is None:
        settings = settings or load_settings()
        if http:
            auth = routing.http_auth(settings)

    @asynccontextmanager
    async def lifespan(_server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        if router is None:
            yield {"brain": state.brain}
            return
        async with router.running():
            yield {"brain": state.brain, "router": router}

    mcp = FastMCP("opencode-brain", instructions=INSTRUCTIONS, lifespan=lifespan, auth=auth)
    mcp.add_middleware(StructuredErrors())  # outermost: every coded error, text + structure
    mcp.add_middleware(ValidText())  # next, so no tool or forwarder sees a lone surrogate
    mcp.add_middleware(TypedArgumentErrors())
    if profile is None:
        profile = "full" if shared_state is not None else _profile_of(settings, brain)
    mcp.add_middleware(ProfileGate(profile))  # before forwarding: the owner gets the new shape
    if http:
        mcp.add_middleware(routing.TokenIdentity())
        mcp.add_middleware(IdempotentCalls())  # after the caller is known, before forwarding
    if not http and shared_state is None:  # the client's workspace as a source, on first use
        from mcp_surface.workspace import Workspace, start_dir

        conf = settings or (brain.settings if brain is not None else None)
        mcp.add_middleware(Workspace(conf.sources.workspace if conf else "off",
                                     start_dir() if brain is None else None,
                                     bool(conf and conf.memory.workspace_project)))
    if brain is None and shared_state is None:
        from webui import host as webui_host

        settings = settings or load_settings()
        router = routing.attach(mcp, settings, state,
                                lambda a: create_server(auth=a, shared_state=state),
                                "http" if http else "stdio")
        webui_host.attach(router, settings, start=settings.ui.enabled)

    async def call(fn: Callable[[Services], T], /) -> T:
        """The one gate every tool goes through (mcp_surface/calls.py's ``Call``): the call
        always runs as a named caller (its HTTP token's or forwarded identity, else the
        brain's own identity over stdio), so every service filters for it
        (brain/trust/tenancy.py)."""
        if state.brain is None:
            raise CodedToolError("NOT_READY", "the brain is still starting; retry in a moment")
        b = state.brain
        caller = tenancy.caller(b.identity)
        try:
            with acting_as(caller):  # worker threads inherit it: anyio copies the context
                # The result is made valid text where it is written (LeanTool.convert_result).
                return await anyio.to_thread.run_sync(functools.partial(_gated, fn, b))
        except BrainError as exc:
            raise CodedToolError.of(exc) from exc
        except OSError as exc:
            if not is_no_space(exc):
                raise
            # Every ENOSPC a tool meets, whichever path, is DISK_FULL with the figures.
            raise CodedToolError.of(disk_full("finish this call",
                                              str(exc.filename or b.home))) from exc
        finally:
            heap.touch()  # the store's mapped pages are given back once calls stop

    @tool(mcp, WRITE, out.WRITTEN)
    async def add_memory(
        content: Text,
        project: WorkProject = None,
        memory_type: NewMemoryType = "permanent",
        note_kind: NoteKind = "general",
        tags: TagList = None,
        pinned: bool = False,
        visibility: Visibility = "shared",
        context: Annotated[Text | None, Field(description="Why it matters; embedded too")
                           ] = None,
        cites: Cites = None,
        supersedes: Ids = None,
    ) -> dict[str, Any]:
        """Store one idea: permanent (linked to similar notes) or fleeting (unsearched until
        distilled)."""
        res = await call(lambda s: s.memory.add(content, project, memory_type, note_kind, tags,
                                                pinned, visibility, context=context,
                                                cites=cites or (), supersedes=supersedes))
        return _written(res, note=res.note, linked=res.linked, redacted=list(res.redacted))

    @tool(mcp, WRITE, out.UPDATED)
    async def update_memory(zk_id: ZkId, new_content: Text) -> dict[str, Any]:
        """Correct a note; its old text stays as history."""
        res = await call(lambda s: s.memory.update(zk_id, new_content, keep_history=True))
        return {"note": res.note, "redacted": list(res.redacted)}

    @tool(mcp, READ, out.SEARCH)
    async def search_memory(
        query: Query,
        top_k: TopK | None = None,
        project: WorkProject = None,
        filters: RecallFilters | None = None,
        include_files: bool = False,
        files_threshold: Similarity | None = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Search notes by meaning and keyword, for direct lookups. A clear single answer
        comes alone unless top_k is given (5). Hits are compact; get_note reads one."""
        req = NoteSearch(query, top_k, project, filters, include_files, files_threshold,
                         detail)
        return await call(lambda s: search_notes(s, req))

    @tool(mcp, READ, out.ONE_NOTE)
    async def get_note(zk_id: ZkId) -> dict[str, Any]:
        """One whole note by id: content, context, keywords, links, dates."""
        return await call(lambda s: {"note": s.memory.get(zk_id)})

    @tool(mcp, PURE_READ, out.RELATED)
    async def get_related(
        zk_id: ZkId, depth: Annotated[int, Field(ge=1, le=3)] = 1
    ) -> dict[str, Any]:
        """Notes linked to a note, up to depth hops away."""
        return await call(lambda s: s.memory.related(zk_id, depth))

    @tool(mcp, WRITE, out.WRITTEN_NOTE)
    async def distill_to_permanent(zk_id: ZkId) -> dict[str, Any]:
        """Promote a fleeting note to permanent: re-enriched, re-embedded, linked."""
        res = await call(lambda s: s.memory.distill(zk_id))
        return {"note": res.note, "linked": res.linked}

    @tool(mcp, WRITE, out.RESTORED)
    async def restore_note(zk_id: ZkId) -> dict[str, Any]:
        """Bring back an archived note, or a forgotten one within its grace period."""
        return await call(lambda s: s.memory.restore(zk_id))

    @tool(mcp, DESTRUCTIVE, out.FORGOTTEN)
    async def forget_memory(zk_id: ZkId) -> dict[str, Any]:
        """Soft-delete a note; restore_note undoes it within the grace period."""
        p = await call(lambda s: s.memory.forget(zk_id))
        if not p.get("forgotten"):  # it confirmed a proposed supersession (docs/time.md)
            return {"zk_id": p["zk_id"], "forgotten": False, "forgotten_at": "",
                    "superseded_by": p["superseded_by"]}
        return {"zk_id": p["zk_id"], "forgotten": True, "forgotten_at": p.get("forgotten_at")}

    @tool(mcp, PURE_READ, out.STATS)
    async def brain_stats() -> dict[str, Any]:
        """Counts by type and kind, graph size, backend, model and index state."""
        return await call(lambda s: s.stats())

    for group in TOOL_GROUPS:
        group.register(mcp, call)
    return mcp


# Tool groups in mcp_surface/, registered after the core memory tools above. Plain imports:
# a group that is missing or fails to import stops the server instead of vanishing.
TOOL_GROUPS = (workflow, agentic, sources, files, health, fs, models, citations)


def _written(res: WriteResult, **out: object) -> dict[str, Any]:
    """add_memory's answer, with what it superseded or proposes to (only when it did)."""
    return {**out, "supersession": res.supersession} if res.supersession else out


def _profile_of(settings: Settings | None, brain: Brain | None) -> Profile:
    chosen = brain.settings if brain is not None else settings or load_settings()
    return chosen.mcp.tools


def main(argv: list[str] | None = None) -> None:
    """Start the stdio server (``python mcp_server.py``); ``--http`` serves streamable HTTP
    (127.0.0.1:8765 unless ``--host``/``--port``) behind a bearer token."""

    parser = argparse.ArgumentParser(prog="mcp_server.py")
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--ui", action="store_true")  # `brain ui`: the web explorer (webui/)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    from brain.process import startup
    from mcp_surface import routing

    try:
        settings = load_settings()
    except ValueError as exc:
        startup.refuse(startup.guess_home(), exc)
    setup_logging(settings.home, settings.log.level)
    # A log write on a full disk must not print a traceback; the space guard says why once.
    logging.raiseExceptions = False
    if args.ui:
        from webui.run import serve

        try:  # the Brain it opens loads [rerank] itself, refusing to start as below
            serve(settings, create_server)
        except Exception as exc:  # noqa: BLE001 - every start failure is the one-line error
            startup.refuse(settings.home, startup.brain_error_in(exc) or exc)
        return
    try:
        if args.http:  # a taken port: one line, before a token is printed or a store opened
            from brain.process.ports import port_free

            port_free(args.host, args.port)
        # [rerank] enabled: the cross-encoder loads now, or the server does not start.
        rerank.load(settings.rerank)
        server = create_server(settings, http=args.http)
        # The owner opens its Brain here, before the transport's task groups: a store that
        # refuses to serve (damaged, full disk, locked, no model) is reported as one line.
        routing.claim(server)
    except Exception as exc:  # noqa: BLE001 - every start failure is the one-line error
        startup.refuse(settings.home, exc)
    try:
        _run(server, args)
    except Exception as exc:
        err = startup.brain_error_in(exc)
        if err is None:
            raise
        startup.refuse(settings.home, err)


def _run(server: FastMCP, args: argparse.Namespace) -> None:
    if not args.http:
        from mcp_surface.stdio_guard import run_stdio  # answers lines the SDK cannot decode
        anyio.run(run_stdio, server)
        return
    verifier: Any = server.auth  # routing.HttpTokenVerifier, set by create_server(http=True)
    if verifier.created:
        print(f"opencode-brain: new HTTP token {verifier.token} saved in {verifier.token_path} "
              "(0600); clients send it as 'Authorization: Bearer <token>'", file=sys.stderr)
    else:
        print(f"opencode-brain: HTTP token in {verifier.token_path}", file=sys.stderr)
    server.run(transport="http", show_banner=False, host=args.host, port=args.port)

if __name__ == "__main__":
    main()
