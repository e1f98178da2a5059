"""``brain fs`` (read, list, write a source's files on disk) and ``brain changes`` (review
the journalled writes: list, preview, approve, revert), the command-line side of the ``fs``
and ``changes`` tools of the full profile."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from brain.cli.common import print_json, run
from brain.cli.ops import op


@op("fs")
def fs_work(b: Any, a: dict[str, Any]) -> Any:
    if a["command"] == "read":
        return b.fs.read(a["source"], a["path"])
    if a["command"] == "list":
        return b.fs.list(a["source"], a["path"], int(a.get("limit") or 1000))
    return b.fs.write(a["source"], a["path"], a["content"])


@op("changes")
def changes_work(b: Any, a: dict[str, Any]) -> Any:
    svc, command = b.changes, a["command"]
    if command == "list":
        return svc.list(a.get("source"), a.get("status") or "pending", int(a.get("limit") or 100))
    if command == "preview":
        return svc.preview(a["change_id"])
    if command == "approve":
        return svc.approve(a["change_id"], a["fingerprint"])
    return svc.revert(a["change_id"], a["fingerprint"])


def _fs(args: argparse.Namespace) -> int:
    content = None
    if args.fs_command == "write":  # read here: stdin is this command's, not the server's
        content = sys.stdin.read() if args.content is None else args.content
    print_json(run("fs", {"command": args.fs_command, "source": args.source,
                          "path": args.path, "limit": getattr(args, "limit", None),
                          "content": content}))
    return 0


def _changes(args: argparse.Namespace) -> int:
    print_json(run("changes", {"command": args.changes_command,
                               **{k: getattr(args, k, None) for k in (
                                   "source", "status", "limit", "change_id", "fingerprint")}}))
    return 0


def register(sub: Any) -> None:
    fs = sub.add_parser("fs", help="a source's files on disk: read, list, write (journalled)")
    fsub = fs.add_subparsers(dest="fs_command", required=True)
    for name, help_ in (("read", "a file, with its index presence"),
                        ("list", "a folder ('' the root), with index presence"),
                        ("write", "write a file (--content, else stdin); indexed, journalled")):
        q = fsub.add_parser(name, help=help_)
        q.add_argument("source")
        q.add_argument("path", nargs="?" if name == "list" else None, default="")
        if name == "list":
            q.add_argument("--limit", type=int, default=1000)
        if name == "write":
            q.add_argument("--content", default=None)
        q.set_defaults(func=_fs)
    ch = sub.add_parser("changes", help="review fs writes: list, preview, approve, revert")
    csub = ch.add_subparsers(dest="changes_command", required=True)
    lst = csub.add_parser("list", help="journalled changes")
    lst.add_argument("--source", default=None)
    lst.add_argument("--status", choices=("pending", "approved", "reverted", "all"),
                     default="pending")
    lst.add_argument("--limit", type=int, default=100)
    lst.set_defaults(func=_changes)
    pre = csub.add_parser("preview", help="disk now, what it wrote and replaced, fingerprint")
    pre.add_argument("change_id")
    pre.set_defaults(func=_changes)
    for name, help_ in (("approve", "accept a change as previewed"),
                        ("revert", "put back what a change replaced")):
        q = csub.add_parser(name, help=help_)
        q.add_argument("change_id")
        q.add_argument("fingerprint", help="what preview printed")
        q.set_defaults(func=_changes)
