"""Duplicates report: near-identical notes and chunks. It reads only and removes nothing.

Each examined point asks the store for its nearest neighbours of the same kind within the
same scope; pairs at or above the similarity threshold are joined into groups (union-find).
Notes are merged with ``consolidate_clusters``; duplicated source chunks usually mean the
same file is indexed twice (two sources over one folder).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from brain.vector_store import Filter, HasId, Match, VectorStore, scroll_all

KINDS = ("note", "chunk", "doc_chunk")
NEIGHBOURS = 5
MAX_GROUPS = 100


def _shown(pid: str, payload: dict[str, Any]) -> str:
    zk = payload.get("zk_id")
    return zk if isinstance(zk, str) and zk else pid


def duplicates(
    store: VectorStore,
    scope: tuple[Any, ...],
    *,
    threshold: float,
    max_points: int,
    kinds: tuple[str, ...] = KINDS,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    parent: dict[str, str] = {}
    shown: dict[str, str] = {}
    kind_of: dict[str, str] = {}
    project_of: dict[str, str] = {}
    best: dict[str, float] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    examined = 0
    capped = False
    for kind in kinds:
        same = Filter(must=(*scope, Match("kind", kind)))
        for p in scroll_all(store, same, page=256, with_vectors=True):
            if examined >= max_points:
                capped = True
                break
            examined += 1
            if progress is not None:
                progress(1)
            if p.dense is None:
                continue
            hits = store.query_dense(p.dense, same.but_not(HasId((p.id,))), NEIGHBOURS,
                                     fields=("zk_id", "project"))
            for h in hits:
                if h.score < threshold:
                    break
                for pid, pl in ((p.id, p.payload), (h.id, h.payload)):
                    shown.setdefault(pid, _shown(pid, pl))
                    kind_of[pid] = kind
                    project_of.setdefault(pid, str(pl.get("project", "")))
                a, b = find(p.id), find(h.id)
                if a != b:
                    parent[a] = b
                root = find(p.id)
                best[root] = max(best.get(root, 0.0), float(h.score))
    groups: dict[str, list[str]] = {}
    for pid in shown:
        groups.setdefault(find(pid), []).append(pid)
    out: list[dict[str, Any]] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        kind = kind_of[members[0]]
        projects = sorted({project_of[m] for m in members})
        out.append({
            "kind": kind,
            "ids": sorted(shown[m] for m in members),
            "projects": projects,
            "similarity": round(max(best.get(find(m), 0.0) for m in members), 4),
            "hint": (f"merge with consolidate_clusters(project={projects[0]!r}, dry_run=true)"
                     if kind == "note" else
                     "the same text is indexed twice: check for overlapping sources"),
        })
    out.sort(key=lambda g: (-len(g["ids"]), g["kind"], g["ids"]))
    return {
        "groups": out[:MAX_GROUPS],
        "count": len(out),
        "threshold": threshold,
        "examined": examined,
        "capped": capped,
        "removes_nothing": True,
        "elapsed_s": round(time.perf_counter() - t0, 3),
    }
