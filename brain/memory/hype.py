"""HyPE (hypothetical prompt embeddings, seed 002): questions a permanent note answers,
written by the chat model in the background, stored as extra vectors of the note.

Storage: one point per question, ``kind = "hype"``, whose payload names its note
(``parent_id``) and copies the note's ``project``, ``user_id``, ``agent_id`` and
``visibility`` (so a tenancy filter holds on the point itself), plus the question text and
the embedding model. Only a dense vector: the BM25 leg of a search reads notes only. Point
ids derive from (note id, index), and a write first drops the note's earlier points, so a
re-run replaces, never duplicates.

Reading: :func:`parent_hits` is the search's extra dense witness. It queries the question
points (kind, project, owner, model), maps each hit to its note, and then asks the store for
those notes under the search's *own* filter (``HasId`` AND every condition the note faces:
tenancy, project, memory type, tags, custom rules, forgotten/archived). A question whose
note fails any of them is dropped. A note's dense similarity is then the max of its own and
its best question's; fusion runs on that. The note is returned, never the question.

The points are derived data: they go when their note is updated (rewritten by the next
job), forgotten, archived, merged or reclaimed; an export skips them (the importing brain
writes them again when it has a model); the health scan reports a question whose note is
gone or no longer a live permanent note as ``orphan_hype`` and GC deletes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from brain.notes import point_id
from brain.vector_store import Filter, HasId, Hit, Match, MatchAny, VectorStore

HYPE = "hype"
_NAMESPACE = uuid.UUID("6f1d2a8e-58c4-4d0b-9a7e-2b51c3e8d0f4")
_OWNER_FIELDS = ("project", "user_id", "agent_id", "visibility")


def hype_point_id(zk_id: str, index: int) -> str:
    """The store id of question ``index`` of note ``zk_id`` (stable across re-runs)."""
    return str(uuid.uuid5(_NAMESPACE, f"{zk_id}#hype#{index}"))


def hype_payload(note: dict[str, Any], index: int, question: str, model: str,
                 written_by: str, ts: float) -> dict[str, Any]:
    return {
        "kind": HYPE,
        "parent_id": note["zk_id"],
        **{k: note.get(k, "shared" if k == "visibility" else "") for k in _OWNER_FIELDS},
        "question": question,
        "index": index,
        "embed_model": model,
        "written_by": written_by,
        "created_ts": ts,
    }


def of_notes(zk_ids: Iterable[str]) -> Filter:
    return Filter(must=(Match("kind", HYPE), MatchAny("parent_id", tuple(zk_ids))))


def drop(store: VectorStore, zk_ids: Sequence[str]) -> None:
    """Delete the question points of these notes (none is fine). Counted first: a delete
    by filter is a recorded store write (and a manifest update), which a note without
    questions, the common case, should not pay for on every update or forget."""
    if zk_ids and store.count(of_notes(zk_ids)):
        store.delete_by_filter(of_notes(zk_ids))


def count(store: VectorStore, zk_id: str | None = None) -> int:
    flt = of_notes([zk_id]) if zk_id else Filter(must=(Match("kind", HYPE),))
    return store.count(flt)


def _project(flt: Filter) -> str | None:
    for cond in flt.must:
        if isinstance(cond, Match) and cond.key == "project" and isinstance(cond.value, str):
            return cond.value
    return None


def parent_hits(
    store: VectorStore,
    qvec: Sequence[float],
    flt: Filter,
    limit: int,
    *,
    owner: Sequence[Any],
    model: str,
    fields: Sequence[str] | None = None,
) -> list[Hit]:
    """The notes passing ``flt`` whose questions are among the ``limit`` nearest to
    ``qvec``; each scored max(its own cosine, its best question's cosine). ``owner``: the
    caller's tenancy conditions (brain/trust/tenancy.py), narrowing the questions searched; the
    notes themselves then pass the search's whole filter."""
    pre: list[Any] = [Match("kind", HYPE), *owner, Match("embed_model", model)]
    project = _project(flt)
    if project is not None:
        pre.append(Match("project", project))
    best: dict[str, float] = {}
    for h in store.query_dense(qvec, Filter(must=tuple(pre)), limit, fields=("parent_id",)):
        parent = h.payload.get("parent_id")
        if isinstance(parent, str) and parent:
            pid = point_id(parent)
            best[pid] = max(best.get(pid, -1.0), h.score)
    if not best:
        return []
    # The note itself, under every condition of the search (tenancy, scope, state, tags...).
    notes = store.query_dense(qvec, flt.and_(HasId(tuple(best))), len(best), exact=True,
                              fields=fields)
    return [Hit(h.id, max(h.score, best[h.id]), h.payload) for h in notes]


def owner_matches(note: dict[str, Any], point: dict[str, Any]) -> bool:
    """Whether a question point still carries its note's owner and scope."""
    return all(point.get(k) == note.get(k, point.get(k)) for k in _OWNER_FIELDS)


__all__ = ["HYPE", "count", "drop", "hype_payload", "hype_point_id",
           "of_notes", "owner_matches", "parent_hits"]
