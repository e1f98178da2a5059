"""Tool errors that keep their code and details on the wire, in text and in structure.

Every failure a tool call can meet (a ``BrainError`` from a service, a schema violation, a
surrogate in an argument, an unready or unreachable owner) is raised as :class:`CodedToolError`.
:class:`StructuredErrors`, the outermost middleware, answers it with an error result
(``isError: true``) that carries it twice:

- ``content``: one text block ``[CODE] message``, what an agent reads (and what fastmcp's
  client raises as ``ToolError``), unchanged from the text-only errors before;
- ``structuredContent``: ``{"error": {"code", "message", "details"}}`` for a program, which
  never has to parse the text (fastmcp's own answer to a raised ``ToolError`` is text only).
  Every tool's output schema is a plain object, and MCP clients skip output validation on an
  error result, so this passes both.

A call made in process (``FastMCP.call_tool``) gets the ``CodedToolError`` raised instead, as
that method promises. The owner's call channel sends the error result to a proxy
(owner_endpoint.py), which raises it again as its own (forwarding.py), so a call forwarded
from another process ends the same way.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp.types import CallToolResult, TextContent

from brain.errors import BrainError
from mcp_surface.text_guard import as_text

log = logging.getLogger(__name__)


class CodedToolError(ToolError):
    """A tool error with a stable ``code``, a ``message`` saying how to fix it, and
    ``details`` (JSON values: which field, which limit). ``str()`` is ``[CODE] message``."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        self.code = code
        self.message = as_text(message)
        # JSON values only: a detail that is not one (a Path, an enum) is sent as its text.
        self.details: dict[str, Any] = json.loads(
            json.dumps(as_text(dict(details or {})), default=str)
        )
        # fastmcp logs each tool error as "Error calling tool 'x'" at this level, without its
        # message: an ERROR for every refused argument. StructuredErrors logs the refusal
        # with its code and message instead (:func:`log_level`).
        super().__init__(f"[{code}] {self.message}", log_level=logging.DEBUG)

    @classmethod
    def of(cls, exc: BrainError) -> CodedToolError:
        return cls(exc.code, exc.message, exc.details)

    @classmethod
    def of_result(cls, result: CallToolResult) -> CodedToolError | None:
        """The coded error an error result carries (one :meth:`result` made), else None."""
        err = (result.structured_content or {}).get("error") if result.is_error else None
        if not isinstance(err, dict) or not isinstance(err.get("code"), str):
            return None
        details = err.get("details")
        message = str(err.get("message", ""))
        return cls(err["code"], message, details if isinstance(details, dict) else None)

    def payload(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}

    def result(self) -> ToolResult:
        """The error result on the wire: text for the agent, structure for a program."""
        return ToolResult(
            content=[TextContent(type="text", text=str(self))],
            structured_content={"error": self.payload()},
            is_error=True,
        )


# The codes that say the server is in trouble rather than that the call was refused as
# asked (a bad argument, a missing note, a path outside the policy): logged as warnings.
SERVER_SIDE = frozenset({
    "STORE_ERROR", "STORE_DAMAGED", "STORE_LOCKED", "DISK_FULL", "DATA_DIR_UNWRITABLE",
    "EMBEDDING_PROVIDER_FAILED", "MODEL_UNAVAILABLE", "LLM_ERROR", "OWNER_UNAVAILABLE",
    "NOT_READY", "INTERRUPTED", "OPTIMIZE_ABORTED", "START_FAILED", "INTERNAL",
})


def log_level(code: str) -> int:
    return logging.WARNING if code in SERVER_SIDE else logging.INFO


class StructuredErrors(Middleware):
    """Outermost: every coded error of a call from a client becomes its structured error
    result, and so does a ``BrainError`` a middleware raises (text_guard.py's, before any
    tool runs). A call made in process (``FastMCP.call_tool``, no MCP request) keeps that
    method's contract and gets the error raised, as a ``CodedToolError``."""

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        try:
            return await call_next(context)
        except CodedToolError as exc:
            if not _from_a_client(context):
                raise
            _log(context, exc)
            return exc.result()
        except BrainError as exc:
            coded = CodedToolError.of(exc)
            if not _from_a_client(context):
                raise coded from exc
            _log(context, coded)
            return coded.result()


def _log(context: MiddlewareContext, exc: CodedToolError) -> None:
    """One line per refused call, with the code and the message the caller got (the log
    handlers redact it like any record: brain/process/logs.py)."""
    log.log(log_level(exc.code), "tool %s refused: %s", context.message.name, exc)


def _from_a_client(context: MiddlewareContext) -> bool:
    """Whether the call came over an MCP session (stdio, HTTP, the in-memory transport),
    where fastmcp would flatten a raised error to text, rather than from ``call_tool``."""
    ctx = context.fastmcp_context
    return ctx is not None and ctx.request_context is not None


__all__ = ["CodedToolError", "StructuredErrors"]
