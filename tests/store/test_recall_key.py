"""The recall key (brain/store/recall_key.py) selects exactly what the conditions it replaces did.

A stale key is a tenancy leak or a lost note, so each test compares the keyed filter with the
full one (the same RecallFilter, the store's key record taken away) on a real Edge store:
over every combination of the fields a key is computed from, after each state change a note
goes through, across a resumable backfill, and against a key a caller tries to set itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from brain.app import Brain
from brain.memory.filters import RecallFilter, build_filter
from brain.notes import point_id
from brain.store import recall_key
from brain.trust.identity import Identity, acting_as
from brain.vector_store import Filter, Point, scroll_all
from brain.vector_store.base import EmbeddedShard
from brain.vector_store.forwarding import backend_of

A1, A2, B1 = Identity("alice", "a1"), Identity("alice", "a2"), Identity("bob", "b1")


@contextmanager
def unkeyed(brain: Brain) -> Iterator[None]:
    """The store as one from before keys: searches ask the conditions one by one."""
    mark = brain.meta.data.pop(recall_key.MARK)
    try:
        yield
    finally:
        brain.meta.data[recall_key.MARK] = mark


def selected(brain: Brain, flt: Filter) -> set[str]:
    return {p.id for p in scroll_all(brain.store, flt)}


def both(brain: Brain, ident: Identity, rf: RecallFilter) -> tuple[set[str], set[str]]:
    """(what the keyed filter selects, what the full filter selects) for ``ident``."""
    with acting_as(ident):
        keyed = build_filter(brain.memory, rf)
        with unkeyed(brain):
            full = build_filter(brain.memory, rf)
    assert any(getattr(c, "key", None) == recall_key.FIELD for c in keyed.must)
    assert not any(getattr(c, "key", None) == recall_key.FIELD for c in full.must)
    return selected(brain, keyed), selected(brain, full)


def found(brain: Brain, ident: Identity, zk_id: str, **rf: Any) -> bool:
    """Whether a search of ``ident`` may return the note, asserting both filters agree."""
    keyed, full = both(brain, ident, RecallFilter(all_projects=True, **rf))
    assert keyed == full
    return point_id(zk_id) in keyed


def found_unkeyed(brain: Brain, ident: Identity, zk_id: str) -> bool:
    """Whether the filter a store without its keys gets selects the note."""
    with acting_as(ident):
        flt = build_filter(brain.memory, RecallFilter(all_projects=True))
    assert not any(getattr(c, "key", None) == recall_key.FIELD for c in flt.must)
    return point_id(zk_id) in selected(brain, flt)


GRID = {
    "kind": ["note", "hype", ["note"]],
    "forgotten": [False, True, None],
    "user_id": ["alice", "bob", None],
    "agent_id": ["a1", "a2", ["a1", "a2"]],
    "visibility": ["shared", "private", None],
    "memory_type": ["permanent", "fleeting", "archived"],
    "note_kind": ["general", "project_context", ["general", "session_summary"]],
    "embed_model": ["offline/hash-384", "other/model"],
}


def test_keyed_filter_selects_what_the_conditions_did(brain: Brain) -> None:
    """Every combination of the key's inputs (lists included: a keyword match on a list
    matches any item) against every caller and request shape: the same points, on Edge."""
    points = []
    for i, values in enumerate(itertools.product(*GRID.values())):
        payload = {k: v for k, v in zip(GRID, values, strict=True) if v is not None}
        points.append(Point(f"00000000-0000-4000-8000-{i:012d}",
                            {**payload, "zk_id": f"ZK-{i:08X}", "project": "p"}))
    for i in range(0, len(points), 512):
        brain.store.upsert(points[i : i + 512])
    shapes = [
        {"include_fleeting": f, "include_contextual": c, "include_siblings": s, "note_kinds": k}
        for f, c, s, k in itertools.product((False, True), (False, True), (False, True),
                                            ((), ("project_context",), ("general",)))]
    seen = 0
    for ident, shape in itertools.product((A1, A2, B1), shapes):
        keyed, full = both(brain, ident, RecallFilter(all_projects=True, **shape))
        assert keyed == full, (ident, shape)
        seen += len(keyed)
    assert seen > 0


def test_each_state_change_moves_the_key(brain: Brain) -> None:
    """A note is found, or not, exactly as with the full filter after every change of state:
    forget, restore, archive, restore, distill, a changed visibility or model."""
    m = brain.memory
    with acting_as(A1):
        shared = m.add("redis eviction is allkeys-lru", "shop").note["zk_id"]
        private = m.add("my private redis notes", "shop", visibility="private").note["zk_id"]
        idea = m.add("maybe volatile-ttl", "shop", memory_type="fleeting").note["zk_id"]
    assert found(brain, A1, shared) and found(brain, A2, shared)
    assert not found(brain, B1, shared)
    assert found(brain, A1, private) and not found(brain, A2, private)
    assert found(brain, A2, private, include_siblings=True)
    assert not found(brain, A1, idea) and found(brain, A1, idea, include_fleeting=True)
    with acting_as(A1):
        m.forget(shared)
        assert not found(brain, A1, shared) and not found(brain, A2, shared)
        m.restore(shared)
        assert found(brain, A2, shared)
        m.archive(shared)
        assert not found(brain, A1, shared)
        m.restore(shared)
        assert found(brain, A1, shared)
        m.distill(idea)
        assert found(brain, A1, idea) and found(brain, A2, idea)
        m.set_state(shared, visibility="private")
        assert found(brain, A1, shared) and not found(brain, A2, shared)
        m.set_state(private, note_kind="project_context")
        assert not found(brain, A1, private) and found(brain, A1, private,
                                                        include_contextual=True)
        m.set_state(shared, embed_model="other/model")
        assert not found(brain, A1, shared)
        m.update(shared, "redis eviction is volatile-lru now")  # embedded again
        assert found(brain, A1, shared) and not found(brain, A2, shared)


def test_a_caller_cannot_set_a_key(brain: Brain) -> None:
    """A key written by hand (an import's payload, a field update) is replaced by the one
    the note's own fields give: bob never sees alice's note through a forged key."""
    forged = recall_key.encode("bob", "shared", "offline/hash-384", "permanent", "std")
    with acting_as(A1):
        zk = brain.memory.add("alice's own", "shop", visibility="private",
                              extra={recall_key.FIELD: [forged]}).note["zk_id"]
        assert not found(brain, B1, zk) and not found(brain, A2, zk)
        brain.store.set_payload([point_id(zk)], {recall_key.FIELD: [forged]})
        brain.store.set_payload([point_id(zk)], {"tags": ["x"], recall_key.FIELD: [forged]})
        assert not found(brain, B1, zk) and found(brain, A1, zk)
    stored = brain.store.retrieve([point_id(zk)])[0].payload[recall_key.FIELD]
    assert forged not in stored


def test_backfill_resumes_and_the_full_filter_serves_until_it_is_done(brain: Brain) -> None:
    """A store from before keys: searches find its notes with the full filter, the backfill
    keys them a page at a time from its recorded cursor, and a note forgotten between two
    pages is never found again."""
    m = brain.memory
    with acting_as(A1):
        zks = [m.add(f"note {i} about caching", "shop").note["zk_id"] for i in range(7)]
    ids = [point_id(z) for z in zks]
    brain.store.inner.set_payload(ids, {recall_key.FIELD: []})  # as an older brain wrote them
    brain.meta.set(**{recall_key.MARK: None})
    assert not recall_key.complete(brain.meta.data)
    with acting_as(A1):
        hits = m.search("note about caching", 10, RecallFilter(project="shop"), stamp=False)
    assert hits and {h["zk_id"] for h in hits} <= set(zks)  # the full filter serves
    for z in zks:
        assert found_unkeyed(brain, A1, z)

    first = recall_key.backfill(brain._guarded, brain.meta, page=3, max_pages=1)
    assert first == {"done": False, "scanned": 3, "written": 3}
    assert brain.meta.data[recall_key.CURSOR][1]
    with acting_as(A1):
        m.forget(zks[6])  # between pages: the forget writes its own (empty) key
    rest = recall_key.backfill(brain._guarded, brain.meta, page=3)
    assert rest["done"] and rest["scanned"] == 4
    assert recall_key.complete(brain.meta.data) and brain.meta.data[recall_key.CURSOR] is None
    with acting_as(A1):
        hits = m.search("note about caching", 10, RecallFilter(project="shop"), stamp=False)
    assert hits and {h["zk_id"] for h in hits} <= set(zks[:6])
    for z in zks:
        assert found(brain, A1, z) == (z != zks[6])
    brain.meta.data["generation"] = 2  # a model switch serves another generation:
    assert not recall_key.complete(brain.meta.data)  # its notes are checked again first


def test_an_index_run_keys_a_large_store_in_the_copy_it_optimizes(brain: Brain) -> None:
    """An embedded store too large to key at open is keyed by the optimizer child in the
    copy it optimizes (a payload written in the live store would move the note out of its
    HNSW index): the keys arrive with the swap, then searches use them."""
    m = brain.memory
    with acting_as(A1):
        zks = [m.add(f"note {i} about queues", "shop", visibility=v).note["zk_id"]
               for i, v in enumerate(("shared", "private", "shared"))]
    brain.store.inner.set_payload([point_id(z) for z in zks], {recall_key.FIELD: []})
    brain.meta.set(**{recall_key.MARK: None})
    edge = backend_of(brain.store)
    assert isinstance(edge, EmbeddedShard)
    recall_key.at_open(brain._guarded, brain.meta, lambda name, fn: fn(), brain._stop,
                       reindex=lambda: brain._reindex_rewriting(edge, recall_key.REWRITE),
                       inline_max=0)
    assert recall_key.REWRITE in edge.rewrites_done and edge.payload_rewrite is None
    assert recall_key.complete(brain.meta.data)
    for p in brain.store.retrieve([point_id(z) for z in zks]):
        assert p.payload[recall_key.FIELD] == recall_key.keys(p.payload) != []
    assert [found(brain, A2, z) for z in zks] == [True, False, True]


def test_health_finds_a_key_an_older_writer_left_stale_and_repair_rewrites_it(
    brain: Brain,
) -> None:
    """An older version forgets a note without knowing the key (its write goes to the store
    underneath the wrapper): a search that trusts the key still shows the note. The integrity
    scan reports it, and repair writes the key its payload gives, after which the search is
    right again; a store still being keyed reports nothing (its missing keys are expected)."""
    m = brain.memory
    with acting_as(A1):
        kept = m.add("the deploy runbook lives in ops/deploy.md", "shop").note["zk_id"]
        gone = m.add("the deploy password rotates every month", "shop").note["zk_id"]
    assert recall_key.complete(brain.meta.data)
    brain.store.inner.set_payload([point_id(gone)], {"forgotten": True})  # the older write

    def found() -> set[str]:
        with acting_as(A1):
            hits = m.search("deploy", 10, RecallFilter(project="shop"), stamp=False)
        return {h["zk_id"] for h in hits}

    assert gone in found()  # the hazard the check exists for
    f = brain.health.scan(everyone=True)["findings"]["stale_recall_keys"]
    assert f["count"] == 1 and f["sample"] == [gone]
    with unkeyed(brain):  # a store being keyed: no finding, the full filter serves
        assert brain.health.scan(everyone=True)["findings"]["stale_recall_keys"]["count"] == 0
    assert brain.health.repair(dry_run=True, everyone=True)["stale_recall_keys"] == 1
    assert gone in found()  # a dry run writes nothing
    done = brain.health.repair(dry_run=False, everyone=True)
    assert done["stale_recall_keys"] == 1
    assert brain.health.scan(everyone=True)["findings"]["stale_recall_keys"]["count"] == 0
    assert found() == {kept}
