"""One indexed key per note for everything a search of notes fixes for its caller.

A default search_memory asked seven conditions of every point its HNSW walk visits (a note,
not forgotten, permanent, not a session record, embedded by the store's model, the caller's
user, not a sibling agent's private note), and each condition is a check at every node:
about 1.5 ms apiece at 1,000,000 notes (BENCHMARKS.md, "1,000,000 notes with int8"). Those
conditions depend only on fields a note keeps for its life, so each note carries them folded
into ``recall_key``, a keyword list, and the search asks one ``MatchAny`` instead.

A key is the JSON list ``[user, audience, model, memory_type, class]``:

- ``audience``: ``shared`` (every agent of the user sees the note), ``agent:<id>`` (a private
  note, its agent alone), and on every note ``*`` (the user's whole view, include_siblings);
- ``class``: ``old`` for a note another superseded (its ``valid_to`` set;
  brain/memory/supersede.py), which only an ``as_of`` search asks for; else ``ctx`` for the
  session records a search leaves out by default (``CONTEXTUAL_KINDS``); else ``std``.

A note that is forgotten, or lacks a user, model or memory type, has no key: no search finds
it, as none did. JSON keeps the parts apart whatever characters an id holds. Multi-valued
fields get every combination, so a key matches exactly when the conditions it replaces did
(brain/trust/tenancy.py decides who sees what; :func:`keys` restates that rule over one payload,
and tests/store/test_recall_key.py checks the two agree on every state a note goes through).

Who keeps it true: the store the brain writes through (brain/store/guarded.py ``GuardedStore``)
computes the key on every upsert and on every payload change that touches an input, in the
same write; a caller can never set it. A model switch re-stamps what it carries over
(brain/generations/rebuild.py). A store from before keys gets them once (:func:`at_open`):
a small one, or a server, page by page (:func:`backfill`, resumable from a cursor in the
store's meta record); a large embedded one in the copy its next index run optimizes, because
a payload written into an HNSW-indexed segment moves the point out of it (measured: every
vector read one by one until the next run). Until the store records :data:`VERSION` for its
generation, searches use the conditions themselves (brain/memory/filters.py).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from brain.notes import CONTEXTUAL_KINDS
from brain.vector_store import Filter, Match, MatchAny, Point

log = logging.getLogger(__name__)

FIELD = "recall_key"
VERSION = 1
# The store meta's record: [version, generation] once every note's key follows this version,
# and the backfill's cursor ([generation, next point id]).
MARK = "recall_key_version"
CURSOR = "recall_key_cursor"
# The payload fields a key is computed from: a change to any of them moves the key.
INPUTS = frozenset({"kind", "forgotten", "embed_model", "user_id", "agent_id", "visibility",
                    "memory_type", "note_kind", "valid_to"})
ALL_AGENTS = "*"
SHARED = "shared"
PRIVATE = "private"
BACKFILL_PAGE = 512
REWRITE = "brain.store.recall_key:patch"  # what an index run's copy rewrites (edge_swap)
_CONTEXTUAL = frozenset(CONTEXTUAL_KINDS)


def _values(value: Any) -> list[str]:
    """The keyword values a field matches as (a keyword match on a list matches any item)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return list(dict.fromkeys(v for v in value if isinstance(v, str)))
    return []


def encode(user: str, audience: str, model: str, memory_type: str, cls: str) -> str:
    return json.dumps([user, audience, model, memory_type, cls], ensure_ascii=False,
                      separators=(",", ":"))


def keys(payload: Mapping[str, Any]) -> list[str]:
    """The recall keys of one point's payload (none for anything but a live note)."""
    if "note" not in _values(payload.get("kind")) or payload.get("forgotten") is True:
        return []
    kinds = _values(payload.get("note_kind"))
    classes = ["old"] if payload.get("valid_to") else (
        ["ctx"] if _CONTEXTUAL & set(kinds) else ["std"])
    audiences = [ALL_AGENTS]
    if PRIVATE not in _values(payload.get("visibility")):  # missing reads as shared
        audiences.append(SHARED)
    else:
        audiences += [f"agent:{a}" for a in _values(payload.get("agent_id"))]
    return [encode(*parts) for parts in itertools.product(
        _values(payload.get("user_id")), audiences, _values(payload.get("embed_model")),
        _values(payload.get("memory_type")), classes)]


