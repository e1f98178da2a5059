"""``brain seed FILE``: load a JSON list (or JSON Lines) of notes into the brain.

Each entry is a note as ``add_memory`` takes it: ``content`` (required), and optionally
``project``, ``memory_type``, ``note_kind``, ``tags``, ``pinned``, ``visibility``, ``context``;
``--project`` files the entries that name no project of their own.
The whole file is checked before anything is written, each entry by the checks add_memory
applies to its fields (``check_entry``), so a bad entry changes nothing; the
notes then go in through the running server (or one started for the command), as the
configured identity. Progress goes to stderr, the summary (JSON) to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from brain.cli.common import print_json
from brain.errors import BrainError, InvalidArgument
from brain.trust.limits import MAX_TEXT_CHARS

MAX_SEED_BYTES = 64 * 1024 * 1024
FIELDS = {"content", "project", "memory_type", "note_kind", "tags", "pinned", "visibility",
          "context"}


class SeedError(ValueError):
    """The seed file cannot be loaded; the message says which entry and why."""


def check_entry(entry: dict[str, Any], max_chars: int) -> None:
    """The checks add_memory applies to a new note's fields (brain/memory/write.py,
    new_payload), run before any entry is written: a bad third entry must not leave the first
    two stored. ``max_chars``: ``[memory] max_content_chars``."""
    from brain.memory.core import check_project, require_enum, require_text
    from brain.notes import NEW_MEMORY_TYPES, NOTE_KINDS
    from brain.trust import tenancy
    from brain.trust.limits import check_tags

    for name in ("project", "memory_type", "note_kind", "visibility", "context"):
        value = entry.get(name)
        if value is not None and not isinstance(value, str):
            raise InvalidArgument(f"{name} must be a string", field=name)
    if not isinstance(entry.get("pinned", False), bool):
        raise InvalidArgument("pinned must be true or false", field="pinned")
    if entry.get("project") is not None:
        check_project(entry["project"])
    require_enum(entry.get("memory_type", "permanent"), NEW_MEMORY_TYPES, "memory_type")
    require_enum(entry.get("note_kind", "general"), NOTE_KINDS, "note_kind")
    tenancy.check_visibility(entry.get("visibility", "shared"))
    if entry.get("tags") is not None:
        check_tags(entry["tags"])
    require_text(entry["content"], "content", max_chars)
    if entry.get("context") is not None and entry["context"].strip():
        require_text(entry["context"], "context", max_chars)


def read_entries(path: Path, max_chars: int = MAX_TEXT_CHARS) -> list[dict[str, Any]]:
    """The notes of a seed file, checked: a JSON array of objects, or one object per line,
    each entry as add_memory would check it (``max_chars``: the content cap)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SeedError(f"cannot read {path}: {exc.strerror}") from None
    if size > MAX_SEED_BYTES:
        raise SeedError(f"{path} is {size} bytes; seed files are at most {MAX_SEED_BYTES} "
                        "bytes: split it into several files")
    text = path.read_text(encoding="utf-8", errors="strict")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SeedError(f"{path}: not valid JSON at line {exc.lineno}: {exc.msg}") from None
        numbered = list(enumerate(raw, 1))
        where = "entry"
    else:
        numbered = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                numbered.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise SeedError(f"{path}: line {n} is not valid JSON: {exc.msg}") from None
        where = "line"
    entries = []
    for n, entry in numbered:
        if not isinstance(entry, dict):
            raise SeedError(f"{path}: {where} {n} is not an object with a \"content\" field")
        unknown = sorted(set(entry) - FIELDS)
        if unknown:
            raise SeedError(f"{path}: {where} {n} has unknown fields {unknown}; "
                            f"a note takes {sorted(FIELDS)}")
        content = entry.get("content")
        if not isinstance(content, str) or not content.strip():
            raise SeedError(f"{path}: {where} {n} needs a non-empty \"content\" string")
        try:
            check_entry(entry, max_chars)
        except BrainError as exc:
            raise SeedError(f"{path}: {where} {n} is refused: [{exc.code}] {exc.message}; "
                            "nothing was written") from None
        entries.append(entry)
    if not entries:
        raise SeedError(f"{path} holds no notes")
    return entries


def _seed(args: argparse.Namespace) -> int:
    from brain.api import ToolCallError, open_brain
    from config import load_settings

    try:
        overrides = {"home": Path(args.home)} if args.home else {}
        max_chars = load_settings(**overrides).memory.max_content_chars
        entries = read_entries(Path(args.file), max_chars)
        if args.project is not None:  # the entries that name no project of their own
            from brain.memory.core import check_project

            project = check_project(args.project)
            entries = [e if e.get("project") else {**e, "project": project} for e in entries]
    except (SeedError, UnicodeDecodeError) as exc:
        print(f"brain seed: {exc}", file=sys.stderr)
        return 2
    except BrainError as exc:
        print(f"brain seed: --project is refused: [{exc.code}] {exc.message}", file=sys.stderr)
        return 2
    ids: list[str] = []
    with open_brain(args.home) as brain:
        for n, entry in enumerate(entries, 1):
            try:
                res = brain.add_memory(**entry)
            except ToolCallError as exc:
                print(f"brain seed: note {n} of {len(entries)} refused: [{exc.code}] "
                      f"{exc.message} ({len(ids)} added before it)", file=sys.stderr)
                print_json({"added": len(ids), "ids": ids, "failed_at": n})
                return 1
            ids.append(res["note"]["zk_id"])
            if n % 25 == 0 or n == len(entries):
                print(f"seed: {n}/{len(entries)} notes added", file=sys.stderr, flush=True)
    print_json({"added": len(ids), "ids": ids})
    return 0


def register(sub: Any) -> None:
    seed = sub.add_parser("seed", help="load a JSON / JSON Lines list of notes")
    seed.add_argument("file", help="a JSON array of notes, or one JSON note per line")
    seed.add_argument("--home", default=None, help="data dir (default: the configured one)")
    seed.add_argument("--project", default=None,
                      help="project of the entries that name none (default: [memory] "
                           "default_project; an agent's calls use its workspace's, e.g. the "
                           "repository folder's name)")
    seed.set_defaults(func=_seed)
