"""The adaptive dense weight's fitted values (brain/fusion_adapt.py). Written by
``python -m bench.fusion_fit --write``; do not edit by hand. Empty: no fit yet (the
configured dense_weight applies as is)."""

from typing import Any

FITTED: dict[str, Any] = {}
