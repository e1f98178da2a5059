"""The owner's status report (owner, clients, queue depths, store health), as ``brain status``
shows it: the owner builds it for its socket (mcp_surface/owner_endpoint.py), the CLI when no
server runs (brain/cli/owner.py)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from brain.process import owner as own

if TYPE_CHECKING:  # the brain these functions serve is built above them, in app.py
    from brain.app import Brain


def _queue_depths(brain: Brain) -> dict[str, Any]:
    """Depth of each background queue built so far (services expose ``queue_depth()``)."""
    out: dict[str, Any] = {}
    for name in ("workers", "sources", "files", "agentic"):
        svc = brain.__dict__.get(name)  # only services already built; never build one here
        fn = getattr(svc, "queue_depth", None)
        if callable(fn):
            try:
                out[name] = int(fn())
            except Exception as exc:  # noqa: BLE001 - status reports, never fails
                out[name] = f"error: {exc}"
    return out


def store_health(brain: Brain) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        info = brain.store.info()
        notes = brain.store.count(None)
        return {
            "ok": True,
            "backend": info.backend,
            "location": info.location,
            "points": notes,
            "extra": info.extra,
            "probe_ms": round((time.perf_counter() - t0) * 1000, 2),
            "model": brain.meta.model,
            "pending_model": brain.pending_model,
        }
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": str(exc)}


def report(brain: Brain, info: own.OwnerInfo | None, clients: list[dict[str, Any]]) -> dict[str, Any]:
    owner = (
        None
        if info is None
        else {"pid": info.pid, "address": info.address, "started": info.started, "kind": info.kind}
    )
    return {
        "data_dir": str(brain.home),
        "owner": owner,
        "clients": clients,
        "connected_clients": len(clients),
        "queues": _queue_depths(brain),
        "store": store_health(brain),
    }
