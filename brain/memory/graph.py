"""The link graph: a NetworkX DiGraph derived from the notes' ``links`` payload.

Every note's id is kept in :class:`NoteIds`; the DiGraph holds only the notes that have a link
(and the targets of links). A DiGraph node costs about 600 bytes with its adjacency dicts, an
id string in a set about 100, and a note id in :class:`NoteIds` 4 (``ZK-`` and 8 hex digits
are a 32-bit number): most notes of a large store have no link, so at 1,000,000 notes the ids
take 4 MB instead of ~100 MB of the server's memory.

The store is the single source of truth. The graph is cached as JSON (atomic temp file +
rename) stamped with the store's link sequence number; a missing, stale or corrupt cache is
rebuilt from the store.

Saving never stops the calls. Beside the DiGraph, each linked note's out-links are kept as one
immutable row (``(target, relation)`` pairs, replaced whole when they change), so a save takes
a shallow copy of the rows under the locks (0.2-0.3 ms at 7,500 linked notes) and writes it outside
them, in pieces of ``SAVE_PIECE`` rows through the C JSON encoder, so no piece holds the GIL
more than a millisecond or so. It used to walk the DiGraph's 72,000 edges under the notes'
write lock (100-145 ms) and write them through the pure-Python encoder (130-190 ms): every
2-3 s while an agent wrote notes, searches waited on the graph's lock and adds on the write
lock, and the encoder's garbage ran the full collections that made up most of search_memory's
tail on a 7,500-note brain (p99 130-160 ms against p50 12 ms, BENCHMARKS.md "Tool calls during
heavy work").
"""

from __future__ import annotations

import base64
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

log = logging.getLogger(__name__)

# 1 kept a node with title and project per note; 2 the note ids as a list of strings; 3 the
# links as one list of edges (still read); 4 the links as one row of out-links per note
CACHE_VERSION = 4
EDGE_LIST_VERSION = 3
# Rows serialized by one call of the C encoder while the cache is written (~1 ms each).
SAVE_PIECE = 500

Row = tuple[tuple[str, str], ...]  # a note's out-links: (target, relation), in link order
# The share of the process's time the saver may spend rewriting the cache: the pause between
# saves grows with the last save's duration (25-31 ms at 72,000 links). The file is a cache: a crash leaves an older one, which the
# next open sees is stale and rebuilds from the store.
SAVE_SHARE = 0.1


class NoteIds:
    """A set of note ids at 4 bytes each: the ``ZK-XXXXXXXX`` ids as a sorted array of 32-bit
    numbers, with the ids added and removed since its last merge in small sets beside it (a
    merge, O(n), runs once they hold ``MERGE_AT``); any other id is kept as a string."""

    MERGE_AT = 65_536

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._base = np.zeros(0, dtype=np.uint32)
        self._added: set[int] = set()
        self._removed: set[int] = set()
        self._other: set[str] = set()
        nums = []
        for zk in ids:
            n = _number(zk)
            if n is None:
                self._other.add(zk)
            else:
                nums.append(n)
        self._base = np.unique(np.asarray(nums, dtype=np.uint32))

    def _in_base(self, n: int) -> bool:
        i = int(np.searchsorted(self._base, n))
        return i < len(self._base) and int(self._base[i]) == n

    def __contains__(self, zk: object) -> bool:
        n = _number(zk) if isinstance(zk, str) else None
        if n is None:
            return zk in self._other
        return n in self._added or (n not in self._removed and self._in_base(n))

    def add(self, zk: str) -> None:
        n = _number(zk)
        if n is None:
            self._other.add(zk)
        elif n in self._removed:
            self._removed.discard(n)
        elif not self._in_base(n):
            self._added.add(n)
            self._merge_when_due()

    def discard(self, zk: str) -> None:
        n = _number(zk)
        if n is None:
            self._other.discard(zk)
        elif n in self._added:
            self._added.discard(n)
        elif self._in_base(n):
            self._removed.add(n)
            self._merge_when_due()

    def contains_many(self, ids: list[str]) -> list[bool]:
        """``[zk in self for zk in ids]`` in one sorted search (a rebuild checks every link's
        target: per id, ``in`` costs a NumPy call each, several seconds at 1,000,000 notes)."""
        nums = [_number(zk) for zk in ids]
        base = self._numbers()
        if not len(base):
            return [n is None and zk in self._other for zk, n in zip(ids, nums, strict=True)]
        arr = np.fromiter((0 if n is None else n for n in nums), np.uint32, len(nums))
        at = np.minimum(np.searchsorted(base, arr), len(base) - 1)
        hits = (base[at] == arr).tolist()
        return [zk in self._other if n is None else hit for zk, n, hit in zip(ids, nums, hits, strict=True)]

    def _merge_when_due(self, force: bool = False) -> None:
        pending = len(self._added) + len(self._removed)
        if not pending or (pending < self.MERGE_AT and not force):
            return
        base = self._base
        if self._removed:
            base = base[~np.isin(base, np.fromiter(self._removed, np.uint32))]
        if self._added:
            base = np.union1d(base, np.fromiter(self._added, np.uint32))
        self._base, self._added, self._removed = base, set(), set()

    def __len__(self) -> int:
        return len(self._base) - len(self._removed) + len(self._added) + len(self._other)

    def __iter__(self) -> Iterator[str]:
        for n in self._numbers().tolist():
            yield _zk(n)
        yield from self._other

    def _numbers(self) -> np.ndarray:
        self._merge_when_due(force=True)
        return self._base

    def dump(self) -> dict[str, Any]:
        """For the cache file: the numbers as base64 of little-endian uint32 (5.3 bytes a
        note in the JSON, ~5 ms at 1,000,000), the other ids as they are."""
        raw = self._numbers().astype("<u4").tobytes()
        return {"zk_u32le": base64.b64encode(raw).decode("ascii"), "other": sorted(self._other)}

    @classmethod
    def load(cls, data: dict[str, Any]) -> NoteIds:
        out = cls(str(x) for x in data["other"])
        raw = base64.b64decode(data["zk_u32le"], validate=True)
        out._base = np.unique(np.frombuffer(raw, dtype="<u4").astype(np.uint32))
        return out


