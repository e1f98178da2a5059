"""The speed bench's synthetic engineering notes and queries (deterministic, prefix-stable:
the first k of ``synthetic_notes(n)`` are ``synthetic_notes(k)``, which the vector cache
relies on)."""

from __future__ import annotations

import random

_SUBJECTS = (
    "parser",
    "scheduler",
    "cache layer",
    "auth service",
    "billing job",
    "importer",
    "websocket client",
    "migration script",
    "search index",
    "test runner",
    "CLI",
    "config loader",
    "retry loop",
    "upload handler",
    "rate limiter",
    "report builder",
    "docker image",
    "CI pipeline",
    "ORM model",
    "queue worker",
    "payment webhook",
    "email sender",
    "session store",
    "feature flag",
    "logger",
    "metrics exporter",
    "frontend build",
    "GraphQL resolver",
    "cron task",
)
_VERBS = (
    "fails on",
    "times out with",
    "leaks memory under",
    "crashes when given",
    "slows down on",
    "rejects",
    "silently ignores",
    "double-counts",
    "mis-parses",
    "deadlocks on",
    "retries forever on",
    "returns stale data for",
    "corrupts",
    "truncates",
    "mishandles",
    "needs a guard for",
    "must validate",
    "now supports",
    "caches",
    "handles",
)
_OBJECTS = (
    "empty input",
    "unicode file names",
    "large payloads",
    "concurrent writes",
    "expired tokens",
    "missing headers",
    "nested JSON",
    "null dates",
    "negative amounts",
    "duplicate keys",
    "slow disks",
    "IPv6 addresses",
    "leap years",
    "daylight saving changes",
    "huge CSV files",
    "binary blobs",
    "long URLs",
    "deleted users",
    "stale locks",
    "partial reads",
    "gzip bodies",
    "invalid UTF-8",
    "zero-length arrays",
)
_FIXES = (
    "so we pinned the version",
    "so we added a timeout",
    "so we switched to streaming",
    "so we added an index",
    "so we wrapped it in a transaction",
    "so we added a retry with backoff",
    "so we validate at the boundary",
    "so we split the batch",
    "so we moved it to a worker",
    "so we cache the result",
    "so we added a regression test",
    "so we log and skip it",
    "so we normalise first",
    "so we use a lock",
    "so we raised the limit",
)


def synthetic_notes(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct, realistic-length engineering notes (deterministic)."""
    rng = random.Random(seed)
    return [
        f"The {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} in module "
        f"m{rng.randrange(500)}, {rng.choice(_FIXES)} (ticket {i})."
        for i in range(n)
    ]


def synthetic_queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        f"why does the {rng.choice(_SUBJECTS)} break with {rng.choice(_OBJECTS)}" for _ in range(n)
    ]
