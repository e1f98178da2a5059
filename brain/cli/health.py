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

from brain.cli import maintenance
from brain.cli.common import open_brain, print_json


@contextmanager
def _bar(total: int | None, desc: str) -> Iterator[Callable[[int], None]]:
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit="pt", file=sys.stderr, leave=False) as bar:
        yield bar.update


def _open(args: argparse.Namespace) -> Any:
    home = getattr(args, "home", None)
    return open_brain(**({"home": home} if home else {}))


def stats(args: argparse.Namespace) -> int:
    with _open(args) as brain:
        print_json(brain.health.stats(args.project))
    return 0


def scan(args: argparse.Namespace) -> int:
    with _open(args) as brain, _bar(brain.store.count(), "scan") as step:
        report = brain.health.scan(args.project, everyone=not args.mine, progress=step)
    print_json(report)
    return 0 if report["ok"] else 1


def duplicates(args: argparse.Namespace) -> int:
    with _open(args) as brain, _bar(None, "duplicates") as step:
        print_json(brain.health.duplicates(args.project, args.threshold, args.max_points,
                                           everyone=not args.mine, progress=step))
    return 0


def hot_files(args: argparse.Namespace) -> int:
    with _open(args) as brain:
        print_json(brain.health.hot_files(args.project, everyone=not args.mine))
    return 0


def gc(args: argparse.Namespace) -> int:
    expect = None
    if args.expect:
        with open(args.expect, encoding="utf-8") as fh:
            expect = list(json.load(fh)["ids"])
    with _open(args) as brain, _bar(brain.store.count(), "gc") as step:
        print_json(brain.health.gc(not args.apply, args.project, expect,
                                   everyone=not args.mine, trigger="cli", progress=step))
    return 0


def repair(args: argparse.Namespace) -> int:
    with _open(args) as brain, _bar(None, "repair") as step:
        print_json(brain.health.repair(not args.apply, args.project, args.limit,
                                       everyone=not args.mine, trigger="cli", progress=step))
    return 0


def collection(args: argparse.Namespace) -> int:
    with _open(args) as brain:
        report = brain.health.collection(args.project, everyone=not args.mine)
    print_json(report)
    return 0 if report["ok"] else 1


def rebuild_indexes(args: argparse.Namespace) -> int:
    with _open(args) as brain, _bar(None, "rebuild-indexes") as step:
        print_json(brain.health.rebuild_indexes(not args.apply, trigger="cli", progress=step))
    return 0


def quantization(args: argparse.Namespace) -> int:
    with _open(args) as brain:
        print_json(brain.health.apply_quantization(args.mode, not args.apply, trigger="cli"))
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
