"""The adaptive dense weight's fitted values (brain/search/adaptive.py), read from
``fitted.json`` beside this module (package data). ``python -m bench.fusion_fit --write``
writes that file; the product only reads it. ``{}``: no fit yet (the configured
dense_weight applies as is)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

FITTED_FILE = "fitted.json"


def fitted_path() -> Path:
    """Where the committed fit lives (inside the installed package)."""
    return Path(str(resources.files("brain.search").joinpath(FITTED_FILE)))


def read_fitted(path: Path | None = None) -> dict[str, Any]:
    """The fitted values at ``path`` (the committed file by default); ``{}`` when none."""
    data = json.loads((path or fitted_path()).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path or fitted_path()}: a fit is a JSON object, got {type(data).__name__}")
    return data
