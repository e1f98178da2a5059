"""The link graph: a NetworkX DiGraph derived from the notes' ``links`` payload.

Every note's id is kept in a set; the DiGraph holds only the notes that have a link (and the
targets of links). A DiGraph node costs about 600 bytes with its adjacency dicts, an id in the
set about 100: most notes of a large store have no link, so at 1,000,000 notes this is the
difference between ~600 MB and ~100 MB of the server's memory.

The store is the single source of truth. The graph is cached as JSON (atomic temp file +
rename) stamped with the store's link sequence number; a missing, stale or corrupt cache is
rebuilt from the store.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import networkx as nx

log = logging.getLogger(__name__)

CACHE_VERSION = 2  # 1 kept a node with title and project per note
# The share of the process's time the saver may spend rewriting the cache: the whole file is
# written under the GIL (about 0.5-1 s at 100,000 notes), so the pause between saves grows
# with the last save's duration. The file is a cache: a crash leaves an older one, which the
# next open sees is stale and rebuilds from the store.
SAVE_SHARE = 0.1


class LinkGraph:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.g: nx.DiGraph = nx.DiGraph()  # the linked notes and link targets
        self.notes: set[str] = set()  # every note's id
        self.seq = 0
        self.last_save_s = 0.0
        self._lock = threading.RLock()

    # -- building ---------------------------------------------------------------------------
    def rebuild(self, notes: Iterable[dict[str, Any]], seq: int) -> None:
        notes = list(notes)
        ids = {p["zk_id"] for p in notes}
        g = nx.DiGraph()
        for p in notes:
            for dst in p.get("links", []):
                if dst in ids:
                    g.add_edge(p["zk_id"], dst, relation=p.get("link_types", {}).get(dst, "related"))
        with self._lock:
            self.g, self.notes = g, ids
            self.seq = seq

    def load(self, expected_seq: int) -> bool:
        """Load the cache if it is present, well-formed and current. True when used."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") != CACHE_VERSION or data.get("seq") != expected_seq:
                return False
            ids = {str(n) for n in data["notes"]}
            g = nx.DiGraph()
            for src, dst, rel in data["edges"]:
                g.add_edge(src, dst, relation=rel)
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("graph cache %s is unreadable (%s); rebuilding from the store", self.path, exc)
            return False
        with self._lock:
            self.g, self.notes = g, ids
            self.seq = expected_seq
        return True

    def save_interval(self, base_s: float = 2.0) -> float:
        """The saver's pause before its next save: ``base_s``, or longer when saves are slow."""
        return max(base_s, self.last_save_s / SAVE_SHARE)

    def save(self) -> None:
        t0 = time.monotonic()
        try:
            self._save()
        finally:
            self.last_save_s = time.monotonic() - t0

    def _save(self) -> None:
        with self._lock:
            data = {
                "version": CACHE_VERSION,
                "seq": self.seq,
                "notes": list(self.notes),
                "edges": [[s, d, a.get("relation", "related")] for s, d, a in self.g.edges(data=True)],
            }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".graph-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # -- mutation (batched per job by the caller, then one save) ---------------------------
    def upsert_node(self, zk_id: str) -> None:
        with self._lock:
            self.notes.add(zk_id)

    def set_links(self, zk_id: str, links: list[str], link_types: dict[str, str]) -> None:
        """Make the out-edges of ``zk_id`` exactly ``links``."""
        with self._lock:
            self.notes.add(zk_id)
            if zk_id not in self.g:
                if not links:
                    return
                self.g.add_node(zk_id)
            for dst in list(self.g.successors(zk_id)):
                if dst not in links:
                    self.g.remove_edge(zk_id, dst)
            for dst in links:
                if dst not in self.g:
                    self.g.add_node(dst)
                self.g.add_edge(zk_id, dst, relation=link_types.get(dst, "related"))

    def remove_node(self, zk_id: str) -> None:
        with self._lock:
            self.notes.discard(zk_id)
            if zk_id in self.g:
                self.g.remove_node(zk_id)

    def __contains__(self, zk_id: object) -> bool:
        with self._lock:
            return zk_id in self.notes or zk_id in self.g

    def node_ids(self) -> set[str]:
        """The notes and link targets the graph knows."""
        with self._lock:
            return self.notes | set(self.g.nodes)

    def isolated_target(self, zk_id: str) -> bool:
        """A link target that is no note and has no link left."""
        with self._lock:
            return (zk_id not in self.notes and zk_id in self.g
                    and not self.g.in_degree(zk_id) and not self.g.out_degree(zk_id))

    # -- queries ----------------------------------------------------------------------------
    def neighbours(self, zk_id: str) -> list[tuple[str, str, str]]:
        """(neighbour, relation, direction) over out- and in-edges."""
        with self._lock:
            if zk_id not in self.g:
                return []
            out = [(d, a.get("relation", "related"), "out") for d, a in self.g[zk_id].items()]
            seen = {d for d, _, _ in out}
            for s in self.g.predecessors(zk_id):
                if s not in seen:
                    out.append((s, self.g[s][zk_id].get("relation", "related"), "in"))
            return out

    def within(self, zk_id: str, depth: int) -> dict[str, tuple[int, str, str]]:
        """Notes reachable in <= depth hops (either direction): id -> (hops, via, relation)."""
        found: dict[str, tuple[int, str, str]] = {}
        frontier = [zk_id]
        for hop in range(1, depth + 1):
            nxt = []
            for node in frontier:
                for nb, rel, _ in self.neighbours(node):
                    if nb != zk_id and nb not in found:
                        found[nb] = (hop, node, rel)
                        nxt.append(nb)
            frontier = nxt
        return found

    def hubs(self) -> list[tuple[str, int]]:
        """Every linked node with its degree (in + out), most linked first: the project map
        of the explorer walks this until it has enough notes the caller may see."""
        with self._lock:
            degrees = [(str(n), int(d)) for n, d in self.g.degree()]
        degrees.sort(key=lambda nd: (-nd[1], nd[0]))
        return degrees

    def edges_among(self, ids: set[str]) -> list[tuple[str, str, str]]:
        """The links whose two ends are both in ``ids``."""
        with self._lock:
            return [(s, d, a.get("relation", "related")) for s in ids if s in self.g
                    for d, a in self.g[s].items() if d in ids]

    def stats(self) -> dict[str, int]:
        with self._lock:
            targets = sum(1 for n in self.g if n not in self.notes)
            return {"nodes": len(self.notes) + targets, "edges": self.g.number_of_edges()}

    def edges(self) -> list[tuple[str, str, str]]:
        with self._lock:
            return sorted((s, d, a.get("relation", "related")) for s, d, a in self.g.edges(data=True))
