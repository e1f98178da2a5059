"""Sources: folders indexed into the brain, their filters, walks, categories and grep."""

from brain.sources.categories import categorize, parse_frontmatter
from brain.sources.filters import (
    DEFAULT_EXCLUDES,
    FLOOR,
    SECRET_EXCLUDES,
    SourceFilter,
    is_floored,
)
from brain.sources.grep import GrepHit, GrepResult, find_rg, grep
from brain.sources.walker import (
    FileEntry,
    WalkResult,
    count_display,
    is_binary,
    read_text_capped,
    resolve_in_source,
    walk_source,
)

__all__ = [
    "DEFAULT_EXCLUDES",
    "FLOOR",
    "SECRET_EXCLUDES",
    "FileEntry",
    "GrepHit",
    "GrepResult",
    "SourceFilter",
    "WalkResult",
    "categorize",
    "count_display",
    "find_rg",
    "grep",
    "is_binary",
    "is_floored",
    "parse_frontmatter",
    "read_text_capped",
    "resolve_in_source",
    "walk_source",
]
