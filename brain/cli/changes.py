"""``brain fs`` (read, list, write a source's files on disk) and ``brain changes`` (review
the journalled writes: list, preview, approve, revert), the command-line side of the ``fs``
and ``changes`` tools of the full profile."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from brain.cli.common import open_brain, print_json


def _fs(args: argparse.Namespace) -> int:
    with open_brain() as b:
        if args.fs_command == "read":
            print_json(b.fs.read(args.source, args.path))
        elif args.fs_command == "list":
            print_json(b.fs.list(args.source, args.path, args.limit))
        else:
            content = sys.stdin.read() if args.content is None else args.content
            print_json(b.fs.write(args.source, args.path, content))
    return 0


def _changes(args: argparse.Namespace) -> int:
    with open_brain() as b:
        svc = b.changes
        if args.changes_command == "list":
            print_json(svc.list(args.source, args.status, args.limit))
        elif args.changes_command == "preview":
            print_json(svc.preview(args.change_id))
        elif args.changes_command == "approve":
            print_json(svc.approve(args.change_id, args.fingerprint))
        else:
            print_json(svc.revert(args.change_id, args.fingerprint))
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
