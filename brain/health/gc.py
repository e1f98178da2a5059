"""Garbage collection: delete the orphan points an integrity scan found, nothing else.

A dry run lists every id it would delete. A real run given that list (``expect``) deletes
exactly the ids that are on it *and* still orphans: it never deletes an id its dry run did
not list, and an id that stopped being an orphan in between (its source came back) stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from brain.errors import InvalidArgument
from brain.health.scan import ORPHANS, ScanResult
from brain.vector_store import VectorStore

MAX_EXPECT = 100_000
BATCH = 512


def plan(result: ScanResult) -> dict[str, list[str]]:
    """Orphan point ids by finding, sorted."""
    return {k: sorted(result.findings[k].ids) for k in ORPHANS}


def collect(
    store: VectorStore, result: ScanResult, *, dry_run: bool,
    expect: Sequence[str] | None = None,
) -> dict[str, Any]:
    if expect is not None and len(expect) > MAX_EXPECT:
        raise InvalidArgument(f"expect lists {len(expect)} ids; at most {MAX_EXPECT} per run "
                              "(run gc again for the rest)", field="expect")
    by_kind = plan(result)
    wanted = set(expect) if expect is not None else None
    if wanted is not None:
        by_kind = {k: [i for i in ids if i in wanted] for k, ids in by_kind.items()}
    ids = sorted({i for part in by_kind.values() for i in part})
    if not dry_run:
        for i in range(0, len(ids), BATCH):
            store.delete(ids[i : i + BATCH])
    return {
        "dry_run": dry_run,
        "ids": ids,
        "count": len(ids),
        "by_kind": {k: len(v) for k, v in by_kind.items()},
        "deleted": 0 if dry_run else len(ids),
        "skipped_not_orphan": (len(wanted - set(ids)) if wanted is not None else 0),
    }
