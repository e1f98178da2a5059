"""``brain bench [--quick]``: the benchmark suite (same as ``make bench``)."""

from __future__ import annotations

import argparse


def _bench(args: argparse.Namespace) -> int:
    from brain.bench.__main__ import main

    argv = ["--quick"] if args.quick else []
    if args.data:
        argv += ["--data", args.data]
    if args.only:
        argv += ["--only", args.only]
    return main(argv)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("bench", help="recall (LoCoMo, CoSQA) and speed benchmarks")
    p.add_argument("--quick", action="store_true", help="subsample, under ~3 minutes")
    p.add_argument("--data", default=None, help="folder with locomo10.json and cosqa-dev.json")
    p.add_argument("--only", default=None, help="comma-separated subset of locomo,cosqa,speed")
    p.set_defaults(func=_bench)
