"""``brain health`` subcommands: stats, scan, duplicates, hot-files, gc, repair, collection,
rebuild-indexes, quantization.

``brain health`` alone keeps its old meaning (validate every note payload, exit 1 when any
is invalid). The subcommands cover the whole store (the process's own work, every owner)
unless ``--mine``; long runs draw a progress bar on stderr and print JSON on stdout.
``scan`` and ``collection`` exit 1 when they find something to fix; ``gc``, ``repair``,
``rebuild-indexes`` and ``quantization`` are dry runs unless ``--apply``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from brain.cli import maintenance, ops
from brain.cli.common import door, print_json, run
from brain.cli.ops import op


@contextmanager
def _bar(total: int | None, desc: str) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on this command's stderr when the work runs here and stderr is a
    terminal (tqdm's ``disable=None``); none in a server, a pipe or a log."""
    if not ops.local():
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit="pt", file=sys.stderr, leave=False,
              disable=None) as bar:
        yield bar.update


def _run(args: argparse.Namespace, command: str, **extra: Any) -> Any:
    a = {k: getattr(args, k, None) for k in ("project", "mine", "apply")} | extra
    return run(f"health.{command}", a, getattr(args, "home", None) or None)


@op("health.stats")
def stats_work(b: Any, a: dict[str, Any]) -> Any:
    return b.health.stats(a.get("project"))


@op("health.scan")
def scan_work(b: Any, a: dict[str, Any]) -> Any:
    with _bar(b.store.count(), "scan") as step:
        return b.health.scan(a.get("project"), everyone=not a.get("mine"), progress=step)


@op("health.duplicates")
def duplicates_work(b: Any, a: dict[str, Any]) -> Any:
    with _bar(None, "duplicates") as step:
        return b.health.duplicates(a.get("project"), a.get("threshold"), a.get("max_points"),
                                   everyone=not a.get("mine"), progress=step)


@op("health.hot-files")
def hot_files_work(b: Any, a: dict[str, Any]) -> Any:
    return b.health.hot_files(a.get("project"), everyone=not a.get("mine"))


@op("health.gc")
def gc_work(b: Any, a: dict[str, Any]) -> Any:
    with _bar(b.store.count(), "gc") as step:
        return b.health.gc(not a.get("apply"), a.get("project"), a.get("expect"),
                           everyone=not a.get("mine"), trigger="cli", progress=step)


@op("health.repair")
def repair_work(b: Any, a: dict[str, Any]) -> Any:
    with _bar(None, "repair") as step:
        return b.health.repair(not a.get("apply"), a.get("project"),
                               int(a.get("limit") or 10_000), everyone=not a.get("mine"),
                               trigger="cli", progress=step)


@op("health.collection")
def collection_work(b: Any, a: dict[str, Any]) -> Any:
    return b.health.collection(a.get("project"), everyone=not a.get("mine"))


@op("health.rebuild-indexes", background=True)
def rebuild_indexes_work(b: Any, a: dict[str, Any]) -> Any:
    with _bar(None, "rebuild-indexes") as step:
        return b.health.rebuild_indexes(not a.get("apply"), trigger="cli", progress=step)


@op("health.quantization")
def quantization_work(b: Any, a: dict[str, Any]) -> Any:
    return b.health.apply_quantization(a.get("mode"), not a.get("apply"), trigger="cli")


def stats(args: argparse.Namespace) -> int:
    print_json(_run(args, "stats"))
    return 0


def scan(args: argparse.Namespace) -> int:
    report = _run(args, "scan")
    print_json(report)
    return 0 if report["ok"] else 1


def duplicates(args: argparse.Namespace) -> int:
    print_json(_run(args, "duplicates", threshold=args.threshold, max_points=args.max_points))
    return 0


def hot_files(args: argparse.Namespace) -> int:
    print_json(_run(args, "hot-files"))
    return 0


def gc(args: argparse.Namespace) -> int:
    expect = None
    if args.expect:
        with open(args.expect, encoding="utf-8") as fh:
            expect = list(json.load(fh)["ids"])
    print_json(_run(args, "gc", expect=expect))
    return 0


def repair(args: argparse.Namespace) -> int:
    print_json(_run(args, "repair", limit=args.limit))
    return 0


def collection(args: argparse.Namespace) -> int:
    report = _run(args, "collection")
    print_json(report)
    return 0 if report["ok"] else 1


def rebuild_indexes(args: argparse.Namespace) -> int:
    """In a server, a job this command follows (Ctrl-C detaches; the rebuild goes on)."""
    with door(getattr(args, "home", None) or None) as d:
        out = d.run("health.rebuild-indexes", {"apply": args.apply})
        if d.owner is not None:
            job = maintenance.follow_job(d, out, "index rebuild")
            if job.get("detached"):
                print_json(job)
                return 130
            out = maintenance.finished(job)
    print_json(out)
    return 0


def quantization(args: argparse.Namespace) -> int:
    print_json(_run(args, "quantization", mode=args.mode))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("health", help="note payload check (alone), or vector health: "
                                      "stats, scan, duplicates, hot-files, gc, repair, "
                                      "collection, rebuild-indexes, quantization")
    maintenance.add_home(p)
    p.set_defaults(func=maintenance.health)
    hs = p.add_subparsers(dest="health_command")

    def add(name: str, func: Callable[[argparse.Namespace], int], help_: str,
            mine: bool = True, project: bool = True) -> argparse.ArgumentParser:
        q = hs.add_parser(name, help=help_)
        # SUPPRESS: ``brain health --home X scan`` keeps the X the parent parsed.
        q.add_argument("--home", default=argparse.SUPPRESS, help="data dir (default: BRAIN__HOME)")
        if project:
            q.add_argument("--project", default=None, help="only this project")
        if mine:
            q.add_argument("--mine", action="store_true",
                           help="only what the settings identity may see (default: everyone)")
        q.set_defaults(func=func)
        return q

    add("stats", stats, "points per kind, models, queue depths", mine=False)
    add("scan", scan, "integrity scan (read-only); exit 1 when damage is found")
    q = add("duplicates", duplicates, "near-identical notes and chunks (removes nothing)")
    q.add_argument("--threshold", type=float, default=None, help="cosine similarity (0-1]")
    q.add_argument("--max-points", type=int, default=None, help="points examined at most")
    add("hot-files", hot_files, "source files rewritten often in the last window")
    q = add("gc", gc, "delete orphan points (dry run unless --apply)")
    q.add_argument("--apply", action="store_true", help="delete (default: list)")
    q.add_argument("--expect", default=None,
                   help="a dry run's JSON output: delete only the ids it listed")
    q = add("repair", repair, "fix links, graph and vectors (dry run unless --apply)")
    q.add_argument("--apply", action="store_true", help="write (default: report)")
    q.add_argument("--limit", type=int, default=10_000, help="points repaired at most")
    add("collection", collection, "payload indexes, quantization and BM25 vectors against "
        "their settings (read-only); exit 1 when something differs")
    q = add("rebuild-indexes", rebuild_indexes, "create missing or different payload indexes "
            "again (dry run unless --apply)", mine=False, project=False)
    q.add_argument("--apply", action="store_true", help="rebuild (default: list)")
    q = add("quantization", quantization, "switch the store's quantization (dry run unless "
            "--apply)", mine=False, project=False)
    q.add_argument("--mode", choices=("none", "int8"), default=None,
                   help="target mode (default: [index] quantization)")
    q.add_argument("--apply", action="store_true", help="switch (default: report)")
