"""Tool profiles: which tools a server lists, and what a call to an unlisted one answers.

``[mcp] tools`` (``BRAIN__MCP__TOOLS``) picks the profile:

- ``core`` (default): what a coding agent uses in a session, the 18 tools of the OpenCode
  Brain seed plus ``fs_search``, ``search_files``, ``get_note`` and ``forget_memory``;
- ``full``: core plus the admin tools, each family folded into one tool with an ``action``
  argument (``health``, ``sources``, ``changes``, ``fs``, ``files``, ``model``),
  ``brain_capabilities`` and ``verify_note``. Every admin action is also a ``brain`` command, which costs the
  agent's context nothing.

Every tool is registered whatever the profile; :class:`ProfileGate` lists only the profile's
and answers a call to any other with ``TOOL_NOT_IN_PROFILE``, naming the setting that
exposes it. Calls in the shape of earlier releases keep working: a tool name from before the
families were folded (``health_scan``, ``add_source``, ...) is the family's tool with its
action, and the recall filter's fields sent at the top level of ``search_memory`` or
``deep_search`` go into ``filters``. Neither is listed, so neither costs context.
"""

from __future__ import annotations

from typing import Any, Literal

from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext

from mcp_surface.recall import FLAT_FILTER_ARGS
from mcp_surface.tool_errors import CodedToolError

Profile = Literal["core", "full"]

CORE: frozenset[str] = frozenset({
    # the OpenCode Brain seed's 18
    "open_session", "get_session_context", "get_inbox", "distill_to_permanent", "deep_search",
    "search_memory", "get_related", "add_memory", "update_memory", "archive_stale_notes",
    "close_session", "brain_stats", "record_failure", "record_resolution", "preflight_check",
    "restore_note", "decay_report", "consolidate_clusters",
    # what a session also reaches for
    "fs_search", "search_files", "get_note", "forget_memory",
})

# Tool names of earlier releases: (tool, action) they are now.
RENAMED: dict[str, tuple[str, str]] = {
    **{f"health_{a}": ("health", a) for a in (
        "stats", "scan", "duplicates", "hot_files", "gc", "repair", "collection",
        "rebuild_indexes", "quantization")},
    "model_status": ("model", "status"),
    "model_estimate": ("model", "estimate"),
    "list_changes": ("changes", "list"),
    "preview_change": ("changes", "preview"),
    "approve_change": ("changes", "approve"),
    "revert_change": ("changes", "revert"),
    "add_source": ("sources", "add"),
    "list_sources": ("sources", "list"),
    "update_source": ("sources", "update"),
    "remove_source": ("sources", "remove"),
    "sync_source": ("sources", "sync"),
    "sync_status": ("sources", "status"),
    "cancel_sync": ("sources", "cancel"),
    "rescan_source": ("sources", "rescan"),
    "reset_source_state": ("sources", "reset"),
    "reembed": ("sources", "reembed"),
    "repair_orphans": ("sources", "repair_orphans"),
    "ingest_file": ("files", "ingest"),
    "list_files": ("files", "list"),
    "get_file": ("files", "get"),
    "reprocess_file": ("files", "reprocess"),
    "delete_file": ("files", "delete"),
    "fs_read": ("fs", "read"),
    "fs_list": ("fs", "list"),  # its folder is now path (ARG_RENAMED)
    "fs_write": ("fs", "write"),
}

