"""``brain source add|list|update|remove``, ``brain sync``, ``brain fs-search``,
``brain repair-orphans``.

``brain sync`` and ``brain source reembed --confirm`` queue a job and follow it (one progress
line on stderr). While a server owns the data dir the job runs in its queue: Ctrl-C detaches
and the job continues (``brain source cancel NAME`` stops it). Without a server the command
opens the brain itself, so Ctrl-C cancels the job (the brain closes with the command).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from brain.cli.common import Door, Status, door, print_json, run
from brain.cli.ops import op
from brain.sources.registry import EDITABLE_FIELDS, TRIGGERS


@op("source.add")
def add_work(b: Any, a: dict[str, Any]) -> Any:
    res = b.sources.add(a["path"], a.get("name"), a.get("project"), a.get("trigger"),
                        a.get("exclude"), a.get("include"), a.get("max_scan_files"),
                        a.get("interval_s"), use_gitignore=a.get("use_gitignore") is not False,
                        sync=False, pinned=a.get("pinned"),
                        consent=True)  # the user names the folder: recorded as allowed
    return {"source": res["source"], "granted_root": res.get("granted_root")}


@op("source.list")
def list_work(b: Any, a: dict[str, Any]) -> Any:
    return b.sources.list(a.get("project"))


@op("source.update")
def update_work(b: Any, a: dict[str, Any]) -> Any:
    return b.sources.update(a["source"], **dict(a.get("changes") or {}))["source"]


@op("source.remove")
def remove_work(b: Any, a: dict[str, Any]) -> Any:
    return b.sources.remove(a["source"], purge=bool(a.get("purge")))


@op("source.sync")
def sync_work(b: Any, a: dict[str, Any]) -> Any:
    """Queue the sync (its job id comes back at once; the command follows the job)."""
    svc = b.sources
    return svc.rescan(a["source"]) if a.get("rescan") else svc.sync(a["source"])


@op("source.job")
def job_work(b: Any, a: dict[str, Any]) -> Any:
    return b.sources.job(a["job"])


@op("source.jobs")
def jobs_work(b: Any, a: dict[str, Any]) -> Any:
    if a.get("job"):
        return b.sources.job(a["job"])
    found = b.sources.jobs(a.get("source"))
    return {"jobs": found, "count": len(found)}


@op("source.cancel")
def cancel_work(b: Any, a: dict[str, Any]) -> Any:
    return b.sources.cancel(a.get("job"), a.get("source"))


@op("source.wait")
def wait_work(b: Any, a: dict[str, Any]) -> Any:
    return b.sources.wait(a["job"], float(a.get("timeout_s") or 10))


@op("source.reset")
def reset_work(b: Any, a: dict[str, Any]) -> Any:
    return b.sources.reset_state(a["source"])


@op("source.reembed")
def reembed_work(b: Any, a: dict[str, Any]) -> Any:
    """The estimate, or (``confirm``) the queued re-embedding job, which the command follows."""
    return b.sources.reembed(a["source"], a.get("path"), bool(a.get("confirm")))


@op("fs-search")
def fs_search_work(b: Any, a: dict[str, Any]) -> Any:
    return b.sources.search(a["query"], a.get("mode") or "semantic", project=a.get("project"),
                            source=a.get("source"), folder=a.get("folder"),
                            path_glob=a.get("glob"), category=a.get("category"),
                            tags=a.get("tag"), limit=int(a.get("limit") or 10),
                            fixed=bool(a.get("fixed")),
                            case_insensitive=bool(a.get("ignore_case")))


@op("repair-orphans")
def repair_work(b: Any, a: dict[str, Any]) -> Any:
    return b.sources.repair_orphans(dry_run=not a.get("delete"))


def _add(args: argparse.Namespace) -> int:
    res = run("source.add", {
        "path": os.path.abspath(os.path.expanduser(args.path)),  # the shell's cwd is the base
        "name": args.name, "project": args.project, "trigger": args.trigger,
        "exclude": args.exclude, "include": args.include,
        "max_scan_files": args.max_scan_files, "interval_s": args.interval_s,
        "use_gitignore": args.use_gitignore, "pinned": args.pinned})
    if res.get("granted_root"):
        print(f"allowed {res['granted_root']} for this brain (recorded in its data dir)",
              file=sys.stderr)
    print_json(res["source"])
    if not res["source"].get("last_run"):
        print(f"source {res['source']['name']} added; index it now with: brain sync "
              f"{res['source']['name']}", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    print_json(run("source.list", {"project": args.project}))
    return 0


def _update(args: argparse.Namespace) -> int:
    changes = {k: getattr(args, k) for k in EDITABLE_FIELDS if getattr(args, k) is not None}
    print_json(run("source.update", {"source": args.source, "changes": changes}))
    return 0


def _remove(args: argparse.Namespace) -> int:
    print_json(run("source.remove", {"source": args.source, "purge": args.purge}))
    return 0


def _sync(args: argparse.Namespace) -> int:
    with door() as d:
        job = d.run("source.sync", {"source": args.source, "rescan": args.rescan})
        job = follow(d, job["job_id"], args.source, show=not args.quiet)
        print_json(job)
        if job.get("detached"):
            return 130
        return 0 if job["status"] == "done" else 1


def _line(job: dict[str, Any]) -> str:
    p = job.get("progress") or {}
    total = p.get("files_total")
    files = f"{p.get('files_done', 0)}/{total}" if total else str(p.get("files_done", 0))
    running = job["status"] in ("queued", "running")  # else the outcome, not its last phase
    return (f"{job.get('kind') or 'sync'}: {files} files, {p.get('chunks_embedded', 0)} chunks "
            f"({p.get('phase', job['status']) if running else job['status']})")


def follow(d: Door, job_id: str, source: str, show: bool = True,
           poll_s: float = 0.3) -> dict[str, Any]:
    """Wait for a sources job, one updating progress line on stderr. Ctrl-C: in a server's
    queue the job continues (the command detaches and says how to cancel it); in this
    command's own brain it is cancelled (the brain closes with the command)."""
    job: dict[str, Any] = {"job_id": job_id, "status": "queued"}
    status = Status(show)
    try:
        while True:
            job = d.run("source.job", {"job": job_id})
            done = job["status"] not in ("queued", "running")
            status.show(_line(job), final=done)
            if done:
                return job
            time.sleep(poll_s)
    except KeyboardInterrupt:
        if d.owner is not None:
            print(f"\nbrain: detached; sync job {job_id} continues in the server (pid "
                  f"{d.pid}): `brain source jobs --job {job_id}` shows it, "
                  f"`brain source cancel {source}` cancels it", file=sys.stderr, flush=True)
            return {**job, "detached": True}
        print(f"\nbrain: cancelling sync job {job_id} (it runs in this command's own brain, "
              "which closes with it)", file=sys.stderr, flush=True)
        d.run("source.cancel", {"job": job_id})
        return dict(d.run("source.wait", {"job": job_id, "timeout_s": 10}))
    finally:
        status.end()


