"""Bounded argument types shared by every tool, and typed errors for schema violations.

FastMCP builds each tool's JSON schema from its signature, so a cap declared here is both
published to the agent and enforced before the tool runs. Every string carries a
``max_length``, every list a ``max_length`` (maxItems), every number a range and no NaN or
infinity (issue 13: nothing a caller sends may cost more than a couple of seconds). The caps
come from ``brain.trust.limits``, where the services check them again for non-MCP callers.

A value that breaks its schema reaches the client as ``[CONTENT_TOO_LARGE]`` (a string or
list over its cap) or ``[INVALID_ARGUMENT]``, like the services' own errors, via
:class:`TypedArgumentErrors`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp.exceptions import ValidationError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from pydantic import Field
from pydantic import ValidationError as PydanticValidationError

from brain.trust.limits import (
    MAX_DATE_CHARS,
    MAX_EXCERPT_CHARS,
    MAX_FILE_NAME_CHARS,
    MAX_FILTER_FIELDS,
    MAX_FILTERS,
    MAX_ID_CHARS,
    MAX_ITEMS,
    MAX_LABEL_CHARS,
    MAX_LINE_CHARS,
    MAX_PATH_CHARS,
    MAX_PATTERN_CHARS,
    MAX_QUERY_CHARS,
    MAX_SCAN_FILES,
    MAX_SIGNATURE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
)
from mcp_surface.tool_errors import CodedToolError

# -- strings ------------------------------------------------------------------------------
# Note-sized text: the schema holds the hard ceiling, the service the configured cap
# (memory.max_content_chars), so raising the setting needs no schema change.
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
Line = Annotated[str, Field(max_length=MAX_LINE_CHARS)]
Project = Annotated[str, Field(min_length=1, max_length=MAX_LABEL_CHARS)]
OptProject = Annotated[str | None, Field(max_length=MAX_LABEL_CHARS)]
# A note tool's project: a stdio call that names none gets its client's workspace project
# (mcp_surface/workspace.py), any other the default one (NoteCore.project_of).
# (AGENTS.md says so: a description on each would cost the listing ~400 characters.)
WorkProject = OptProject
Name = Annotated[str, Field(max_length=MAX_LABEL_CHARS)]
OptName = Annotated[str | None, Field(max_length=MAX_LABEL_CHARS)]
OptFileName = Annotated[str | None, Field(max_length=MAX_FILE_NAME_CHARS)]
Id = Annotated[str, Field(max_length=MAX_ID_CHARS)]
OptId = Annotated[str | None, Field(max_length=MAX_ID_CHARS)]
ZkId = Annotated[str, Field(max_length=MAX_ID_CHARS)]
PathArg = Annotated[str, Field(max_length=MAX_PATH_CHARS)]
OptPath = Annotated[str | None, Field(max_length=MAX_PATH_CHARS)]
Pattern = Annotated[str, Field(max_length=MAX_PATTERN_CHARS)]
OptPattern = Annotated[str | None, Field(max_length=MAX_PATTERN_CHARS)]
Date = Annotated[str | None, Field(max_length=MAX_DATE_CHARS)]  # ISO date or date-time
Signature = Annotated[str, Field(min_length=1, max_length=MAX_SIGNATURE_CHARS)]
Excerpt = Annotated[str | None, Field(
    max_length=MAX_EXCERPT_CHARS,
    description="Latest transcript part, for a background LLM rewrite of the handoff")]
Tag = Annotated[str, Field(max_length=MAX_TAG_CHARS)]
Detail = Literal["compact", "full"]

# -- lists --------------------------------------------------------------------------------
TagList = Annotated[list[Tag] | None, Field(max_length=MAX_TAGS)]
Lines = Annotated[list[Line] | None, Field(max_length=MAX_ITEMS)]
Names = Annotated[list[Name] | None, Field(max_length=MAX_ITEMS)]
Cites = Annotated[list[Annotated[str, Field(max_length=512)]] | None, Field(
    max_length=16,
    description="Code it speaks of: 'path', 'path:12-30', 'path::Class.func'")]
Ids = Annotated[list[Id] | None, Field(max_length=MAX_ITEMS)]
Paths = Annotated[list[PathArg] | None, Field(max_length=MAX_ITEMS)]
Patterns = Annotated[
    list[Pattern] | None, Field(max_length=MAX_ITEMS, description="gitignore-style patterns")
]
# {key, value} | {key, any: [...]} | {key, gte/gt/lte/lt}: the service checks the shape.
FilterRule = Annotated[dict[str, Any], Field(max_length=MAX_FILTER_FIELDS)]
FilterRules = Annotated[list[FilterRule] | None, Field(max_length=MAX_FILTERS)]

# -- numbers ------------------------------------------------------------------------------
Similarity = Annotated[float, Field(ge=-1.0, le=1.0, allow_inf_nan=False)]
ScanFiles = Annotated[int | None, Field(ge=1, le=MAX_SCAN_FILES)]
IntervalS = Annotated[
    float | None,
    Field(ge=10, le=366 * 86_400, allow_inf_nan=False, description="For trigger=interval"),
]


class TypedArgumentErrors(Middleware):
    """Schema violations as typed tool errors, with what to fix and no echo of the value."""

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        try:
            return await call_next(context)
        except ValidationError as exc:
            raise argument_error(exc) from exc


def argument_error(exc: ValidationError) -> CodedToolError:
    """The typed error for arguments that break a tool's schema; ``details.problems`` lists
    each broken field and what is wrong with it (never the value sent)."""
    cause = exc.__cause__
    if not isinstance(cause, PydanticValidationError):
        return CodedToolError("INVALID_ARGUMENT", str(exc))
    problems = cause.errors(include_url=False, include_context=True, include_input=False)
    too_large = any(p["type"] in ("string_too_long", "too_long") for p in problems)
    listed = [{"field": _where(p["loc"]), "problem": p["msg"]} for p in problems[:5]]
    parts = [f"{p['field']}: {p['problem']}" for p in listed]
    code = "CONTENT_TOO_LARGE" if too_large else "INVALID_ARGUMENT"
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    message = f"invalid arguments: {'; '.join(parts)}{more}; see the tool's schema"
    return CodedToolError(code, message, {"problems": listed, "count": len(problems)})


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(x) for x in loc if not isinstance(x, int)) or "arguments"

