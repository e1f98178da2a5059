"""``brain`` maintenance commands: stats, health, migrate, export, import, maintenance,
restore-backup.

Each prints JSON to stdout and progress bars to stderr; ``health`` and ``maintenance`` exit
with 1 when any payload is invalid (CI-safe), bad input exits with 1 and changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from brain.cli.common import ask_owner, open_brain, print_json, running_owner

MIGRATION_NAMES = ("memory-schema", "note-kind", "memory-type")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {"home": args.home} if getattr(args, "home", None) else {}


def health(args: argparse.Namespace) -> int:
    with open_brain(**_overrides(args)) as brain:
        report = brain.maintenance.check_health(progress=True)
    print_json(report)
    return 0 if report["ok"] else 1


def migrate(args: argparse.Namespace) -> int:
    with open_brain(**_overrides(args)) as brain:
        print_json(brain.maintenance.migrate(args.name, apply=args.apply, progress=True))
    return 0


def export(args: argparse.Namespace) -> int:
    """The open checks the reserve the store needs (brain/store/integrity.py, as the server's
    start does), and the export keeps ``[storage] min_free_mb`` free on the disk it writes
    to: a nearly full disk is DISK_FULL with the figures, never a SIGBUS or a full disk."""
    with open_brain(**_overrides(args)) as brain:
        print_json(brain.maintenance.export_jsonl(
            args.path, progress=True, keep_free_mb=brain.settings.storage.min_free_mb))
    return 0


def _lost(pid: int, exc: Exception) -> int:
    print(f"brain: the server (pid {pid}) stopped answering during the import ({exc}); the "
          "batches it wrote stay: run the import again with --on-conflict skip to finish it",
          file=sys.stderr)
    return 1


def import_(args: argparse.Namespace) -> int:
    """While a server owns the data dir the import runs in it (its owner socket), batched
    like the bulk path, while it keeps serving; otherwise this command opens the data dir."""
    from config import load_settings

    path = str(Path(args.path).expanduser().resolve())  # the server's cwd is not ours
    owner = running_owner(load_settings(**_overrides(args)).home)
    if owner is not None:
        print(f"brain: importing through the running server (pid {owner[0].pid})",
              file=sys.stderr)
        body = {"path": path, "on_conflict": args.on_conflict}
        import httpx

        try:
            print_json(ask_owner(owner, "/import", body, timeout_s=None))
        except httpx.HTTPError as exc:  # the server died or was stopped meanwhile
            return _lost(owner[0].pid, exc)
        return 0
    with open_brain(**_overrides(args)) as brain:
        print_json(brain.maintenance.import_jsonl(path, args.on_conflict, progress=True))
    return 0


def maintenance(args: argparse.Namespace) -> int:
    with open_brain(**_overrides(args)) as brain:
        report = brain.maintenance.weekly(apply=args.apply, progress=True)
    print_json(report)
    return 0 if report["ok"] else 1


def restore_backup(args: argparse.Namespace) -> int:
    with open_brain(**_overrides(args)) as brain:
        print_json(brain.maintenance.restore_backup(args.path, progress=True))
    return 0


def add_home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", default=None, help="data dir (default: BRAIN__HOME)")


def stats(args: argparse.Namespace) -> int:  # noqa: ARG001
    with open_brain() as brain:
        print_json(brain.stats())
    return 0


def capabilities(args: argparse.Namespace) -> int:  # noqa: ARG001
    with open_brain() as brain:
        print_json(brain.capabilities())
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("stats", help="counts, graph size, backend and model")
    p.set_defaults(func=stats)
    p = sub.add_parser("capabilities", help="chat model, enrichment queue, reranker, storage, "
                                            "what runs degraded")
    p.set_defaults(func=capabilities)
    # ``brain health`` (the payload check) is registered by brain/cli/health.py, with the
    # vector health subcommands under it.
    p = sub.add_parser("migrate", help="run a schema conformance migration (dry run default)")
    p.add_argument("name", choices=MIGRATION_NAMES)
    p.add_argument("--apply", action="store_true", help="write (a backup is written first)")
    add_home(p)
    p.set_defaults(func=migrate)
    p = sub.add_parser("export", help="export every note, link and counter as JSONL")
    p.add_argument("path")
    add_home(p)
    p.set_defaults(func=export)
    p = sub.add_parser("import", help="import a JSONL export (re-embedded with this model; "
                                      "through the running server when there is one)")
    p.add_argument("path")
    p.add_argument(
        "--on-conflict",
        choices=("error", "skip", "replace"),
        default="error",
        help="what to do with ids that already exist (default: refuse)",
    )
    add_home(p)
    p.set_defaults(func=import_)
    p = sub.add_parser("maintenance", help="weekly routine: stale archival, health, stats")
    p.add_argument("--apply", action="store_true", help="archive and reclaim (default: report)")
    add_home(p)
    p.set_defaults(func=maintenance)
    p = sub.add_parser("restore-backup", help="restore note payloads from a migration backup")
    p.add_argument("path")
    add_home(p)
    p.set_defaults(func=restore_backup)
