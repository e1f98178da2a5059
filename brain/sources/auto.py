"""The platform-wide auto-sync mode (``[sync] auto``): which sources background work syncs.

- ``on`` (the default): every ``auto`` source is watched and every ``interval`` source runs
  on its timer.
- ``off``: no background sync at all (no watcher, no timer, no catch-up at start).
- ``packages-only``: only *pinned* sources keep syncing in the background. A source is pinned
  when its ``pinned`` field says so; left unset (None) it is pinned exactly when it holds
  package content: a file of a contribution category (skills, rules, instructions, agents,
  commands, identity files) or a package manifest that declares a recognized package shape
  (brain/sources/categories.py).

Manual work runs in every mode: sync_source (full or targeted), rescan, reembed, the first
sync of a new source and the inline indexing of an fs_write. A source's trigger still says
*how* it syncs; the mode says *whether* background work may sync it now.
"""

from __future__ import annotations

from brain.errors import InvalidArgument
from brain.sources.registry import SourceRecord
from brain.vector_store import Filter, Match, MatchAny, VectorStore

AUTO_MODES = ("on", "off", "packages-only")
PACKAGE_CATEGORIES = ("skills", "rules", "instructions", "agents", "commands", "contribution")


def check_mode(mode: str) -> str:
    if mode not in AUTO_MODES:
        raise InvalidArgument(f"sync auto mode must be one of {list(AUTO_MODES)}, not {mode!r}; "
                              "set [sync] auto (BRAIN__SYNC__AUTO).", field="auto")
    return mode


def holds_packages(store: VectorStore, source_id: str) -> bool:
    """Whether the indexed files of ``source_id`` include package content."""
    mine = Match("source_id", source_id)
    contrib = Filter(must=(mine, Match("kind", "file"), MatchAny("category", PACKAGE_CATEGORIES)))
    if store.count(contrib):
        return True
    return bool(store.count(Filter(must=(mine, Match("kind", "file"),
                                         Match("manifest_usable", True)))))


def pinned(store: VectorStore, rec: SourceRecord) -> bool:
    """The source's own setting, else whether it holds package content."""
    return rec.pinned if rec.pinned is not None else holds_packages(store, rec.id)


def background_ok(mode: str, store: VectorStore, rec: SourceRecord) -> bool:
    """Whether background work (watcher, timer, catch-up at start) may sync ``rec`` now."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    return pinned(store, rec)
