"""Tools as lean as their meaning: what the agent's context pays for every tool, every turn.

Every MCP client puts the whole tools/list answer into the model's context on every turn, so
each character of a tool's listing costs tokens all session long (issue 32). Tools register
through :func:`tool`, which makes them :class:`LeanTool`:

- no generated ``title`` (the name says it) and no ``_meta.fastmcp`` block (tags nobody
  reads);
- an input schema without the noise pydantic adds for optional arguments: ``anyOf: [X,
  null]`` with ``default: null`` becomes ``X``, ``default: false`` is dropped (an absent
  flag is false). Arguments are still validated by the tool's own signature (fastmcp's type
  adapter), so a client that sends an explicit ``null`` is still accepted; the schema only
  stops advertising it;
- an ``outputSchema`` that says what comes back (mcp_surface/outputs.py), which MCP clients
  check every structured result against.

The figures are in BENCHMARKS.md (``python -m bench --only surface``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult
from fastmcp.tools.function_tool import FunctionTool
from mcp.types import TextContent, ToolAnnotations
from mcp.types import Tool as MCPTool

from mcp_surface.text_guard import as_text

_NULL = {"type": "null"}

# The tool annotations, each hint said only where it differs from MCP's default (not
# read-only, destructive, not idempotent, open world). Every tool here is closed-world: it
# touches the brain and the folders it was given, nothing beyond.
PURE_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
# Reads that still write bookkeeping (a search stamps its hits' access for decay).
READ = ToolAnnotations(destructiveHint=False, openWorldHint=False)
WRITE = ToolAnnotations(destructiveHint=False, openWorldHint=False)
UPKEEP = ToolAnnotations(destructiveHint=False, idempotentHint=True, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(destructiveHint=True, openWorldHint=False)


class LeanTool(FunctionTool):
    """A function tool listed without a generated title or fastmcp's tag block, whose result
    is made valid text (:func:`as_text`) and written as JSON once."""

    def to_mcp_tool(self, **overrides: Any) -> MCPTool:
        listed = super().to_mcp_tool(**overrides)
        listed.title = None
        listed.meta = None
        return listed

    def convert_result(self, raw_value: Any) -> ToolResult:
        """A JSON object result as text content and structured content from one
        ``json.dumps``. fastmcp's own conversion serializes a dict three times and parses it
        once (~1 ms of a 14 ms search at 1,000 notes); anything else (a value json cannot
        write, an output schema that wraps) goes that way, made valid text first."""
        wraps = (self.output_schema or {}).get("x-fastmcp-wrap-result")
        if isinstance(raw_value, dict) and not wraps:
            text = _json_text(raw_value)
            if text is None:
                raw_value = as_text(raw_value)
                text = _json_text(raw_value)
            if text is not None:  # structured: exactly what the text says (tuples as lists)
                return ToolResult(content=[TextContent(type="text", text=text)],
                                  structured_content=json.loads(text))
        return super().convert_result(as_text(raw_value))


def _json_text(value: dict[str, Any]) -> str | None:
    """Compact JSON of ``value`` (as pydantic writes it), or None when it is not plain JSON
    data or holds a string that is not valid UTF-8 text (a lone surrogate)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        return None
    return text



def tool(
    mcp: FastMCP, annotations: ToolAnnotations, output: dict[str, Any] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated coroutine on ``mcp`` as a :class:`LeanTool`, its docstring the
    description and ``output`` its output schema (a plain object schema when none)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        lean = LeanTool.from_function(
            fn, annotations=annotations,
            output_schema=output if output is not None else {"type": "object"})
        lean.parameters = lean_schema(lean.parameters)
        # Unknown arguments are refused by the signature's validation all the same.
        lean.parameters.pop("additionalProperties", None)
        lean.description = " ".join((lean.description or "").split())
        mcp.add_tool(lean)
        return fn

    return register


def lean_schema(schema: Any) -> Any:
    """``schema`` without pydantic's optional-argument noise (see the module docstring)."""
    if isinstance(schema, list):
        return [lean_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    # A string "title" is pydantic's label; a dict one would be a property named "title".
    out = {k: lean_schema(v) for k, v in schema.items()
           if not (k == "title" and isinstance(v, str))}
    options = out.get("anyOf")
    if isinstance(options, list) and _NULL in options:
        rest = [o for o in options if o != _NULL]
        del out["anyOf"]
        if len(rest) == 1:
            out = {**rest[0], **out}
        else:
            out["anyOf"] = rest
    if out.get("default", 0) is None or out.get("default", 0) is False:
        del out["default"]
    return out
