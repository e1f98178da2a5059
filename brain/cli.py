"""The ``brain`` command: serve, stats and the maintenance commands of each area.

Subcommands live with their areas: every module named in ``COMMAND_MODULES`` has
``register(subparsers)`` adding its commands, each with ``func(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

COMMAND_MODULES = (
    "brain.cli_maintenance",
    "brain.cli_sources",
    "brain.cli_files",
    "brain.cli_bench",
    "brain.cli_owner",
    "brain.cli_snapshots",
    "brain.cli_install",
)


@contextmanager
def open_brain(**overrides: Any) -> Iterator[Any]:
    """A Brain on the configured data dir, closed on exit; config errors exit with code 2.

    Raises ``StoreLocked`` ("served by pid N; stop it or retry") while a server owns it.
    """
    from brain.app import Brain
    from brain.logs import setup_logging
    from config import load_settings

    try:
        settings = load_settings(**overrides)
    except ValueError as exc:
        print(f"brain: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    setup_logging(settings.home, settings.log.level)
    from brain.owner import exclusive

    # One process owns a data dir; a running server keeps it, and this says so (StoreLocked).
    with exclusive(settings.home, "cli"):
        brain = Brain(settings).open()
        try:
            yield brain
        finally:
            brain.close()


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _serve(args: argparse.Namespace) -> int:
    mcp_server = importlib.import_module("mcp_server")
    argv = ["--http"] if getattr(args, "http", False) else []
    if getattr(args, "host", None):
        argv += ["--host", args.host]
    if getattr(args, "port", None):
        argv += ["--port", str(args.port)]
    mcp_server.main(argv)
    return 0


def _stats(args: argparse.Namespace) -> int:  # noqa: ARG001
    with open_brain() as brain:
        print_json(brain.stats())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="brain", description="opencode-brain memory server")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start the MCP server (stdio by default)")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead")
    serve.add_argument("--host", default=None, help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="HTTP port (default 8765)")
    serve.set_defaults(func=_serve)
    stats = sub.add_parser("stats", help="counts, graph size, backend and model")
    stats.set_defaults(func=_stats)
    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from brain.errors import BrainError

    try:
        return int(args.func(args) or 0)
    except BrainError as exc:
        print(f"brain: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