def _reset(args: argparse.Namespace) -> int:
    print_json(run("source.reset", {"source": args.source}))
    return 0


def _reembed(args: argparse.Namespace) -> int:
    """Without --confirm only the estimate; with it, the re-embedding job, followed."""
    with door() as d:
        out = d.run("source.reembed", {"source": args.source, "path": args.path,
                                       "confirm": args.confirm})
        if args.confirm and "job_id" in out:
            out = follow(d, out["job_id"], args.source, show=not args.quiet)
        print_json(out)
    return 130 if out.get("detached") else 0


def _jobs(args: argparse.Namespace) -> int:
    """Recorded sync jobs (sources.db): one by id, or those of a source, or all."""
    print_json(run("source.jobs", {"job": args.job, "source": args.source}))
    return 0


def _cancel(args: argparse.Namespace) -> int:
    source = args.source or args.name
    if not (args.job or source):
        from brain.errors import InvalidArgument

        raise InvalidArgument("name the source (brain source cancel NAME) or a job "
                              "(--job ID) to cancel")
    print_json(run("source.cancel", {"job": args.job, "source": source}))
    return 0


def _fs_search(args: argparse.Namespace) -> int:
    print_json(run("fs-search", {k: getattr(args, k) for k in (
        "query", "mode", "project", "source", "folder", "glob", "category", "tag", "limit",
        "fixed", "ignore_case")}))
    return 0


def _repair(args: argparse.Namespace) -> int:
    print_json(run("repair-orphans", {"delete": args.delete}))
    return 0


