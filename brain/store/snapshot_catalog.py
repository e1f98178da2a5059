"""The snapshot catalogue on disk: where snapshots live (``<home>/snapshots``) and which are
complete (their ``snapshot.json`` written last). The start-up self-check reads it to name the
newest in its recovery hint; the snapshot writer and restore (snapshots.py) keep it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DIR = "snapshots"
INFO = "snapshot.json"


def snapshots_dir(home: Path) -> Path:
    return Path(home) / DIR


def list_snapshots(home: Path) -> list[dict[str, Any]]:
    """Complete snapshots, oldest first."""
    out = []
    root = snapshots_dir(home)
    if not root.is_dir():
        return []
    for d in root.iterdir():
        if d.name.startswith("."):
            continue
        try:
            info = json.loads((d / INFO).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and (d / "shard").is_dir():
            out.append({**info, "name": d.name, "path": str(d)})
    return sorted(out, key=lambda s: (s.get("created_ts", 0), s["name"]))
