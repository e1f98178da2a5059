"""The note: its payload schema, ids and enums (the OpenCode Brain schema plus tenancy and stamps).

Each list is written once here and derived everywhere else:

- the enums as ``Literal`` types (:data:`NoteKind`, :data:`MemoryType`, :data:`Visibility`,
  :data:`Relation`); the tools list them in their schemas, the services check values against
  the tuples taken from them (:data:`NOTE_KINDS`, ...);
- the payload as :class:`NotePayload`: the write path builds one, ``check_health`` requires
  its required keys (:data:`REQUIRED_FIELDS`), the ``memory-schema`` migration fills a missing
  field from :data:`NOTE_DEFAULTS`, and :func:`public_note` shows a note from it.
"""

# No ``from __future__ import annotations`` here: Python 3.11's TypedDict sees NotRequired
# only in an evaluated annotation, and REQUIRED_FIELDS is read from NotePayload's.
import copy
import re
import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, get_args, get_origin, get_type_hints

from brain.citation import summary as citation_summary
from brain.clock import parse_iso

# A note's memory type; a note is written fleeting or permanent, and archived only later.
NewMemoryType = Literal["fleeting", "permanent"]
MemoryType = Literal[NewMemoryType, "archived"]
# Notes about the session rather than the project's knowledge; a search leaves them out
# unless asked (include_contextual).
ContextualKind = Literal["open_thread", "session_summary", "project_context"]
NoteKind = Literal["mistake", "fix", "pattern", "research", "decision", "general", ContextualKind]
Relation = Literal["related", "supports", "contradicts", "extends", "fixes", "caused_by",
                   "supersedes"]
Visibility = Literal["shared", "private"]

NEW_MEMORY_TYPES: tuple[str, ...] = get_args(NewMemoryType)
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
NOTE_KINDS: tuple[str, ...] = get_args(NoteKind)
CONTEXTUAL_KINDS: tuple[str, ...] = get_args(ContextualKind)
RELATIONS: tuple[str, ...] = get_args(Relation)
VISIBILITIES: tuple[str, ...] = get_args(Visibility)

ZK_ID_RE = re.compile(r"^ZK-[0-9A-F]{8}$")
_NAMESPACE = uuid.UUID("6f1c7a52-8c4e-4b8e-9d0b-3a1f2a6c9e11")


class NotePayload(TypedDict):
    """A note as the write path stores it. Required keys: every stored note has them
    (check_health reports a missing one). NotRequired keys: written by every add today but
    absent from notes of older versions. Fields a note gains later (``cites``,
    ``thread_prev``, ``archived_from``, ``legacy_*``) are not part of its schema."""

    kind: Literal["note"]
    zk_id: str
    title: str
    content: str
    # Absent: not known (brain/search/fusion.py counts such a note as neither code nor prose).
    is_code: NotRequired[bool]
    context: str
    # "caller" or "heuristic"; absent reads as heuristic.
    context_by: NotRequired[str]
    keywords: list[str]
    tags: list[str]
    links: list[str]
    link_types: dict[str, Relation]
    memory_type: MemoryType
    note_kind: NoteKind
    pinned: bool
    project: str
    created: str
    updated: str
    created_ts: NotRequired[float]
    updated_ts: NotRequired[float]
    access_count: int
    last_accessed: str
    last_accessed_ts: NotRequired[float]
    user_id: str
    agent_id: str
    visibility: NotRequired[Visibility]
    salience: float
    embed_model: str
    enriched_by: str
    forgotten: bool
    # The store's decaying-salience sort key (brain/memory/salience.py), derived from the rest.
    salience_key: NotRequired[float]
    # Who may recall it, stamped by the store on every write (brain/store/recall_key.py).
    recall_key: NotRequired[list[str]]


NOTE_FIELDS: tuple[str, ...] = tuple(NotePayload.__annotations__)


class NoteContext(TypedDict):
    """What a default may depend on: the home's default project, the time, the owner and the
    embedding model of the store."""

    project: str
    now: str
    user_id: str
    agent_id: str
    model: str


@dataclass(frozen=True, slots=True)
class Derived:
    """A default computed from the note (its fields so far) and the :class:`NoteContext`."""

    fn: Callable[[Mapping[str, Any], NoteContext], Any]


def _text(payload: Mapping[str, Any], name: str) -> str | None:
    value = payload.get(name)
    return value if isinstance(value, str) else None


def _title(p: Mapping[str, Any], _: NoteContext) -> str:
    return (_text(p, "content") or "").strip().split("\n", 1)[0][:120]


def _ts_of(iso_field: str) -> Derived:
    def ts(p: Mapping[str, Any], _: NoteContext) -> float:
        dt = parse_iso(_text(p, iso_field) or "")
        return dt.timestamp() if dt else 0.0
    return Derived(ts)


