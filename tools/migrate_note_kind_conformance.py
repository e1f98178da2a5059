"""Migration `note-kind`: map unknown note_kind values to general.

Dry run by default; `--apply` first writes backups/<name>-pre-migration-<timestamp>.json
under the data dir. Usage: `python tools/migrate_note_kind_conformance.py [--apply] [--home DIR]`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brain.cli import main  # noqa: E402


def run(argv: list[str] | None = None) -> int:
    return main(["migrate", "note-kind", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(run())
