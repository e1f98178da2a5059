"""``brain ingest PATH...`` and ``brain files list|show|search|reprocess|delete``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from brain.cli.common import print_json, run
from brain.cli.ops import op
from brain.errors import BrainError


@op("ingest")
def ingest_work(b: Any, a: dict[str, Any]) -> Any:
    """Upload each path (absolute: the command made them so), then wait for them unless
    ``no_wait``; a refused path is reported in its place, the others go on."""
    results: list[dict[str, Any]] = []
    for path in a["paths"]:
        try:
            results.append(b.files.ingest(path, a.get("project")))
        except BrainError as exc:
            results.append({"path": path, "error": exc.to_dict()})
    if not a.get("no_wait"):
        results = [
            b.files.wait(r["id"], float(a.get("timeout") or 600)) | {"deduped": r["deduped"]}
            if "id" in r else r
            for r in results
        ]  # fmt: skip
    return results


@op("files.list")
def list_work(b: Any, a: dict[str, Any]) -> Any:
    return b.files.list(a.get("status"))


@op("files.show")
def show_work(b: Any, a: dict[str, Any]) -> Any:
    return b.files.get(a["file_id"])


@op("files.search")
def search_work(b: Any, a: dict[str, Any]) -> Any:
    return b.files.search(a["query"], int(a.get("limit") or 10), a.get("file_name"),
                          a.get("threshold"))


@op("files.reprocess")
def reprocess_work(b: Any, a: dict[str, Any]) -> Any:
    rec = b.files.reprocess(a["file_id"])
    if not a.get("no_wait"):
        rec = b.files.wait(rec["id"], float(a.get("timeout") or 600))
    return rec


@op("files.delete")
def delete_work(b: Any, a: dict[str, Any]) -> Any:
    return b.files.delete(a["file_id"])


def _ingest(args: argparse.Namespace) -> int:
    # a relative path is the shell's: resolve it against this cwd
    paths = [os.path.abspath(os.path.expanduser(p)) for p in args.paths]
    results = run("ingest", {"paths": paths, "project": args.project,
                             "no_wait": args.no_wait, "timeout": args.timeout})
    print_json(results)
    bad = [r for r in results if "error" in r or r.get("status") == "failed"]
    for r in bad:
        reason = r["error"]["message"] if "error" in r else r.get("reason")
        print(f"brain: {r.get('path') or r.get('file_name')}: {reason}", file=sys.stderr)
    return 1 if bad else 0


def _list(args: argparse.Namespace) -> int:
    print_json(run("files.list", {"status": args.status}))
    return 0


def _show(args: argparse.Namespace) -> int:
    print_json(run("files.show", {"file_id": args.file_id}))
    return 0


def _search(args: argparse.Namespace) -> int:
    print_json(run("files.search", {"query": args.query, "limit": args.limit,
                                    "file_name": args.file_name,
                                    "threshold": args.threshold}))
    return 0


def _reprocess(args: argparse.Namespace) -> int:
    rec = run("files.reprocess", {"file_id": args.file_id, "no_wait": args.no_wait,
                                  "timeout": args.timeout})
    print_json(rec)
    return 1 if rec.get("status") == "failed" else 0


def _delete(args: argparse.Namespace) -> int:
    print_json(run("files.delete", {"file_id": args.file_id}))
    return 0


def _wait_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-wait", action="store_true", help="return while still processing (resumes later)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait at most")


def register(sub: Any) -> None:
    ingest = sub.add_parser("ingest", help="upload documents (PDF, DOCX, HTML, MD, TXT)")
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="documents to upload")
    ingest.add_argument("--project", default=None, help="project to file them under")
    _wait_flags(ingest)
    ingest.set_defaults(func=_ingest)

    files = sub.add_parser("files", help="uploaded documents: list, show, search, ...")
    fsub = files.add_subparsers(dest="files_command", required=True)
    lst = fsub.add_parser("list", help="uploaded documents and their status")
    lst.add_argument("--status", choices=["processing", "ready", "failed"], default=None)
    lst.set_defaults(func=_list)
    show = fsub.add_parser("show", help="one document's record")
    show.add_argument("file_id")
    show.set_defaults(func=_show)
    search = fsub.add_parser("search", help="search passages of ready documents")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=10, help="1-30 passages")
    search.add_argument("--file-name", default=None, help="only this exact file name")
    search.add_argument("--threshold", type=float, default=None,
                        help="minimum cosine similarity (default: none)")
    search.set_defaults(func=_search)
    rep = fsub.add_parser("reprocess", help="re-parse and re-embed from the stored bytes")
    rep.add_argument("file_id")
    _wait_flags(rep)
    rep.set_defaults(func=_reprocess)
    delete = fsub.add_parser("delete", help="delete a document, its passages and bytes")
    delete.add_argument("file_id")
    delete.set_defaults(func=_delete)
