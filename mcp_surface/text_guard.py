"""Refuse tool arguments that are not valid Unicode text, before any tool runs.

A lone UTF-16 surrogate (``"\\ud800"``) is a Python ``str`` but not text: it cannot be
encoded as UTF-8, so SQLite, the store's payloads, uuid5 and the JSON of every later reply
fail on it, each with its own untyped error. Stored once (a source renamed to one, a job's
paths), it broke every later reply that named it. The stdio and HTTP transports already refuse
it in JSON (see stdio_guard.py); an in-process client or a forwarded call can still bring one.
This middleware answers ``INVALID_ARGUMENT`` naming the argument, and nothing runs.
On the way out, :func:`as_text` makes every tool result valid text.
"""

from __future__ import annotations

import re
from typing import Any

from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext

from brain.errors import InvalidArgument

MAX_DEPTH = 64  # arguments nest a few levels; deeper is refused by the schema anyway
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a Python str, only a lone one is left


def as_text(value: Any) -> Any:
    """``value`` with each lone surrogate in its strings replaced by U+FFFD. Tool results
    pass through it: text from the disk (a file name that is not UTF-8 reaches Python as a
    lone surrogate) would otherwise fail the reply's JSON, and the call with it."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {as_text(k): as_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_text(v) for v in value]
    return value


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_bad_text(value: Any, where: str, depth: int = 0) -> str | None:
    """The path (``tags[2]``) of the first string in ``value`` that is not valid text."""
    if isinstance(value, str):
        return None if _is_text(value) else where
    if depth >= MAX_DEPTH:
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not _is_text(key):
                return f"{where} (a key)"
            found = first_bad_text(item, f"{where}.{key}", depth + 1)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = first_bad_text(item, f"{where}[{i}]", depth + 1)
            if found:
                return found
    return None


class ValidText(Middleware):
    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        for name, value in (context.message.arguments or {}).items():
            where = first_bad_text(value, name) if _is_text(name) else "an argument name"
            if where:
                err = InvalidArgument(
                    f"{where!s} holds a lone UTF-16 surrogate (e.g. \\ud800), which is not "
                    "text: send valid Unicode (a surrogate pair, or the character itself)",
                    field=as_text(where))
                raise err  # answered as a structured error (tool_errors.py)
        return await call_next(context)
