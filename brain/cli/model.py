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

from brain.cli.common import door, print_json
from brain.cli.ops import op

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


@op("model", gated=False)
def model_work(b: Any, a: dict[str, Any]) -> Any:
    """The model switch takes the generation gate itself (its swap waits out tool calls)."""
    from brain.generations.wiring import run_command

    return run_command(b.model_switch, str(a.get("command", "")), str(a.get("model") or ""),
                       int(a.get("dimension") or 0), str(a.get("provider") or "local"),
                       float(a.get("timeout_s") or 0))


def run(args: argparse.Namespace) -> int:
    with door() as d:
        out = d.run("model", _body(args))
        if d.owner is None and args.model_command in ("switch", "resume"):
            out = _foreground(d.brain, out)
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
