"""Who may see what: the one place that decides tenancy, for every kind of record.

The caller is an :class:`~brain.trust.identity.Identity` (user, agent). The MCP layer's single
call gate sets it for every tool call (from the HTTP token, the forwarding proxy's caller, or
the settings over stdio), so inside a tool it is never unset. Outside a tool call (the CLI,
background workers) the process acts for the settings identity.

Every object a caller can reach carries ``user_id``, ``agent_id`` and ``visibility``: notes,
session notes, mistakes, uploaded documents and their passages, sources and their points.
A caller reaches an object when it belongs to the caller's user and is either shared (the
default: every agent of that user sees it) or private to the calling agent. A missing
visibility reads as shared (records written before visibility existed); a missing user
reads as nobody's.

Paths add one rule inside a source (seed 000's per-path read policy): a file under an
agent's private ``agent-core/<agentId>/`` subtree belongs to that agent alone. Its points
carry the owner marker (``path_agent``, ``path_private``); every file search, read, list
and write checks it (:func:`path_readable`, :func:`path_conditions`), a denied path is
silently absent from results, and naming a fully denied folder is ``FORBIDDEN``.

Services never build their own tenancy filter: they ask here for store conditions
(:func:`conditions`), a SQL clause (:func:`sql`) or a check of one record
(:func:`visible`); a record that fails the check is reported exactly as a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from brain.errors import InvalidArgument
from brain.notes import VISIBILITIES, Visibility
from brain.trust.identity import Identity
from brain.trust.identity import current as _current
from brain.vector_store import Filter, Match

SHARED: Visibility = "shared"
PRIVATE: Visibility = "private"


def caller(default: Identity) -> Identity:
    """The identity of the running call, else ``default`` (the settings identity)."""
    ident = _current.get()
    return ident if ident is not None else default


def resolve(settings: Any) -> Identity:
    """The caller, else the identity the settings name (services hold the settings)."""
    return caller(settings_identity(settings))


def in_call() -> bool:
    """True inside a call that named its caller (every tool call; see the call gate)."""
    return _current.get() is not None


def settings_identity(settings: Any) -> Identity:
    return Identity(settings.identity.user_id, settings.identity.agent_id)


def owner_fields(ident: Identity, visibility: str = SHARED) -> dict[str, str]:
    """What a new record or point of ``ident`` carries."""
    return {"user_id": ident.user_id, "agent_id": ident.agent_id,
            "visibility": check_visibility(visibility)}


def check_visibility(visibility: str) -> Visibility:
    if visibility not in VISIBILITIES:
        raise InvalidArgument(f"visibility={visibility!r} is not valid; use one of: "
                              f"{', '.join(VISIBILITIES)}", field="visibility")
    return cast(Visibility, visibility)


def conditions(ident: Identity, *, siblings: bool = False) -> tuple[Filter | Match, ...]:
    """Store conditions (AND them into a filter) that keep a search to what ``ident`` may
    see: its user's objects, without the private ones of sibling agents. ``siblings``
    (search_memory's include_siblings) drops only that second part, never the user."""
    user = Match("user_id", ident.user_id)
    if siblings:
        return (user,)
    foreign_private = Filter(must=(Match("visibility", PRIVATE),),
                             must_not=(Match("agent_id", ident.agent_id),))
    return (user, Filter(must_not=(foreign_private,)))


AGENT_CORE = "agent-core"


def path_agent(rel: str) -> str | None:
    """The agent whose private ``agent-core/<agentId>/`` subtree holds ``rel``, if any."""
    parts = [p for p in rel.strip("/").split("/") if p]
    for i, part in enumerate(parts[:-1]):
        if part == AGENT_CORE:
            return parts[i + 1]
    return None


def path_fields(rel: str) -> dict[str, Any]:
    """The owner marker a source point of ``rel`` carries (none outside agent-core)."""
    agent = path_agent(rel)
    return {} if agent is None else {"path_agent": agent, "path_private": True}


def path_readable(rel: str, ident: Identity) -> bool:
    """Whether ``ident`` may read the source path ``rel`` (a file or a folder)."""
    agent = path_agent(rel + "/")
    return agent is None or agent == ident.agent_id


def path_conditions(ident: Identity) -> tuple[Filter, ...]:
    """Store conditions that drop source points under another agent's agent-core subtree."""
    foreign = Filter(must=(Match("path_private", True),),
                     must_not=(Match("path_agent", ident.agent_id),))
    return (Filter(must_not=(foreign,)),)


def visible(record: Mapping[str, Any], ident: Identity) -> bool:
    """Whether ``ident`` may see (and so act on) one record or point payload."""
    if record.get("user_id") != ident.user_id:
        return False
    return record.get("visibility") != PRIVATE or record.get("agent_id") == ident.agent_id


def may_link(src: Mapping[str, Any], dst: Mapping[str, Any]) -> bool:
    """Whether note ``src`` may hold a link to ``dst``: a shared note never names a private
    one (every sibling reading the shared note would learn the private id), and no note
    names another user's."""
    return src.get("user_id") == dst.get("user_id") and not (
        src.get("visibility") != PRIVATE and dst.get("visibility") == PRIVATE)


def linkable(visibility: str) -> tuple[Match, ...]:
    """Extra store conditions for the link candidates of a note of ``visibility``."""
    return () if visibility == PRIVATE else (Match("visibility", SHARED),)


def same_audience(payload: Mapping[str, Any]) -> tuple[Match, ...]:
    """Store conditions for the records read by the same audience as ``payload``: its user
    and visibility, and its agent when private (what a supersession may cross)."""
    vis = payload.get("visibility", SHARED)
    own = (Match("user_id", payload["user_id"]), Match("visibility", vis))
    return (*own, Match("agent_id", payload["agent_id"])) if vis == PRIVATE else own


def sql(ident: Identity) -> tuple[str, list[str]]:
    """The same rule as a SQL condition over columns user_id, agent_id, visibility."""
    return ("(user_id = ? AND (visibility != ? OR agent_id = ?))",
            [ident.user_id, PRIVATE, ident.agent_id])


def owner_of(payload: Mapping[str, Any], default: Identity) -> Identity:
    """The identity that wrote a record (background work acts as it)."""
    user, agent = payload.get("user_id"), payload.get("agent_id")
    if isinstance(user, str) and user and isinstance(agent, str) and agent:
        return Identity(user, agent)
    return default


__all__ = [
    "PRIVATE", "SHARED", "VISIBILITIES", "caller", "check_visibility", "conditions", "in_call", "linkable", "may_link",
    "owner_fields", "owner_of", "resolve", "settings_identity", "sql", "visible",
]  # fmt: skip
