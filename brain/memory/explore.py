"""The reads of the web explorer: the notes at the centre of the link graph, the links
among a set of notes, and the newest notes of some kinds. Each keeps to what the caller may
see (brain/trust/tenancy.py), like every other read of the memory service.

Module functions over a :class:`~brain.memory.core.NoteCore` (``m``); MemoryService exposes
them as its methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any

from brain.memory.core import NoteCore
from brain.memory.read import notes
from brain.notes import point_id
from brain.trust import tenancy
from brain.vector_store import Filter, Match, MatchAny

HUB_BATCH = 256  # linked nodes read from the store at a time


def hub_notes(m: NoteCore, project: str | None, limit: int, scan: int
              ) -> list[dict[str, Any]]:
    """Up to ``limit`` of the most linked notes the caller may see (of ``project``, when
    given), most linked first; at most ``scan`` linked nodes are looked at to find them."""
    hubs = [z for z, _ in m.graph.hubs()[:scan]]
    picked: dict[str, dict[str, Any]] = {}
    for start in range(0, len(hubs), HUB_BATCH):
        for pt in m.store.retrieve([point_id(z) for z in hubs[start:start + HUB_BATCH]]):
            p = pt.payload
            if (p.get("kind") == "note" and not p.get("forgotten") and m.visible(p)
                    and (project is None or p.get("project") == project)):
                picked[p["zk_id"]] = p
        if len(picked) >= limit:
            break
    return [picked[z] for z in hubs if z in picked][:limit]


def links_among(m: NoteCore, ids: set[str]) -> list[tuple[str, str, str]]:
    """(source, target, relation) of the links whose two ends are both in ``ids``."""
    return m.graph.edges_among(ids)


def latest(m: NoteCore, kinds: Sequence[str], project: str | None, cap: int
           ) -> list[dict[str, Any]]:
    """The caller's unforgotten notes of ``kinds`` (of ``project``, when given), newest
    first; at most ``cap`` are read."""
    must: list[Any] = [MatchAny("note_kind", tuple(kinds)), *tenancy.conditions(m.identity)]
    if project:
        must.append(Match("project", project))
    flt = Filter(must=tuple(must), must_not=(Match("forgotten", True),))
    found = list(islice(notes(m, flt), cap))
    found.sort(key=lambda p: (-float(p.get("created_ts") or 0.0), p.get("zk_id", "")))
    return found
