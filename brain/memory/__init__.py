"""Notes: the memory service and what its callers name (see service.py for the parts)."""

from brain.memory.core import (
    MAX_TOP_K,
    NOTE_FILTER,
    MemoryConfig,
    WriteResult,
    check_project,
    check_top_k,
    embed_text,
    keyword_text,
)
from brain.memory.filters import RecallFilter
from brain.memory.service import MemoryService

__all__ = [
    "MAX_TOP_K",
    "NOTE_FILTER",
    "MemoryConfig",
    "MemoryService",
    "RecallFilter",
    "WriteResult",
    "check_project",
    "check_top_k",
    "embed_text",
    "keyword_text",
]
