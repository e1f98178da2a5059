"""Output schemas: what each tool returns, said precisely and kept small.

An output schema is listed with its tool on every turn, so each one names the keys a result
always carries (``required``) and gives a type only where the name does not say it (a list
of hits and the keys each hit has, an enum). Nested notes are not described again in every
tool: ``get_note`` returns one whole. MCP clients check every structured result against its
tool's schema, so the suite's tool tests check these too. An error result (``{"error":
{code, message, details}}``) passes every schema as well: MCP clients should skip the check
on an error, but the TypeScript SDK (Claude Code, the Inspector) checks any structured
content it gets, and would replace our typed error with its own.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def obj(required: str, **typed: Schema) -> Schema:
    """An object carrying the space-separated ``required`` keys, with these typed; or an
    error result's ``{"error": ...}``, which some clients check against the schema too."""
    out: Schema = {"type": "object",
                   "anyOf": [{"required": required.split()}, {"required": ["error"]}]}
    if typed:
        # Under allOf, not at the top: fastmcp's client turns an object schema with top-level
        # properties into a dataclass, and its users' code reads results as plain dicts.
        out["allOf"] = [{"properties": typed}]
    return out


HITS: Schema = {"type": "array", "items": obj("zk_id score")}
ANSWER: Schema = {"enum": ["single", "many", "none"]}

WRITTEN = obj("note linked redacted")
WRITTEN_NOTE = obj("note linked")
UPDATED = obj("note redacted")
ONE_NOTE = obj("note")
RELATED = obj("note related")
RESTORED = obj("zk_id")
FORGOTTEN = obj("zk_id forgotten forgotten_at")
SEARCH = obj("results count answer", results=HITS, answer=ANSWER)
DEEP = obj("results count hops answer", results=HITS, answer=ANSWER)
PASSAGES = obj("results count")
FS_SEARCH = obj("mode results count")
STATS = obj("notes backend graph model index")

SESSION_CONTEXT = obj("project handoff counts")
INBOX = obj("project notes count")
OPENED = obj("context inbox")  # get_session_context's and get_inbox's answers
CLOSED = obj("session_summary open_thread handoff_id")
FAILURE = obj("note occurrences duplicate")
RESOLUTION = obj("fix failure")
PREFLIGHT = obj("mistakes fixes patterns count")
ARCHIVED = obj("dry_run scanned stale archived notes")
DECAY = obj("notes count")
CLUSTERS = obj("dry_run project count")  # clusters (a dry run) or applied
