"""The ``brain`` command: serve, stats and the maintenance commands of each area.

Each module of this package adds its subcommands with ``register(subparsers)``, each with
``func(args) -> int``; ``COMMANDS`` lists them in the order ``brain --help`` shows them.
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
from brain.errors import BrainError, disk_full, is_no_space

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
    except OSError as exc:
        if not is_no_space(exc):
            raise
        # Every ENOSPC, from whichever path met it, is DISK_FULL with the figures and the fix.
        print(f"brain: {disk_full(f'run `brain {args.command}`', _where(exc, args))}",
              file=sys.stderr)
        return 1


def _where(exc: OSError, args: argparse.Namespace) -> str:
    if exc.filename:
        return str(exc.filename)
    from config import load_settings

    try:
        return str(getattr(args, "home", None) or load_settings().home)
    except ValueError:
        return "."


__all__ = ["COMMANDS", "build_parser", "main", "open_brain", "print_json"]
