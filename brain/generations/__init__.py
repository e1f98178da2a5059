"""Switching the embedding model by rebuild generations (issue 16, part 2): see service.py."""

from brain.generations.live import Gate, SwitchableEmbedder, TrackedStore
from brain.generations.service import ModelSwitch, SwitchConfig, SwitchDeps
from brain.generations.state import (
    GenerationState,
    Target,
    active_dimension,
    active_generation,
)

__all__ = [
    "Gate", "GenerationState", "ModelSwitch", "SwitchConfig", "SwitchDeps", "SwitchableEmbedder",
    "Target", "TrackedStore", "active_dimension", "active_generation",
]
