"""``brain source add|list|update|remove``, ``brain sync``, ``brain fs-search``,
``brain repair-orphans``.

A CLI process owns the brain only while the command runs, so ``brain sync`` always waits
for its job (showing a progress bar); leaving would cancel it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from brain.cli.common import open_brain, print_json
from brain.sources.registry import EDITABLE_FIELDS, TRIGGERS


def _add(args: argparse.Namespace) -> int:
    with open_brain() as b:
        res = b.sources.add(
            os.path.abspath(os.path.expanduser(args.path)),  # the shell's cwd is the base
            args.name,
            args.project,
            args.trigger,
            args.exclude,
            args.include,
            args.max_scan_files,
            args.interval_s,
            use_gitignore=args.use_gitignore is not False,  # unset: on
            sync=False,
            pinned=args.pinned,
            consent=True,  # the user names the folder: outside the roots, recorded as allowed
        )
        if res.get("granted_root"):
            print(f"allowed {res['granted_root']} for this brain (recorded in its data dir)",
                  file=sys.stderr)
        print_json(res["source"])
    return 0


def _list(args: argparse.Namespace) -> int:
    with open_brain() as b:
        print_json(b.sources.list(args.project))
    return 0


def _update(args: argparse.Namespace) -> int:
    changes = {k: getattr(args, k) for k in EDITABLE_FIELDS if getattr(args, k) is not None}
    with open_brain() as b:
        print_json(b.sources.update(args.source, **changes)["source"])
    return 0


def _remove(args: argparse.Namespace) -> int:
    with open_brain() as b:
        print_json(b.sources.remove(args.source, purge=args.purge))
    return 0


def _sync(args: argparse.Namespace) -> int:
    with open_brain() as b:
        svc = b.sources
        job = svc.rescan(args.source) if args.rescan else svc.sync(args.source)
        job = follow(svc, job["job_id"], show=not args.quiet)
        print_json(job)
        return 0 if job["status"] == "done" else 1


def follow(svc: Any, job_id: str, show: bool = True) -> dict[str, Any]:
    """Wait for a job, drawing a tqdm bar of files done; Ctrl-C cancels the job."""
    from tqdm import tqdm

    bar = tqdm(total=0, unit="file", disable=not show, desc="sync")
    try:
        while True:
            job = svc.job(job_id)
            p = job.get("progress") or {}
            bar.total = p.get("files_total") or bar.total
            bar.n = p.get("files_done", 0)
            bar.set_postfix(
                phase=p.get("phase", job["status"]),
                chunks=p.get("chunks_embedded", 0),
                refresh=False,
            )
            bar.refresh()
            if job["status"] not in ("queued", "running"):
                return job
            time.sleep(0.2)
    except KeyboardInterrupt:
        svc.cancel(job_id)
        return svc.wait(job_id, 10)
    finally:
        bar.close()


def _reset(args: argparse.Namespace) -> int:
    with open_brain() as b:
        print_json(b.sources.reset_state(args.source))
    return 0


def _reembed(args: argparse.Namespace) -> int:
    """Without --confirm only the estimate; with it, the re-embedding job, followed."""
    with open_brain() as b:
        out = b.sources.reembed(args.source, args.path, args.confirm)
        if args.confirm and "job_id" in out:
            out = follow(b.sources, out["job_id"], show=not args.quiet)
        print_json(out)
    return 0


def _jobs(args: argparse.Namespace) -> int:
    """Recorded sync jobs (sources.db): one by id, or those of a source, or all."""
    with open_brain() as b:
        if args.job:
            print_json(b.sources.job(args.job))
        else:
            found = b.sources.jobs(args.source)
            print_json({"jobs": found, "count": len(found)})
    return 0


def _cancel(args: argparse.Namespace) -> int:
    with open_brain() as b:
        print_json(b.sources.cancel(args.job, args.source))
    return 0


def _fs_search(args: argparse.Namespace) -> int:
    with open_brain() as b:
        print_json(
            b.sources.search(
                args.query,
                args.mode,
                project=args.project,
                source=args.source,
                folder=args.folder,
                path_glob=args.glob,
                category=args.category,
                tags=args.tag,
                limit=args.limit,
                fixed=args.fixed,
                case_insensitive=args.ignore_case,
            )
        )
    return 0


def _repair(args: argparse.Namespace) -> int:
    with open_brain() as b:
        print_json(b.sources.repair_orphans(dry_run=not args.delete))
    return 0


def _source_args(p: argparse.ArgumentParser, adding: bool) -> None:
    p.add_argument("--name", default=None)
    p.add_argument("--project", default=None)
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
    cnl = ssub.add_parser("cancel", help="cancel a queued or running sync job")
    cnl.add_argument("--source", default=None)
    cnl.add_argument("--job", default=None, help="one job id")
    cnl.set_defaults(func=_cancel)

    sync = sub.add_parser("sync", help="sync a source now, with a progress bar")
    sync.add_argument("source")
    sync.add_argument(
        "--wait",
        action="store_true",
        default=True,
        help="wait for the job (always: the CLI owns the brain only while it runs)",
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