# The `brain` command of each admin action: what TOOL_NOT_IN_PROFILE points to, and what
# tests/surface/test_profiles.py runs for every action the full profile adds.
CLI: dict[tuple[str, str], str] = {
    **{("health", a): f"brain health {a.replace('_', '-')}" for a in (
        "stats", "scan", "duplicates", "hot_files", "gc", "repair", "collection",
        "rebuild_indexes", "quantization")},
    ("model", "status"): "brain model status",
    ("model", "estimate"): "brain model estimate",
    ("changes", "list"): "brain changes list",
    ("changes", "preview"): "brain changes preview",
    ("changes", "approve"): "brain changes approve",
    ("changes", "revert"): "brain changes revert",
    ("sources", "add"): "brain source add",
    ("sources", "workspace"): "brain source add",  # a folder named by hand is the same
    ("sources", "list"): "brain source list",
    ("sources", "update"): "brain source update",
    ("sources", "remove"): "brain source remove",
    ("sources", "sync"): "brain sync",
    ("sources", "status"): "brain source jobs",
    ("sources", "cancel"): "brain source cancel",
    ("sources", "rescan"): "brain sync --rescan",
    ("sources", "reset"): "brain source reset",
    ("sources", "reembed"): "brain source reembed",
    ("sources", "repair_orphans"): "brain repair-orphans",
    ("files", "ingest"): "brain ingest",
    ("files", "list"): "brain files list",
    ("files", "get"): "brain files show",
    ("files", "reprocess"): "brain files reprocess",
    ("files", "delete"): "brain files delete",
    ("fs", "read"): "brain fs read",
    ("fs", "list"): "brain fs list",
    ("fs", "write"): "brain fs write",
    ("brain_capabilities", ""): "brain capabilities",
    ("verify_note", ""): "brain notes verify",
}

# Arguments renamed when their tool was folded: old tool -> {old name: new name}.
ARG_RENAMED: dict[str, dict[str, str]] = {
    "fs_list": {"folder": "path"},
}
FILTERED = frozenset({"search_memory", "deep_search"})  # the tools that take ``filters``
SETTING = 'BRAIN__MCP__TOOLS=full (or [mcp] tools = "full" in brain.toml)'


def listed(profile: Profile, name: str) -> bool:
    return profile == "full" or name in CORE


class ProfileGate(Middleware):
    """Lists the profile's tools; maps earlier releases' calls; refuses unlisted tools."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile

    async def on_list_tools(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        tools = await call_next(context)
        return [t for t in tools if listed(self.profile, t.name)]

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        asked = context.message.name
        name, args = current_shape(asked, dict(context.message.arguments or {}))
        if not listed(self.profile, name):
            ctx = context.fastmcp_context
            if ctx is not None and await ctx.fastmcp.get_tool(name) is not None:
                raise _hidden(name, asked, str(args.get("action", "")), self.profile)
        message = context.message.model_copy(update={"name": name, "arguments": args})
        return await call_next(context.copy(message=message))


def current_shape(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A call in the shape of an earlier release (a folded tool's old name, the filter's
    fields at the top level) as the same call to today's tools; other calls unchanged. The
    owner's call channel (scripts, hooks) applies it too (owner_endpoint.py)."""
    if name in RENAMED:
        renames = ARG_RENAMED.get(name, {})
        args = {renames.get(k, k): v for k, v in args.items()}
        name, action = RENAMED[name]
        args = {"action": action, **args}
    if name in FILTERED:
        args = nest_filters(args)
    return name, args


def _hidden(name: str, asked: str, action: str, profile: str) -> CodedToolError:
    shown = f'{name}(action="{action}")' if asked != name else name
    command = CLI.get((name, action)) or CLI.get((name, ""))
    return CodedToolError(
        "TOOL_NOT_IN_PROFILE",
        f"{shown} is an admin tool of the full profile, which this server does not list; "
        f"set {SETTING} and restart" + (f", or run `{command}`" if command else ""),
        {"tool": name, "profile": profile, "setting": "mcp.tools", "command": command})


def nest_filters(args: dict[str, Any]) -> dict[str, Any]:
    """A call with the filter's fields at the top level (earlier releases), as one with them
    in ``filters``; a field given both ways is refused rather than silently picked."""
    flat = {k: args.pop(k) for k in list(args) if k in FLAT_FILTER_ARGS}
    if not flat:
        return args
    nested = args.get("filters")
    nested = dict(nested) if isinstance(nested, dict) else {}
    for old, new in ((k, FLAT_FILTER_ARGS[k]) for k in flat):
        if new in nested:
            raise CodedToolError(
                "INVALID_ARGUMENT",
                f"{old} is given both at the top level and in filters; give it in filters only",
                {"field": old})
        nested[new] = flat[old]
    return {**args, "filters": nested}
