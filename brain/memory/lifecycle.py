"""The lifecycle of notes after they are written: state fields, forget and restore,
archive, and the counts of each state.

Module functions over a :class:`~brain.memory.core.NoteCore` (``m``); MemoryService exposes
them as its methods. Access stamps, which every reader flushes, live in access.py.
"""

from __future__ import annotations

from typing import Any

from brain.errors import Conflict, InvalidArgument
from brain.memory import hype, supersede
from brain.memory.core import NoteCore
from brain.notes import MEMORY_TYPES, NOTE_KINDS, point_id
from brain.trust import tenancy
from brain.vector_store import Filter, Match, Range

# The fields the salience filter key is computed from (brain/memory/salience.py).
_SALIENCE_INPUTS = frozenset({"salience", "salience_ts", "pinned", "created_ts",
                              "last_accessed_ts"})


def set_state(m: NoteCore, zk_id: str, **fields: Any) -> dict[str, Any]:
    """Set lifecycle fields without touching vectors or the updated stamp. A salience set
    is the note's salience now (its decay restarts); the filter key follows it."""
    with m._write_lock:
        p = m.get_payload(zk_id, include_forgotten=True)
        if "salience" in fields and "salience_ts" not in fields:
            fields["salience_ts"] = m.clock.now().timestamp()
        if _SALIENCE_INPUTS & set(fields):
            fields["salience_key"] = m.keyed({**p, **fields})["salience_key"]
        m.store.set_payload([point_id(p["zk_id"])], fields)
        return {**p, **fields}


def pin(m: NoteCore, zk_id: str, pinned: bool) -> dict[str, Any]:
    """Pin a note (it never decays below its floor nor archives) or unpin it."""
    if not isinstance(pinned, bool):
        raise InvalidArgument("pinned must be true or false", field="pinned")
    p = set_state(m, zk_id, pinned=pinned)
    return m.public(p)


def forget(m: NoteCore, zk_id: str) -> dict[str, Any]:
    """Soft-delete a note; one a live note proposed to supersede is superseded by it instead
    (returned with ``superseded_by`` and not forgotten; brain/memory/supersede.py)."""
    now, ts = m._now()
    with m._write_lock:
        old = m.get_payload(zk_id, include_forgotten=True)
        newer = supersede.settle(m, old) if old.get("proposed_by") else None
        if newer is not None:
            return m.get_payload(zk_id)
        p = set_state(m, zk_id, forgotten=True, forgotten_ts=ts, forgotten_at=now)
        supersede.release(m, p)  # what it superseded is believed again
    hype.drop(m.store, [p["zk_id"]])  # written again if it is restored
    m._emit("forgotten", p)
    return p


def restore(m: NoteCore, zk_id: str) -> dict[str, Any]:
    with m._write_lock:
        p = m.get_payload(zk_id, include_forgotten=True)
        if p.get("forgotten"):
            p = set_state(m, p["zk_id"], forgotten=False, forgotten_ts=0.0, forgotten_at="")
            supersede.reapply(m, p)
            restored = "forgotten"
        elif p["memory_type"] == "archived":
            back = p.get("archived_from") or "permanent"
            p = set_state(m, p["zk_id"], memory_type=back, archived_at="")
            restored = "archived"
        else:
            raise Conflict(f"note {p['zk_id']} is neither archived nor forgotten; nothing "
                           "to restore", zk_id=p["zk_id"])
    m._emit("restored", p)
    return {**m.public(p), "restored_from": restored}


def archive(m: NoteCore, zk_id: str) -> dict[str, Any]:
    now, _ = m._now()
    p = m.get_payload(zk_id)
    if p["memory_type"] == "archived":
        return p
    out = set_state(m, zk_id, memory_type="archived", archived_from=p["memory_type"],
                    archived_at=now)
    hype.drop(m.store, [p["zk_id"]])  # written again if it is restored
    return out


def stats(m: NoteCore) -> dict[str, Any]:
    """Counts of the calling tool's notes (another user's are none of its business); the
    CLI, outside any call, counts every note."""
    scope = m._tenancy() if tenancy.in_call() else ()
    mine = Filter(must=(Match("kind", "note"), *scope))
    # A superseded note (an earlier version included) is history, counted apart.
    old = Range("valid_to_ts", gt=0)
    by_type = {t: m.store.count(Filter(must=(*mine.must, Match("memory_type", t)),
                                       must_not=(Match("forgotten", True), old)))
               for t in MEMORY_TYPES}
    superseded = m.store.count(Filter(must=(*mine.must, old),
                                      must_not=(Match("forgotten", True),)))
    live = Filter(must=mine.must, must_not=(Match("forgotten", True),
                                            Match("memory_type", "archived"), old))
    by_kind = {k: m.store.count(live.and_(Match("note_kind", k))) for k in NOTE_KINDS}
    forgotten = m.store.count(Filter(must=(*mine.must, Match("forgotten", True))))
    return {
        "notes": sum(by_type.values()),
        "by_memory_type": by_type,
        "by_note_kind": {k: v for k, v in by_kind.items() if v},
        "forgotten_pending": forgotten,
        **({"superseded": superseded} if superseded else {}),
        "graph": m.graph.stats(),
    }
