"""The ``brain`` command: serve, stats and the maintenance commands of each area.

Each module of this package adds its subcommands with ``register(subparsers)``, each with
``func(args) -> int``; ``COMMANDS`` lists them in the order ``brain --help`` shows them. A
command that reads or changes a brain registers its work by name (``ops.op``) and runs it
through ``common.door``: in the running server when one owns the data dir, else here.
"""

from __future__ import annotations

import argparse
import sys

from brain.cli import (
    bench,
    changes,
    files,
    health,
    install,
    maintenance,
    model,
    notes,
    owner,
    seed,
    serve,
    snapshots,
    sources,
)
from brain.cli.common import open_brain, print_json
from brain.errors import BrainError

COMMANDS = (serve, maintenance, health, seed, sources, changes, files, bench, owner, snapshots,
            install, model, notes)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="brain", description="opencode-brain memory server")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrainError as exc:
        print(f"brain: {exc}", file=sys.stderr)
        return 1


__all__ = ["COMMANDS", "build_parser", "main", "open_brain", "print_json"]
