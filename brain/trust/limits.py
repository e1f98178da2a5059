"""Caps on what a caller may send, and the checks that enforce them in the services.

Every string and list a tool takes is bounded so that no request costs more than a couple
of seconds (issue 13). The MCP layer declares these caps in the tool schemas
(``mcp_surface/args.py``); the services check them again with the functions below, so a
caller that does not come through MCP (CLI, bulk import, tests) meets the same limits. Limits
a user may tune live in ``config.py`` (``memory.max_content_chars``); the rest are here, once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from brain.errors import ContentTooLarge, InvalidArgument
from brain.trust.globs import compile_spec

MAX_TAGS = 32  # tags on a note, or tags to filter by
MAX_TAG_CHARS = 64
MAX_LABEL_CHARS = 128  # a project or source name, a payload key
MAX_FILE_NAME_CHARS = 255  # file systems allow 255 bytes
MAX_ID_CHARS = 128  # note, file, job and cluster ids
MAX_SIGNATURE_CHARS = 256  # a failure signature
MAX_QUERY_CHARS = 10_000  # a search query or a task description
MAX_TEXT_CHARS = 1_000_000  # schema ceiling of note-sized text; memory.max_content_chars rules
MAX_LINE_CHARS = 4_000  # one item of a list of lines (close_session)
MAX_EXCERPT_CHARS = 8_000  # close_session's transcript_excerpt (the hooks send <= 6,000)
MAX_PATH_CHARS = 4_096
MAX_PATTERN_CHARS = 1_000  # one glob or regex
MAX_DATE_CHARS = 64
MAX_ITEMS = 256  # items in any list argument (lines, patterns, paths, categories, ids)
MAX_FILTERS = 16  # custom filters in one search
MAX_FILTER_FIELDS = 6  # fields of one custom filter: key and value, any or range bounds
MAX_FILTER_VALUES = 256  # values of one {key, any: [...]} filter
MAX_SCAN_FILES = 10_000_000  # a source's max_scan_files
MAX_AGE_DAYS = 365_000.0  # a thousand years: "no age limit" is simply omitting it

_FILTER_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def too_large(name: str, length: int, cap: int, fix: str) -> ContentTooLarge:
    return ContentTooLarge(
        f"{name} has {length} characters, more than the cap of {cap}. {fix}",
        field=name, length=length, cap=cap,
    )  # fmt: skip


def has_text(value: str) -> bool:
    """True when ``value`` holds something visible: not only whitespace, NULs or other
    control and format characters (a note of "\\x00" is not a note)."""
    return any(ch.isprintable() and not ch.isspace() for ch in value)


def check_text(value: Any, name: str, cap: int, fix: str = "Shorten it.") -> str:
    """A non-blank string of at most ``cap`` characters, else a typed error."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string", field=name)
    if len(value) > cap:  # before has_text: never scan a huge value
        raise too_large(name, len(value), cap, fix)
    if not has_text(value):
        raise InvalidArgument(
            f"{name} is empty (only whitespace or control characters): pass the text",
            field=name,
        )
    return value


def check_strings(
    values: Any, name: str, *, max_items: int = MAX_ITEMS, max_chars: int = MAX_LINE_CHARS
) -> list[str]:
    """A list of at most ``max_items`` non-blank strings of at most ``max_chars`` each."""
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidArgument(f"{name} must be a list of strings", field=name)
    if len(values) > max_items:
        raise InvalidArgument(
            f"{name} has {len(values)} items, more than the cap of {max_items}; pass fewer",
            field=name, count=len(values), cap=max_items,
        )  # fmt: skip
    return [check_text(v, f"{name} item", max_chars) for v in values]


def check_tags(tags: Any, name: str = "tags") -> list[str]:
    return check_strings(tags, name, max_items=MAX_TAGS, max_chars=MAX_TAG_CHARS)


def check_number(
    value: Any, name: str, *, lo: float, hi: float, lo_open: bool = False
) -> float:
    """A finite number in [lo, hi] (or (lo, hi] with ``lo_open``), else INVALID_ARGUMENT."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{name} must be a number", field=name)
    number = float(value)
    low_ok = number > lo if lo_open else number >= lo
    if not math.isfinite(number) or not low_ok or number > hi:
        bound = "(" if lo_open else "["
        raise InvalidArgument(
            f"{name}={value!r} is out of range: use a number in {bound}{lo:g}, {hi:g}]",
            field=name,
        )
    return number


def check_patterns(patterns: Any, name: str) -> list[str]:
    """gitignore-style patterns that brain.trust.globs can compile; a bad one is INVALID_ARGUMENT
    (it would otherwise fail later, inside a sync or a search)."""
    found = check_strings(patterns, name, max_chars=MAX_PATTERN_CHARS)
    for pattern in found:
        check_glob(pattern, name)
    return found


def check_glob(pattern: str, name: str = "path_glob") -> str:
    check_text(pattern, name, MAX_PATTERN_CHARS)
    try:
        compile_spec([pattern])  # the engine every match uses (brain/trust/globs.py)
    except (ValueError, re.error) as exc:  # GitIgnorePatternError is a ValueError
        raise InvalidArgument(
            f"{name} {pattern!r} is not a valid gitignore-style pattern ({exc}); "
            "e.g. '**/*.py', 'src/**' or 'build/'",
            field=name,
        ) from exc
    return pattern


def check_filter_key(key: Any) -> str:
    """A payload key of a custom filter: a name or a dotted path of names."""
    if not isinstance(key, str) or len(key) > MAX_LABEL_CHARS or not _FILTER_KEY.fullmatch(key):
        raise InvalidArgument(
            f"custom filter key {key!r} is not valid: use a payload field name such as "
            "'note_kind' or a dotted path such as 'meta.owner'",
            field="custom_filters",
        )
    return key


def check_filter_value(value: Any, key: str) -> Any:
    """A scalar a payload field can match: a string, an integer or a boolean."""
    if isinstance(value, str):
        return check_text(value, f"custom filter {key!r} value", MAX_QUERY_CHARS)
    if isinstance(value, bool) or (isinstance(value, int) and -(2**63) <= value < 2**63):
        return value  # the store keeps 64-bit integers
    raise InvalidArgument(
        f"custom filter on {key!r}: match a string, an integer or a boolean, not {value!r}; "
        "use gte/gt/lte/lt for numbers in a range",
        field="custom_filters",
    )