# The default of each field a note may lack: what the memory-schema migration writes into an
# older note, and what public_note shows for a missing field (a Derived one shows None).
# zk_id, is_code, context_by and salience_key have none: their absence means "not known".
NOTE_DEFAULTS: dict[str, Any] = {
    "kind": "note",
    "title": Derived(_title),
    "content": "",
    "context": "",
    "keywords": [],
    "tags": [],
    "links": [],
    "link_types": Derived(lambda p, _: {z: "related" for z in p.get("links", [])
                                        if isinstance(z, str)}),
    "memory_type": "permanent",
    "note_kind": "general",
    "pinned": False,
    "project": Derived(lambda _, c: c["project"]),
    "created": Derived(lambda p, c: _text(p, "created") or _text(p, "updated") or c["now"]),
    "updated": Derived(lambda p, c: _text(p, "updated") or _text(p, "created") or c["now"]),
    "created_ts": _ts_of("created"),
    "updated_ts": _ts_of("updated"),
    "access_count": 0,
    "last_accessed": "",
    "last_accessed_ts": _ts_of("last_accessed"),
    "user_id": Derived(lambda _, c: c["user_id"]),
    "agent_id": Derived(lambda _, c: c["agent_id"]),
    "visibility": "shared",
    "salience": 0.5,
    "embed_model": Derived(lambda _, c: c["model"]),
    "enriched_by": "legacy",
    "forgotten": False,
}


def missing_defaults(payload: Mapping[str, Any], ctx: NoteContext) -> dict[str, Any]:
    """The fields ``payload`` lacks, each from :data:`NOTE_DEFAULTS`; a derived default sees
    the fields filled before it (``created_ts`` reads the ``created`` just filled)."""
    patch: dict[str, Any] = {}
    seen = dict(payload)
    for name, default in NOTE_DEFAULTS.items():
        if name not in payload:
            seen[name] = patch[name] = (default.fn(seen, ctx) if isinstance(default, Derived)
                                        else copy.deepcopy(default))
    return patch


def _runtime_type(hint: Any) -> type | tuple[type, ...]:
    """The isinstance check of a field's type: ``list[str]`` -> list, a Literal -> the type of
    its values, ``float`` -> int or float (PEP 484's numeric tower)."""
    origin = get_origin(hint)
    if origin is Literal:
        return type(get_args(hint)[0])
    if hint is float:
        return (int, float)
    return origin if isinstance(origin, type) else hint  # type: ignore[no-any-return]


# Fields every stored note has, with their types; check_schema_health and the migrations use it.
REQUIRED_FIELDS: dict[str, type | tuple[type, ...]] = {
    name: _runtime_type(hint)
    for name, hint in get_type_hints(NotePayload).items()
    if name in NotePayload.__required_keys__
}


def new_zk_id() -> str:
    return "ZK-" + secrets.token_hex(4).upper()


def point_id(zk_id: str) -> str:
    """The store's point id of a note: a UUID derived from its zk_id."""
    return str(uuid.uuid5(_NAMESPACE, zk_id))


def normalise_zk_id(value: str) -> str:
    value = value.strip().upper()
    if not value.startswith("ZK-"):
        value = "ZK-" + value
    return value


# What a tool shows of a note, in this order (links with their relations, salience rounded).
PUBLIC_FIELDS: tuple[str, ...] = (
    "zk_id", "title", "content", "context", "keywords", "tags", "links", "project",
    "memory_type", "note_kind", "pinned", "created", "updated", "access_count",
    "last_accessed", "salience", "enriched_by", "agent_id",
)


# Supersession (brain/memory/supersede.py), shown when set: what replaced the note and when
# (superseded_by, valid_to), when its current text became true (valid_from, after an
# update), the note it is an earlier version of, and supersessions awaiting confirmation.
# ``supersedes`` (the ids it replaced) is shown as get_note's ``history``.
SUPERSESSION_FIELDS: tuple[str, ...] = (
    "superseded_by", "valid_from", "valid_to", "version_of", "proposed_supersedes",
)


def _shown(payload: Mapping[str, Any], name: str) -> Any:
    """A field as shown: its value, else its constant default, else None."""
    if name in payload:
        return payload[name]
    default = NOTE_DEFAULTS.get(name)
    return None if default is None or isinstance(default, Derived) else copy.deepcopy(default)


def public_note(payload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The fields a tool returns for a note."""
    shown = {name: _shown(payload, name) for name in PUBLIC_FIELDS}
    relations = payload.get("link_types", {})
    shown["links"] = [{"zk_id": z, "relation": relations.get(z, "related")}
                      for z in shown["links"]]
    shown["salience"] = round(float(shown["salience"]), 4)
    if payload.get("cites"):  # the code it cites, compactly: state, how many fresh, which moved
        shown["citations"] = citation_summary(payload["cites"])
    shown.update({name: payload[name] for name in SUPERSESSION_FIELDS if payload.get(name)})
    if payload.get("branch"):  # written on a git branch: open there, merged or abandoned
        shown["branch"] = {"name": payload["branch"], "state": payload.get("branch_state")}
    return {**shown, **extra}
