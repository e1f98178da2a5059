"""``brain model estimate|switch|status|cancel|resume|rollback|drop-previous``.

While a server owns the data dir the command goes to it (its owner socket), so the rebuild
runs in the server, in the background, while it keeps serving. Without a server the command
opens the data dir itself; ``switch`` and ``resume`` then run the rebuild in the foreground
until it completes (Ctrl-C pauses it: ``brain model resume`` carries on from its checkpoint).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from brain.cli.common import ask_owner, open_brain, print_json, running_owner
from brain.errors import BrainError

COMMANDS = ("estimate", "switch", "status", "cancel", "resume", "rollback", "drop-previous")


def _body(args: argparse.Namespace) -> dict[str, Any]:
    return {"command": args.model_command, "model": args.model or "",
            "dimension": args.dimension, "provider": args.provider}


def _foreground(brain: Any, out: dict[str, Any]) -> dict[str, Any]:
    """Wait for the rebuild this process started; Ctrl-C pauses it."""
    try:
        while brain.model_switch.rebuilder is not None:
            rb = brain.model_switch.status().get("rebuild") or {}
            print(f"\rrebuild: {rb.get('done', 0)}/{rb.get('total', 0)} points",
                  end="", file=sys.stderr)
            time.sleep(1.0)
    except KeyboardInterrupt:
        print("\npaused: `brain model resume` carries on", file=sys.stderr)
    print(file=sys.stderr)
    return dict(brain.model_switch.status())


def run(args: argparse.Namespace) -> int:
    from brain.generations.wiring import run_command
    from config import load_settings

    owner = running_owner(load_settings().home)
    body = _body(args)
    if owner is not None:
        print_json(ask_owner(owner, "/model", body))
        return 0
    with open_brain() as brain:
        try:
            out = run_command(brain.model_switch, body["command"], body["model"],
                              body["dimension"], body["provider"])
        except BrainError as exc:
            print(f"brain: {exc}", file=sys.stderr)
            return 1
        if args.model_command in ("switch", "resume"):
            out = _foreground(brain, out)
        print_json(out)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("model", help="change the embedding model: estimate, switch (rebuild "
                                     "generation), status, cancel, resume, rollback, "
                                     "drop-previous")
    p.add_argument("model_command", choices=COMMANDS)
    p.add_argument("--model", default=None,
                   help="target model id (default: the configured embedding.model pending a "
                        "switch)")
    p.add_argument("--dimension", type=int, default=0, help="target dimension (0: its default)")
    p.add_argument("--provider", default="local", choices=("local", "openai", "hf"),
                   help="who serves --model")
    p.set_defaults(func=run)
