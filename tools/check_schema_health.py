"""CI-safe schema drift check: exit 1 when any note payload is invalid.

Usage: ``python tools/check_schema_health.py [--home DIR]`` (default data dir: BRAIN__HOME).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brain.cli import main  # noqa: E402


def run(argv: list[str] | None = None) -> int:
    return main(["health", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(run())
