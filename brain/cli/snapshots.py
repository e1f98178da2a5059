"""``brain snapshot`` / ``snapshots`` / ``restore NAME`` / ``accept-loss``: store recovery.

``restore`` and ``accept-loss`` work on a store that refuses to start (they never open the
Brain, which would refuse it), holding the data dir so no server can serve it meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from brain.cli.common import needs_the_store, print_json, run
from brain.cli.ops import op


def _settings() -> Any:
    from config import load_settings

    try:
        return load_settings()
    except ValueError as exc:
        print(f"brain: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _store_dir(settings: Any) -> Path:
    """Where the embedded store lives (the path ``brain.vector_store.build_store`` uses)."""
    return Path(settings.home) / "store" / f"{settings.qdrant.collection}_g1"


@op("snapshot")
def snapshot_work(b: Any, a: dict[str, Any]) -> Any:
    return b.snapshots.take()


def _snapshot(args: argparse.Namespace) -> int:  # noqa: ARG001
    print_json(run("snapshot"))
    return 0


def _list(args: argparse.Namespace) -> int:  # noqa: ARG001
    from brain.store.snapshots import list_snapshots

    snaps = list_snapshots(_settings().home)
    print_json([{k: s.get(k) for k in ("name", "created", "points", "notes", "model")}
                for s in snaps])
    return 0


def _restore(args: argparse.Namespace) -> int:
    from brain.embedding.registry import resolve_record
    from brain.process.owner import exclusive
    from brain.store import snapshots

    s = _settings()
    needs_the_store(s.home, "`brain restore`", "it replaces the store under the server: stop "
                    "the server (close the agents using this brain), then run it again")
    dimension = s.embedding.dimension or 0
    with contextlib.suppress(Exception):  # the snapshot's own config names it anyway
        dimension = resolve_record(s.embedding.model, s.embedding.dimension,
                                   provider=s.embedding.provider).dimension
    with exclusive(s.home, "cli"):
        # Verified before anything moves: a damaged snapshot is refused (StoreDamaged, exit 1)
        # and the current store stays as it was.
        print_json(snapshots.restore(s.home, _store_dir(s), args.name, s.storage.min_free_mb,
                                     s.graph_path, dimension))
    return 0


def _accept_loss(args: argparse.Namespace) -> int:  # noqa: ARG001
    """Record what the store holds now as its new baseline (and drop the graph cache)."""
    from brain.embedding.registry import resolve_record
    from brain.process.owner import exclusive
    from brain.store.integrity import Manifest, store_location
    from brain.vector_store import build_store

    s = _settings()
    needs_the_store(s.home, "`brain accept-loss`", "it rewrites the store's baseline, which a "
                    "running server has already checked: stop the server, then run it again")
    with exclusive(s.home, "cli"):
        store = build_store(home=Path(s.home), collection=f"{s.qdrant.collection}_g1",
                            url=s.qdrant.url, api_key=s.qdrant.api_key,
                            prefer_grpc=s.qdrant.prefer_grpc, local_path=s.qdrant.local_path)
        store.open(resolve_record(s.embedding.model, s.embedding.dimension,
                                  provider=s.embedding.provider).dimension)
        try:
            points = store.count(None)
            Manifest(Path(s.home), store_location(store, Path(s.home))).save(points)
        finally:
            store.close()
        s.graph_path.unlink(missing_ok=True)  # rebuilt from what is left
    print_json({"accepted": True, "points": points})
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("snapshot", help="snapshot the store now (through the running server "
                                        "when there is one)")
    p.set_defaults(func=_snapshot)
    p = sub.add_parser("snapshots", help="list the store snapshots, oldest first")
    p.set_defaults(func=_list)
    p = sub.add_parser("restore", help="put a snapshot back as the store (server stopped)")
    p.add_argument("name", help="snapshot name, from `brain snapshots`")
    p.set_defaults(func=_restore)
    p = sub.add_parser("accept-loss",
                       help="serve a damaged store as it is now (records a new baseline)")
    p.set_defaults(func=_accept_loss)