def _source_args(p: argparse.ArgumentParser, adding: bool) -> None:
    p.add_argument("--name", default=None)
    p.add_argument("--project", default=None,
                   help="default: the folder's git work tree name, else its own name (as "
                        "the hooks name an agent's project)" if adding else None)
    p.add_argument(
        "--trigger", choices=TRIGGERS, default="manual" if adding else None
    )
    p.add_argument("--exclude", action="append", default=None, help="gitignore pattern (repeat)")
    p.add_argument("--include", action="append", default=None, help="gitignore pattern (repeat)")
    p.add_argument("--max-scan-files", dest="max_scan_files", type=int, default=None)
    p.add_argument("--interval-s", dest="interval_s", type=float, default=None)
    p.add_argument("--use-gitignore", dest="use_gitignore",
                   action=argparse.BooleanOptionalAction, default=None,
                   help="skip what .gitignore files skip (default: on)")
    p.add_argument("--pinned", action=argparse.BooleanOptionalAction, default=None,
                   help="keep syncing under [sync] auto = packages-only (default: when it "
                        "holds package content)")


def register(sub: argparse._SubParsersAction) -> None:
    src = sub.add_parser("source", help="folders indexed for fs_search")
    ssub = src.add_subparsers(dest="source_command", required=True)
    add = ssub.add_parser("add", help="add a folder as a source (then run brain sync NAME)")
    add.add_argument("path")
    _source_args(add, adding=True)
    add.set_defaults(func=_add)
    lst = ssub.add_parser("list", help="sources with their index snapshot")
    lst.add_argument("--project", default=None)
    lst.set_defaults(func=_list)
    upd = ssub.add_parser("update", help="change a source's settings")
    upd.add_argument("source")
    _source_args(upd, adding=False)
    upd.set_defaults(func=_update)
    rem = ssub.add_parser("remove", help="stop indexing a source")
    rem.add_argument("source")
    rem.add_argument("--purge", action="store_true", help="also delete its search data")
    rem.set_defaults(func=_remove)
    rst = ssub.add_parser("reset", help="forget what the last sync saw (next sync compares all)")
    rst.add_argument("source")
    rst.set_defaults(func=_reset)
    rmb = ssub.add_parser("reembed", help="embed a source (or --path part) again; estimate "
                                         "unless --confirm")
    rmb.add_argument("source")
    rmb.add_argument("--path", default=None, help="a folder or file of the source")
    rmb.add_argument("--confirm", action="store_true", help="run it (default: estimate)")
    rmb.add_argument("--quiet", action="store_true", help="no progress bar")
    rmb.set_defaults(func=_reembed)
    jobs = ssub.add_parser("jobs", help="recorded sync jobs and their status")
    jobs.add_argument("--source", default=None)
    jobs.add_argument("--job", default=None, help="one job id")
    jobs.set_defaults(func=_jobs)
    cnl = ssub.add_parser("cancel", help="cancel a source's queued and running sync jobs "
                                         "(or one: --job ID)")
    cnl.add_argument("name", nargs="?", default=None, help="the source (name or id)")
    cnl.add_argument("--source", default=None, help=argparse.SUPPRESS)  # the older spelling
    cnl.add_argument("--job", default=None, help="one job id")
    cnl.set_defaults(func=_cancel)

    sync = sub.add_parser("sync", help="sync a source now, with a progress bar")
    sync.add_argument("source")
    sync.add_argument(
        "--wait",
        action="store_true",
        default=True,
        help="wait for the job (always; with a server running, Ctrl-C detaches)",
    )
    sync.add_argument("--rescan", action="store_true", help="re-read every file")
    sync.add_argument("--quiet", action="store_true", help="no progress bar")
    sync.set_defaults(func=_sync)

    fsq = sub.add_parser("fs-search", help="search the files of sources")
    fsq.add_argument("query")
    fsq.add_argument("--mode", choices=("semantic", "filter", "grep"), default="semantic")
    fsq.add_argument("--project", default=None)
    fsq.add_argument("--source", default=None)
    fsq.add_argument("--folder", default=None)
    fsq.add_argument("--glob", default=None)
    fsq.add_argument("--category", action="append", default=None)
    fsq.add_argument("--tag", action="append", default=None)
    fsq.add_argument("--limit", type=int, default=10)
    fsq.add_argument("--fixed", action="store_true", help="grep: literal text")
    fsq.add_argument("-i", "--ignore-case", dest="ignore_case", action="store_true")
    fsq.set_defaults(func=_fs_search)

    rep = sub.add_parser("repair-orphans", help="find (and --delete) points of removed sources")
    rep.add_argument("--delete", action="store_true", help="delete them (default: dry run)")
    rep.set_defaults(func=_repair)
