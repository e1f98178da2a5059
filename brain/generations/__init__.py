"""Switching the embedding model by rebuild generations (issue 16, part 2): see service.py."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from brain.embedding import endpoints as embed_endpoints
from brain.generations.live import Gate, SwitchableEmbedder, TrackedStore
from brain.generations.service import ModelSwitch, SwitchConfig, SwitchDeps
from brain.generations.state import (
    GenerationState,
    Target,
    active_dimension,
    active_generation,
    models_in_use,
)


def check_endpoints(home: Path, endpoints: Mapping[str, Any]) -> None:
    """ENDPOINT_IN_USE when an endpoint the generations use is gone, disabled or renamed."""
    embed_endpoints.check_in_use(endpoints, models_in_use(home))


__all__ = [
    "Gate", "GenerationState", "ModelSwitch", "SwitchConfig", "SwitchDeps", "SwitchableEmbedder",
    "Target", "TrackedStore", "active_dimension", "active_generation", "check_endpoints",
]
