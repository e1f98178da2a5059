"""``brain status`` (who owns the data dir, its clients, queues and store health) and
``brain token add`` (a per-caller token for ``brain serve --http``).

``status`` asks the running owner over its Unix socket when there is one, so it works while
servers run; otherwise it opens the data dir itself (and says there is no owner).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from brain.cli.common import open_brain, print_json
from brain.process import owner as own
from brain.process.report import report


def _ask_owner(info: own.OwnerInfo, token: str) -> dict[str, Any]:
    import httpx

    transport = httpx.HTTPTransport(uds=info.address)
    with httpx.Client(transport=transport, timeout=10.0) as http:
        res = http.get("http://localhost/status", headers={"Authorization": f"Bearer {token}"})
        res.raise_for_status()
        return res.json()


def _status(args: argparse.Namespace) -> int:
    from config import load_settings

    home = load_settings().home
    info = own.read_info(home)
    token = own.read_owner_token(home)
    if info is not None and info.alive and info.address and token:
        try:
            print_json(_ask_owner(info, token))
            return 0
        except Exception as exc:  # noqa: BLE001 - fall through to the clear message below
            print(f"brain: the owner (pid {info.pid}) did not answer: {exc}", file=sys.stderr)
            return 1
    with open_brain() as brain:
        data = report(brain, None, [])
        data["note"] = "no server owns this data dir; opened it for this command"
        print_json(data)
    return 0


def _token_add(args: argparse.Namespace) -> int:
    from config import load_settings

    settings = load_settings()
    token = own.add_token(settings.home, args.user, args.agent)
    print(
        f"token for user={args.user} agent={args.agent} (shown once; only its digest is "
        f"stored in {settings.home / own.TOKENS_FILE}):",
        file=sys.stderr,
    )
    print(token)
    return 0


def register(sub: Any) -> None:
    status = sub.add_parser("status", help="owner process, clients, queue depth, store health")
    status.set_defaults(func=_status)
    token = sub.add_parser("token", help="per-caller tokens of `brain serve --http`")
    tsub = token.add_subparsers(dest="token_command", required=True)
    add = tsub.add_parser("add", help="make a token acting as one user/agent")
    add.add_argument("--user", required=True, help="user_id the token acts as")
    add.add_argument("--agent", required=True, help="agent_id the token acts as")
    add.set_defaults(func=_token_add)
