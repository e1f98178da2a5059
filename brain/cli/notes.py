"""``brain notes changed-since REF [--to REF] [--project P]``: the notes citing code that git
reports changed between two commits (default: REF and the work tree), over the git sources
of the settings identity (brain/citations); ``brain notes verify ZK-ID``: the ``verify_note``
tool's answer."""

from __future__ import annotations

import argparse
from typing import Any

from brain.cli.common import print_json, run
from brain.cli.ops import op


@op("notes.changed-since")
def changed_since_work(b: Any, a: dict[str, Any]) -> Any:
    found = b.citations.changed_since(a["ref"], a.get("to"), a.get("project"),
                                      int(a.get("limit") or 200))
    return {**found, "notes": [
        {k: n.get(k) for k in ("zk_id", "title", "project", "note_kind", "changed_paths",
                               "citations")}
        for n in found["notes"]]}


@op("notes.verify")
def verify_work(b: Any, a: dict[str, Any]) -> Any:
    return b.citations.verify(a["zk_id"])


def _changed_since(args: argparse.Namespace) -> int:
    print_json(run("notes.changed-since", {"ref": args.ref, "to": args.to,
                                           "project": args.project, "limit": args.limit}))
    return 0


def _verify(args: argparse.Namespace) -> int:
    print_json(run("notes.verify", {"zk_id": args.zk_id}))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("notes", help="notes and the code they cite")
    notes = p.add_subparsers(dest="notes_command", required=True)
    q = notes.add_parser("changed-since",
                         help="notes citing code git reports changed since a commit")
    q.add_argument("ref", help="a commit, branch or tag (HEAD~3 works)")
    q.add_argument("--to", default=None, help="the other end (default: the work tree)")
    q.add_argument("--project", default=None, help="only the sources of this project")
    q.add_argument("--limit", type=int, default=200, help="notes shown at most")
    q.set_defaults(func=_changed_since)
    v = notes.add_parser("verify", help="a note's cited code as seen then beside as it is now")
    v.add_argument("zk_id")
    v.set_defaults(func=_verify)