def stamp(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with its key set (in place); a point that gets none carries none, or an
    empty one where its payload named the field (as a forget leaves it: a payload change
    cannot remove a field, so an exported forgotten note comes back as it was)."""
    want = keys(payload)
    if want or FIELD in payload:
        payload[FIELD] = want
    return payload


def patch(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The key to write on a point whose stored one is not what its payload gives (None when
    it is): what an optimization's rewrite sets on each point (edge_swap.rewrite_payloads)."""
    want = keys(payload)
    return None if payload.get(FIELD, []) == want else {FIELD: want}


def stamped(points: Sequence[Point]) -> list[Point]:
    """``points`` each with the key of its payload (copies; the caller's stay as they were)."""
    return [Point(p.id, stamp(dict(p.payload)), p.dense, p.sparse) for p in points]


def condition(user: str, agent: str, model: str, memory_types: Iterable[str], *,
              contextual: bool, siblings: bool, superseded: bool = False) -> MatchAny:
    """The one condition that stands for the notes ``user``/``agent`` may see, embedded by
    ``model``, of ``memory_types``, with the session records when ``contextual`` and the
    superseded notes when ``superseded``."""
    audiences = [ALL_AGENTS] if siblings else [SHARED, f"agent:{agent}"]
    classes = ["std", "ctx"] if contextual else ["std"]
    if superseded:
        classes.append("old")
    return MatchAny(FIELD, tuple(encode(user, a, model, t, c) for a, t, c in
                                 itertools.product(audiences, memory_types, classes)))


def _generation(meta_data: Mapping[str, Any]) -> int:
    return int(meta_data.get("generation", 1))


def complete(meta_data: Mapping[str, Any]) -> bool:
    """Whether every note of the store carries a key of this version. The record names the
    generation it was made in: a model switch (or its rollback) serves another one, whose
    notes are checked again before searches trust their keys."""
    return meta_data.get(MARK) == [VERSION, _generation(meta_data)]


# ------------------------------------------------------------------------------ backfill
NOTES = Filter(must=(Match("kind", "note"),))


class KeyedStore(Protocol):
    """What the backfill needs of the brain's store (brain/store/guarded.py GuardedStore)."""

    def held(self) -> AbstractContextManager[None]: ...

    def scroll(self, flt: Filter | None, limit: int = 256, offset: str | None = None,
               with_vectors: bool = False) -> tuple[list[Point], str | None]: ...

    def rekey(self, points: Sequence[Point]) -> int: ...

    def count(self, flt: Filter | None = None) -> int: ...


class Meta(Protocol):
    """What the backfill needs of the store's meta record (brain/store/meta.py)."""

    data: dict[str, Any]

    def set(self, **fields: Any) -> None: ...


def backfill(store: KeyedStore, meta: Meta, *, page: int = BACKFILL_PAGE, max_pages: int | None = None,
             stop: threading.Event | None = None) -> dict[str, Any]:
    """Key every note of a store from before keys, ``page`` notes at a time from the cursor
    the last run recorded; record :data:`VERSION` once the last page is done. Each page is
    read and written with the store's writes held, so no state change can fall between the
    read and the key written from it (and every write meanwhile keys itself). Returns what
    it did; ``done`` says whether the store is complete."""
    if complete(meta.data):
        return {"done": True, "scanned": 0, "written": 0}
    gen = _generation(meta.data)
    cursor = meta.data.get(CURSOR)
    offset = cursor[1] if isinstance(cursor, list) and cursor[:1] == [gen] else None
    scanned = written = pages = 0
    while max_pages is None or pages < max_pages:
        if stop is not None and stop.is_set():
            break
        with store.held():
            points, offset = store.scroll(NOTES, limit=page, offset=offset)
            written += store.rekey(points)
        scanned += len(points)
        pages += 1
        meta.set(**{CURSOR: [gen, offset]})  # a run cut short resumes here
        if offset is None:
            mark_complete(meta)
            log.info("recall keys: the last %d notes scanned, %d keyed; searches use them",
                     scanned, written)
            return {"done": True, "scanned": scanned, "written": written}
    return {"done": False, "scanned": scanned, "written": written}


def mark_complete(meta: Meta) -> None:
    meta.set(**{MARK: [VERSION, _generation(meta.data)], CURSOR: None})


def at_open(store: KeyedStore, meta: Meta, start: Callable[[str, Callable[[], None]], None],
            stop: threading.Event, reindex: Callable[[], bool] | None = None,
            inline_max: int = 5_000) -> None:
    """Make a store complete: at once when it is new or small, else in a thread (``start``)
    while searches keep the conditions the keys stand for. ``reindex`` (an embedded store):
    key the notes in the copy an index run optimizes and swaps in, True once one did (pages
    written in the live store would move every note out of its HNSW index until the next
    run); without it (a server), pages in the live store."""
    if complete(meta.data):
        return
    if store.count(NOTES) <= inline_max:
        backfill(store, meta, stop=stop)
        return

    def run() -> None:
        try:
            if reindex is None:
                backfill(store, meta, stop=stop)
            elif reindex():
                mark_complete(meta)
                log.info("recall keys: written by an index run; searches use them")
        except Exception:  # noqa: BLE001 - the next start tries again
            log.exception("recall keys: not written yet; searches keep the full filter")

    start("recall-key-backfill", run)
