"""Cluster consolidation: find near-duplicate or strongly linked notes, merge on request.

Detection reads the project's permanent notes with their stored vectors and joins two notes
when their cosine similarity is at least ``min_similarity``, or when they are linked and
at least ``min_link_similarity`` alike. Clusters are the connected components (two or more
notes). A cluster's id is a hash of its sorted member ids, so the same notes give the same
id in every dry run. Pinned and contextual notes (session summaries, open threads, project
context) are never proposed.

Detection is bounded, whatever the project's size or the thresholds: it compares the newest
``MAX_SCAN`` permanent notes (every pair: n² cosines; a larger project reports how many older
notes it left out), and a threshold so low that it joins more than ``MAX_PAIRS`` pairs is
refused with a typed error (a cluster of everything proposes nothing useful; 4,000 notes at
0.05 took 11 s and 2 GB before the cap).

Applying merges only the selected clusters: one new permanent note per cluster (hard model
synthesis, or a heuristic merge without an LLM) with a ``supersedes`` link to each original;
the originals are archived (never deleted) and ``restore_note`` brings them back. A dry run
writes nothing: no stamps, no links, no notes.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from brain.errors import InvalidArgument
from brain.llm import prompts as note_builder
from brain.memory import NOTE_FILTER, MemoryService, check_project
from brain.notes import CONTEXTUAL_KINDS
from brain.trust import tenancy
from brain.vector_store import Filter, Match, Range, scroll_all

_BLOCK = 1024
MAX_SCAN = 4_000  # the newest notes one detection compares (~0.5 s of cosines on 2 cores)
MAX_PAIRS = 100_000  # pairs over the threshold one detection joins before refusing


@dataclass(slots=True)
class Cluster:
    cluster_id: str
    members: list[dict[str, Any]]
    min_similarity: float
    max_similarity: float
    reason: str

    def proposal(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "size": len(self.members),
            "reason": self.reason,
            "min_similarity": round(self.min_similarity, 4),
            "max_similarity": round(self.max_similarity, 4),
            "members": [
                {
                    "zk_id": m["zk_id"],
                    "title": m.get("title", ""),
                    "note_kind": m.get("note_kind"),
                    "created": m.get("created"),
                }
                for m in self.members
            ],
        }


def cluster_id(zk_ids: Sequence[str]) -> str:
    digest = hashlib.sha256(",".join(sorted(zk_ids)).encode()).hexdigest()
    return f"CL-{digest[:12].upper()}"


def detect_clusters(
    memory: MemoryService,
    project: str,
    min_similarity: float = 0.9,
    min_link_similarity: float = 0.75,
    max_clusters: int = 20,
    window: dict[str, int] | None = None,
) -> list[Cluster]:
    """``window``, when given, gets ``older_not_scanned``: the project's notes older than the
    newest ``MAX_SCAN`` (never read)."""
    notes, vectors, left_out = _load(memory, project)
    if window is not None:
        window["older_not_scanned"] = left_out
    if len(notes) < 2:
        return []
    parent = list(range(len(notes)))
    pairs: list[tuple[int, float, str]] = []
    lowest = ("min_similarity", min_similarity)
    if min_link_similarity < min_similarity:
        lowest = ("min_link_similarity", min_link_similarity)
    for i, j, sim in _similar_pairs(vectors, lowest[1], lowest[0]):
        a, b = notes[i], notes[j]
        linked = b["zk_id"] in a.get("links", []) or a["zk_id"] in b.get("links", [])
        if sim >= min_similarity or (linked and sim >= min_link_similarity):
            pairs.append((i, sim, "near-duplicate" if sim >= min_similarity else "linked"))
            _union(parent, i, j)
    groups: dict[int, list[int]] = {}
    for i in range(len(notes)):
        groups.setdefault(_find(parent, i), []).append(i)
    sims: dict[int, list[float]] = {}
    why: dict[int, set[str]] = {}
    for i, sim, reason in pairs:
        root = _find(parent, i)
        sims.setdefault(root, []).append(sim)
        why.setdefault(root, set()).add(reason)
    clusters = []
    for root, members in groups.items():
        if len(members) < 2:
            continue
        ordered = sorted(
            (notes[i] for i in members), key=lambda n: (n.get("created_ts", 0.0), n["zk_id"])
        )
        reasons = why[root]
        clusters.append(
            Cluster(
                cluster_id([n["zk_id"] for n in ordered]),
                ordered,
                min(sims[root]),
                max(sims[root]),
                reasons.pop() if len(reasons) == 1 else "near-duplicate+linked",
            )
        )
    clusters.sort(key=lambda c: (-len(c.members), -c.max_similarity, c.cluster_id))
    return clusters[:max_clusters]


def consolidate(
    memory: MemoryService,
    router: Any,
    project: str,
    dry_run: bool = True,
    selected_cluster_ids: Sequence[str] | None = None,
    min_similarity: float = 0.9,
    min_link_similarity: float = 0.75,
    max_clusters: int = 20,
) -> dict[str, Any]:
    project = check_project(project)
    _check_threshold(min_similarity, "min_similarity")
    _check_threshold(min_link_similarity, "min_link_similarity")
    if not isinstance(max_clusters, int) or not 1 <= max_clusters <= 200:
        raise InvalidArgument("max_clusters must be 1..200", field="max_clusters")
    window: dict[str, int] = {}
    clusters = detect_clusters(
        memory, project, min_similarity, min_link_similarity, max_clusters=10_000,
        window=window,
    )
    proposals = [c.proposal() for c in clusters[:max_clusters]]
    if dry_run:
        out = {"dry_run": True, "project": project, "clusters": proposals,
               "count": len(proposals)}
        if window["older_not_scanned"]:
            out["older_not_scanned"] = window["older_not_scanned"]
        return out
    if not selected_cluster_ids:
        raise InvalidArgument(
            "applying needs selected_cluster_ids: run a dry run, then pass "
            "the cluster_id values to merge",
            field="selected_cluster_ids",
        )
    by_id = {c.cluster_id: c for c in clusters}
    unknown = [c for c in selected_cluster_ids if c not in by_id]
    if unknown:
        raise InvalidArgument(
            f"unknown cluster ids {unknown}: the notes changed or were already "
            "merged; run a dry run again for current ids",
            field="selected_cluster_ids",
        )
    # Every merge is computed (and size-checked) before the first write.
    merges = [
        (by_id[cid], *_merged(memory, router, by_id[cid]))
        for cid in dict.fromkeys(selected_cluster_ids)
    ]
    applied = [_apply(memory, c, merged, by, project) for c, merged, by in merges]
    return {"dry_run": False, "project": project, "applied": applied, "count": len(applied)}


# -- detection helpers ----------------------------------------------------------------------


def _load(memory: MemoryService,
          project: str) -> tuple[list[dict[str, Any]], np.ndarray, int]:
    """The candidates among the project's newest ``MAX_SCAN`` notes, payloads and unit
    vectors, and how many older notes were left out (found by counting through the indexes:
    they are never read)."""
    # The caller's notes only: a dry run shows titles, and applying archives the members.
    flt = NOTE_FILTER.and_(Match("project", project), Match("memory_type", "permanent"),
                           *tenancy.conditions(memory.identity))
    total = memory.store.count(flt)
    if total > MAX_SCAN:
        flt = flt.and_(Range("created_ts", gte=_newest_cut(memory, flt)))
    window = list(scroll_all(memory.store, flt, with_vectors=True))
    if len(window) > MAX_SCAN:  # notes written in the same instant as the cut: the newest kept
        window.sort(key=lambda pt: -float(pt.payload.get("created_ts", 0)))
        del window[MAX_SCAN:]
    left_out = max(0, total - len(window))
    kept = [pt for pt in window if pt.dense is not None and not pt.payload.get("pinned")
            and pt.payload.get("note_kind") not in CONTEXTUAL_KINDS]
    if not kept:
        return [], np.zeros((0, 0), dtype=np.float32), left_out
    mat = np.asarray([pt.dense for pt in kept], dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return [pt.payload for pt in kept], mat / np.maximum(norms, 1e-12), left_out


def _newest_cut(memory: MemoryService, flt: Filter) -> float:
    """The latest ``created_ts`` at or after which at least ``MAX_SCAN`` notes of ``flt`` were
    written (a bisection over counts: the store reads no payload)."""
    lo, hi = 0.0, memory.clock.now().timestamp() + 1.0  # count(>= lo) >= MAX_SCAN > count(>= hi)
    while hi - lo > 1e-3:
        mid = (lo + hi) / 2
        if memory.store.count(flt.and_(Range("created_ts", gte=mid))) >= MAX_SCAN:
            lo = mid
        else:
            hi = mid
    return lo


def _similar_pairs(mat: np.ndarray, threshold: float,
                   field: str = "min_similarity") -> list[tuple[int, int, float]]:
    """(i, j, cosine) with i < j and cosine >= threshold, one row block at a time; more
    than ``MAX_PAIRS`` is a typed error on ``field`` (the threshold is too low)."""
    out: list[tuple[int, int, float]] = []
    n = mat.shape[0]
    for start in range(0, n, _BLOCK):
        block = mat[start : start + _BLOCK] @ mat.T
        ids = np.arange(start, start + len(block))[:, None]
        block[np.arange(n)[None, :] <= ids] = -2.0  # each pair once: j > i
        rows, cols = np.nonzero(block >= threshold)
        if len(out) + len(rows) > MAX_PAIRS:
            raise InvalidArgument(
                f"{field} {threshold} joins more than {MAX_PAIRS:,} pairs among the {n:,} "
                f"notes compared: raise it (the default 0.9 finds near-duplicates)",
                field=field)
        out.extend(zip((rows + start).tolist(), cols.tolist(),
                       block[rows, cols].astype(float).tolist(), strict=True))
    return out


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _union(parent: list[int], i: int, j: int) -> None:
    parent[_find(parent, i)] = _find(parent, j)


def _check_threshold(value: float, name: str) -> None:
    if not isinstance(value, int | float) or not 0.0 < float(value) <= 1.0:
        raise InvalidArgument(f"{name} must be in (0, 1]", field=name)


# -- merging --------------------------------------------------------------------------------


def _merged(
    memory: MemoryService, router: Any, cluster: Cluster
) -> tuple[note_builder.MergedNote, str]:
    """The merged note and what made it (``llm:<hard model>`` or "")."""
    merged, by = None, ""
    if router is not None and getattr(router, "configured", False):
        merged = note_builder.synthesize_merge(router, cluster.members)
        by = f"llm:{router.hard_model}" if merged else ""
    merged = merged or heuristic_merge(cluster.members)
    memory.prepare_content(merged.content)  # too large: typed error before anything is written
    return merged, by


def heuristic_merge(members: list[dict[str, Any]]) -> note_builder.MergedNote:
    """Concatenated content without repeated sentences; union of keywords and tags."""
    seen: set[str] = set()
    parts: list[str] = []
    for note in members:
        kept = []
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", note.get("content", "")):
            key = " ".join(sentence.lower().split()).rstrip(".!?")
            if key and key not in seen:
                seen.add(key)
                kept.append(sentence.strip())
        if kept:
            parts.append(" ".join(kept))
    keywords = list(dict.fromkeys(k for n in members for k in n.get("keywords", [])))[:10]
    tags = [t for t, _ in Counter(t for n in members for t in n.get("tags", [])).most_common(5)]
    return note_builder.MergedNote(
        content="\n\n".join(parts),
        title=members[0].get("title", ""),
        context=f"Merged from {len(members)} overlapping notes",
        keywords=keywords,
        tags=tags,
    )


def _apply(
    memory: MemoryService,
    cluster: Cluster,
    merged: note_builder.MergedNote,
    merged_by: str,
    project: str,
) -> dict[str, Any]:
    ids = [m["zk_id"] for m in cluster.members]
    kind = Counter(m.get("note_kind", "general") for m in cluster.members).most_common(1)[0][0]
    extra: dict[str, Any] = {"merged_from": ids, "consolidated_cluster": cluster.cluster_id}
    if merged_by:
        extra["enriched_by"] = merged_by  # the enrichment job then skips construction
    # A merge that takes in a private note is private: its content would otherwise reach
    # the caller's sibling agents.
    private = any(m.get("visibility") == tenancy.PRIVATE for m in cluster.members)
    res = memory.add(
        merged.content,
        project,
        "permanent",
        kind,
        tags=merged.tags or None,
        visibility=tenancy.PRIVATE if private else tenancy.SHARED,
        links=[(z, "supersedes") for z in ids],
        autolink=False,
        extra=extra,
    )
    new_id = res.note["zk_id"]
    fields: dict[str, Any] = {"title": merged.title or res.note["title"]}
    if merged.context:
        fields["context"] = merged.context
    if merged.keywords:
        fields["keywords"] = merged.keywords
    memory.apply_fields(new_id, fields, reembed=True)
    for zk_id in ids:
        memory.archive(zk_id)
        memory.set_state(zk_id, superseded_by=new_id)
    return {
        "cluster_id": cluster.cluster_id,
        "merged_note": new_id,
        "archived": ids,
        "title": fields["title"],
    }
