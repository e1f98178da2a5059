"""``brain bench [--quick]``: the benchmark suite (same as ``make bench``).

The benchmarks live in the top-level ``bench/`` package of a source checkout, beside (above)
the product: ``brain`` imports nothing from them. This command runs ``python -m bench`` in a
child process with the checkout on ``PYTHONPATH``, so the import graph stays one-way.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the source checkout holding brain/ and bench/


def _bench(args: argparse.Namespace) -> int:
    if not (ROOT / "bench" / "__main__.py").is_file():
        print(
            f"brain bench: the benchmarks ship with the source checkout (no bench/ in {ROOT})",
            file=sys.stderr,
        )
        return 2
    argv = ["--quick"] if args.quick else []
    if args.data:
        argv += ["--data", str(Path(args.data).expanduser().resolve())]
    if args.only:
        argv += ["--only", args.only]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.call([sys.executable, "-m", "bench", *argv], env=env)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("bench", help="recall (LoCoMo, CoSQA) and speed benchmarks")
    p.add_argument("--quick", action="store_true", help="subsample, about 2 minutes on 2 CPUs")
    p.add_argument("--data", default=None, help="folder with locomo10.json and cosqa-dev.json")
    p.add_argument("--only", default=None,
                   help="comma-separated subset of locomo,cosqa,speed,llm,tokens")
    p.set_defaults(func=_bench)