def _number(zk: str) -> int | None:
    """``ZK-XXXXXXXX``'s number (ZK_ID_RE, uppercase hex); None for any other id."""
    if len(zk) == 11 and zk.startswith("ZK-"):
        digits = zk[3:]
        if digits.upper() == digits:
            try:
                return int(digits, 16)
            except ValueError:
                return None
    return None


def _zk(n: int) -> str:
    return f"ZK-{n:08X}"


def _build(edges: Iterable[tuple[str, str, str]]) -> tuple[nx.DiGraph, dict[str, Row]]:
    """The DiGraph of ``edges`` (source, target, relation) and its rows."""
    g = nx.DiGraph()
    g.add_edges_from((s, d, {"relation": r}) for s, d, r in edges)
    return g, {str(s): _row(nbrs) for s, nbrs in g.adjacency() if nbrs}


def _row(nbrs: Any) -> Row:
    """A source's row from its DiGraph adjacency (target -> edge attributes)."""
    return tuple((d, str(a.get("relation", "related"))) for d, a in nbrs.items())


def _write_json(fh: Any, data: dict[str, Any]) -> None:
    """``data`` (a :meth:`LinkGraph.dump`) as one JSON object, its rows ``SAVE_PIECE`` at a
    time through the C encoder (``json.dump`` to a file takes the pure-Python one)."""
    head = {k: v for k, v in data.items() if k != "out"}
    fh.write(json.dumps(head)[:-1] + ', "out": {')
    items = list(data["out"].items())
    for i in range(0, len(items), SAVE_PIECE):
        if i:
            fh.write(", ")
        fh.write(json.dumps(dict(items[i:i + SAVE_PIECE]))[1:-1])
    fh.write("}}")


