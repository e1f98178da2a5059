"""Weekly maintenance: stale-note archival (report only unless --apply), reclamation of
forgotten notes past their grace period (with --apply), schema health and stats.

Usage: ``python tools/weekly_maintenance.py [--apply] [--home DIR]``; exit 1 when the
health check finds invalid payloads.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brain.cli import main  # noqa: E402


def run(argv: list[str] | None = None) -> int:
    return main(["maintenance", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(run())
