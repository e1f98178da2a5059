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

from brain.cli import ops
from brain.cli.common import Status, door, print_json, run
from brain.cli.ops import op

MIGRATION_NAMES = ("memory-schema", "note-kind", "memory-type")


def _home(args: argparse.Namespace) -> str | None:
    return getattr(args, "home", None) or None


@op("health")
def health_work(b: Any, a: dict[str, Any]) -> Any:
    return b.maintenance.check_health(progress=ops.local())


@op("migrate")
def migrate_work(b: Any, a: dict[str, Any]) -> Any:
    return b.maintenance.migrate(a["name"], apply=bool(a.get("apply")), progress=ops.local())


@op("export")
def export_work(b: Any, a: dict[str, Any]) -> Any:
    return b.maintenance.export_jsonl(a["path"], progress=ops.local(),
                                      keep_free_mb=b.settings.storage.min_free_mb)


@op("import", background=True)
def import_work(b: Any, a: dict[str, Any]) -> Any:
    """Batched like the bulk path; in a server, a job while it keeps serving."""
    return b.maintenance.import_jsonl(a["path"], a.get("on_conflict") or "error",
                                      progress=ops.local())


@op("maintenance")
def maintenance_work(b: Any, a: dict[str, Any]) -> Any:
    return b.maintenance.weekly(apply=bool(a.get("apply")), progress=ops.local())


@op("restore-backup")
def restore_backup_work(b: Any, a: dict[str, Any]) -> Any:
    return b.maintenance.restore_backup(a["path"], progress=ops.local())


@op("stats")
def stats_work(b: Any, a: dict[str, Any]) -> Any:
    return b.stats()


@op("capabilities")
def capabilities_work(b: Any, a: dict[str, Any]) -> Any:
    return b.capabilities()


def _abs(path: str) -> str:
    return str(Path(path).expanduser().resolve())  # a server's cwd is not the shell's


def health(args: argparse.Namespace) -> int:
    report = run("health", {}, _home(args))
    print_json(report)
    return 0 if report["ok"] else 1


def migrate(args: argparse.Namespace) -> int:
    print_json(run("migrate", {"name": args.name, "apply": args.apply}, _home(args)))
    return 0


def export(args: argparse.Namespace) -> int:
    """The open checks the reserve the store needs (brain/store/integrity.py, as the server's
    start does), and the export keeps ``[storage] min_free_mb`` free on the disk it writes
    to: a nearly full disk is DISK_FULL with the figures, never a SIGBUS or a full disk."""
    print_json(run("export", {"path": _abs(args.path)}, _home(args)))
    return 0


def follow_job(d: Any, job: dict[str, Any], what: str, show: bool = True,
               poll_s: float = 0.5) -> dict[str, Any]:
    """Follow a background command in the owner (brain/cli/ops.py ``Jobs``): one updating
    line on stderr; Ctrl-C detaches (the work continues in the server)."""
    import time

    status = Status(show)
    try:
        while job["status"] == "running":
            status.show(f"{what}: running in the server (pid {d.pid}), "
                        f"{int(job['elapsed_s'])} s")
            time.sleep(poll_s)
            job = d.run("job.status", {"job": job["job_id"]})
    except KeyboardInterrupt:
        print(f"\nbrain: detached; the {what} continues in the server (pid {d.pid}) until "
              "it finishes (`brain status` shows the server)", file=sys.stderr, flush=True)
        return {**job, "detached": True}
    finally:
        status.end()
    return job


def finished(job: dict[str, Any]) -> Any:
    """A followed job's result; its failure raised as the command's own would be."""
    from brain.cli.common import OwnerRefused

    if job.get("status") == "failed":
        err = job.get("error") or {}
        raise OwnerRefused(str(err.get("code") or "BRAIN_ERROR"), str(err.get("message")))
    return job.get("result")


def import_(args: argparse.Namespace) -> int:
    """While a server owns the data dir the import runs in it as a job, batched like the bulk
    path, while it keeps serving; otherwise this command opens the data dir."""
    body = {"path": _abs(args.path), "on_conflict": args.on_conflict}
    with door(_home(args)) as d:
        out = d.run("import", body)
        if d.owner is not None:
            print(f"brain: importing through the running server (pid {d.pid})",
                  file=sys.stderr)
            job = follow_job(d, out, "import")
            if job.get("detached"):
                print_json(job)
                return 130
            out = finished(job)
    print_json(out)
    return 0


def maintenance(args: argparse.Namespace) -> int:
    report = run("maintenance", {"apply": args.apply}, _home(args))
    print_json(report)
    return 0 if report["ok"] else 1


def restore_backup(args: argparse.Namespace) -> int:
    print_json(run("restore-backup", {"path": _abs(args.path)}, _home(args)))
    return 0


def add_home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", default=None, help="data dir (default: BRAIN__HOME)")


def stats(args: argparse.Namespace) -> int:  # noqa: ARG001
    print_json(run("stats"))
    return 0


def capabilities(args: argparse.Namespace) -> int:  # noqa: ARG001
    print_json(run("capabilities"))
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