class LinkGraph:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.g: nx.DiGraph = nx.DiGraph()  # the linked notes and link targets
        # Each source's out-links as the DiGraph holds them, one immutable row per source
        # (never changed in place: a save's shallow copy of the dict stays as it was taken).
        self._rows: dict[str, Row] = {}
        self.notes = NoteIds()  # every note's id
        self.seq = 0
        self.last_save_s = 0.0
        # Why the last :meth:`load` did not use the cache: None (used, or no file), or the
        # cache's own sequence number when it was older than the store's (a crash between a
        # link write and the cache's save: the caller warns that it rebuilt).
        self.stale_seq: int | None = None
        self._lock = threading.RLock()

    # -- building ---------------------------------------------------------------------------
    def rebuild(self, notes: Iterable[dict[str, Any]], seq: int) -> None:
        """From the notes' payloads, read once as they come (a store's notes are paged in,
        never all held)."""
        ids: list[str] = []
        edges: list[tuple[str, str, str]] = []
        for p in notes:
            ids.append(p["zk_id"])
            types = p.get("link_types") or {}
            edges.extend((p["zk_id"], dst, types.get(dst, "related"))
                         for dst in p.get("links") or ())
        known = NoteIds(ids)
        del ids
        kept = [e for e, hit in zip(edges, known.contains_many([e[1] for e in edges]),
                                        strict=True) if hit]
        del edges
        g, rows = _build(kept)
        with self._lock:
            self.g, self.notes, self._rows = g, known, rows
            self.seq = seq

    def load(self, expected_seq: int) -> bool:
        """Load the cache if it is present, well-formed and current. True when used."""
        self.stale_seq = None
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") not in (CACHE_VERSION, EDGE_LIST_VERSION):
                return False
            if data.get("seq") != expected_seq:
                seq = data.get("seq")
                self.stale_seq = seq if isinstance(seq, int) else -1
                return False
            ids = NoteIds.load(data["notes"])
            if data.get("version") == EDGE_LIST_VERSION:
                edges = [(str(s), str(d), str(r)) for s, d, r in data["edges"]]
            else:
                edges = [(str(src), str(d), str(r)) for src, row in data["out"].items()
                         for d, r in row]
            g, rows = _build(edges)
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("graph cache %s is unreadable (%s); rebuilding from the store", self.path, exc)
            return False
        with self._lock:
            self.g, self.notes, self._rows = g, ids, rows
            self.seq = expected_seq
        return True

    def save_interval(self, base_s: float = 2.0) -> float:
        """The saver's pause before its next save: ``base_s``, or longer when saves are slow."""
        return max(base_s, self.last_save_s / SAVE_SHARE)

    def save(self, data: dict[str, Any] | None = None) -> None:
        """Write the cache: ``data`` (a :meth:`dump` taken earlier), else the graph now."""
        t0 = time.monotonic()
        try:
            self._save(data if data is not None else self.dump())
        finally:
            self.last_save_s = time.monotonic() - t0

    def dump(self, seq: int | None = None) -> dict[str, Any]:
        """The cache's content now, stamped ``seq`` (default: the graph's own). Taken under
        the caller's write lock, it pairs a sequence number with exactly its links; a shallow
        copy of the rows, so the lock is held ~1 ms whatever the number of links."""
        with self._lock:
            if seq is not None:
                self.seq = seq
            return {
                "version": CACHE_VERSION,
                "seq": self.seq,
                "notes": self.notes.dump(),
                "out": dict(self._rows),
            }

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".graph-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                _write_json(fh, data)
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
            self._set_row(zk_id)

    def _set_row(self, src: str) -> None:
        """``src``'s row as the DiGraph now holds its out-links (a new tuple, never edited)."""
        row = _row(self.g[src])
        if row:
            self._rows[src] = row
        else:
            self._rows.pop(src, None)

    def remove_node(self, zk_id: str) -> None:
        with self._lock:
            self.notes.discard(zk_id)
            if zk_id in self.g:
                sources = list(self.g.predecessors(zk_id))
                self.g.remove_node(zk_id)
                self._rows.pop(zk_id, None)
                for src in sources:
                    self._set_row(src)

    def __contains__(self, zk_id: object) -> bool:
        with self._lock:
            return zk_id in self.notes or zk_id in self.g

    def node_ids(self) -> set[str]:
        """The notes and link targets the graph knows."""
        with self._lock:
            return set(self.notes) | set(self.g.nodes)

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

    def missing_links(self, notes: Iterable[dict[str, Any]]) -> tuple[int, int]:
        """Counts ``notes`` (payloads read from the store) with links against the graph's edges:
        (notes with links, of them those whose link to a note the graph knows is not an
        edge). A rebuild from the store makes every such link an edge (a link to an id that
        is no note is dropped), so after one the second number is 0."""
        linked = missing = 0
        with self._lock:
            for p in notes:
                src, links = p.get("zk_id"), p.get("links") or ()
                if not links or not isinstance(src, str):
                    continue
                linked += 1
                if any(isinstance(d, str) and d in self.notes and not self.g.has_edge(src, d)
                       for d in links):
                    missing += 1
        return linked, missing

    def stats(self) -> dict[str, int]:
        with self._lock:
            targets = sum(1 for n in self.g if n not in self.notes)
            return {"nodes": len(self.notes) + targets, "edges": self.g.number_of_edges()}

    def edges(self) -> list[tuple[str, str, str]]:
        with self._lock:
            return sorted((s, d, a.get("relation", "related")) for s, d, a in self.g.edges(data=True))
