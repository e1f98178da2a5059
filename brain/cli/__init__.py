"""The ``brain`` command: serve, stats and the maintenance commands of each area.

Each module of this package adds its subcommands with ``register(subparsers)``, each with
``func(args) -> int``; ``COMMANDS`` lists them in the order ``brain --help`` shows them. A
command that reads or changes a brain registers its work by name (``ops.op``) and runs it
through ``common.door``: in the running server when one owns the data dir, else here.
"""

from __future__ import annotations

import argparse
import sys

try:  # Ctrl-C while the command modules load: the same one line as later, no traceback
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
    from brain.process.startup import brain_error_in
except KeyboardInterrupt:
    print("brain: [INTERRUPTED] brain stopped by Ctrl-C", file=sys.stderr)
    raise SystemExit(130) from None

COMMANDS = (serve, maintenance, health, seed, sources, changes, files, bench, owner, snapshots,
            install, model, notes)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="brain", description="opencode-brain memory server")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


USAGE = """usage: brain COMMAND [options]

Start with:
  brain install claude-code   wire the brain into Claude Code (or: brain install opencode)
  brain serve                 start the MCP server (stdio; --http for streamable HTTP)
  brain source add PATH       index a project folder for fs_search and citations
  brain ui                    browse the brain in a web explorer on loopback
  brain stats                 what the brain holds, and its health

Every command: brain --help. One command's options: brain COMMAND --help.
"""


def _interrupted(command: str | None) -> int:
    """Ctrl-C: one line and exit code 130 (128 + SIGINT), never a traceback. A second
    Ctrl-C while the process winds down ends it at once, quietly."""
    import signal

    from brain.errors import Interrupted

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if command in ("serve", "ui"):
        err = Interrupted(f"brain {command} stopped by Ctrl-C")
    else:
        err = Interrupted(f"brain {command or ''} stopped by Ctrl-C; what it wrote before is "
                          "kept, run it again to finish".replace("brain  ", "brain "))
    print(f"brain: {err}", file=sys.stderr, flush=True)
    return 130


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if not args_in:
        print(USAGE, end="", file=sys.stderr)
        return 2
    command = None
    try:
        args = build_parser().parse_args(args_in)
        command = args.command
        return int(args.func(args) or 0)
    except BrainError as exc:
        print(f"brain: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return _interrupted(command)
    except BaseExceptionGroup as group:
        if group.subgroup(KeyboardInterrupt) is not None:
            return _interrupted(command)
        return _unexpected(group, command)
    except (OSError, ValueError) as exc:
        return _unexpected(exc, command)


def _unexpected(exc: BaseException, command: str | None) -> int:
    """A failure with no typed error: a data dir that cannot be written or is full, or a
    bad setting, as their one line; anything else keeps its traceback (a bug to report)."""
    from brain.process.startup import data_dir_error, guess_home

    found = brain_error_in(exc)
    if found is not None:
        print(f"brain: {found}", file=sys.stderr)
        return 1
    if isinstance(exc, ValueError) and getattr(exc, "code", "") == "CONFIG_INVALID":
        print(f"brain: {exc}", file=sys.stderr)  # config.ConfigInvalid: [CONFIG_INVALID] ...
        return 2
    try:
        home = guess_home()
    except Exception:  # noqa: BLE001 - only to name the data dir
        home = None
    if is_no_space(exc):
        # Every ENOSPC, from whichever path met it (an export's target elsewhere too), is
        # DISK_FULL with the free figure and the fix.
        where = str(getattr(exc, "filename", None) or home or ".")
        on_disk: BaseException | None = disk_full(f"run `brain {command or ''}`", where)
    else:
        on_disk = data_dir_error(exc, home)
    if on_disk is None:
        raise exc
    print(f"brain: {on_disk}", file=sys.stderr)
    return 1


__all__ = ["COMMANDS", "build_parser", "main", "open_brain", "print_json"]
