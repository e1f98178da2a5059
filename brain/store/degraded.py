"""Opening a Qdrant server's store, or, when the server does not answer, the embedded stand-in.

At start the brain opens the configured server's collection and replays into it what a
degraded run journaled meanwhile; when the server does not answer, it serves from an Edge
shard in the data dir that journals every write for the server (brain/vector_store/journal.py)
and keeps its own graph cache. Either way a :class:`Probe` watches the server from then on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from brain.errors import StoreError
from brain.store import integrity
from brain.store.meta import META_ID
from brain.vector_store import VectorStore, build_store, server_checks
from brain.vector_store.journal import JOURNAL, JournaledStore, Probe, WriteJournal, replay
from config import QdrantSettings

log = logging.getLogger("brain.degraded")

STANDIN_GRAPH = "graph.degraded.json"  # the stand-in's graph cache, beside the server's


@dataclass(frozen=True, slots=True)
class Served:
    """What serves the brain: the store, the probe of its server (None for local mode), and
    the graph cache of the stand-in (None: the configured one)."""

    store: VectorStore
    probe: Probe | None
    graph_file: Path | None = None


def open_server_or_standin(
    home: Path, qdrant: QdrantSettings, server: VectorStore, dimension: int, now: str,
    collection: Callable[[], str],
) -> Served:
    """The Qdrant server's collection, with what a degraded run journaled replayed into it;
    or, when the server does not answer, the embedded stand-in that journals every write.
    ``now``: when the server was last checked (this start); ``collection``: the collection
    served at any time, for the optimizer watch."""
    journal = WriteJournal(home / JOURNAL)
    try:
        integrity.open_store(home, server, dimension)
    except StoreError as exc:
        if not qdrant.url:
            raise  # local mode has no server to wait for
        log.warning("Qdrant server %s is unreachable at start (%s): serving from the "
                    "embedded stand-in; writes are journaled for the server", qdrant.url,
                    exc.message[:200])
        standin = build_store(home=home, collection=f"degraded_{qdrant.collection}")
        integrity.open_store(home, standin, dimension)
        probe = Probe(qdrant.url, getattr(server, "ping", server.flush), degraded=True)
        probe.reachable, probe.last_checked_at = False, now
        return Served(JournaledStore(standin, journal, skip_ids={META_ID}), probe,
                      home / STANDIN_GRAPH)
    if journal.path.exists():
        replayed = replay(journal, server)
        log.info("replayed %d journaled writes into %s", replayed, qdrant.url)
    if not qdrant.url:
        return Served(server, None)
    probe = Probe(qdrant.url, getattr(server, "ping", server.flush))
    probe.reachable, probe.last_checked_at = True, now
    probe.server, probe.watch = server_checks.at_start(qdrant, collection)
    return Served(server, probe)


__all__ = ["STANDIN_GRAPH", "Served", "open_server_or_standin"]
