"""Idempotent calls over HTTP: a call resent with the same key answers the first call's result.

An HTTP client whose connection died cannot know whether its ``add_memory`` was applied; if it
resends, the note must not be written twice. A call names itself with an idempotency key:

- the ``Idempotency-Key`` HTTP header, or ``_meta.idempotency_key`` in the ``tools/call``
  params (any transport);
- else, for a write tool (``WRITES``) over a stateful HTTP session, the session id and the
  JSON-RPC request id (MCP forbids reusing a request id within a session, so a resend with
  the same id is the same call).

The key is scoped to the caller (user and agent), so one caller's key never answers another's
call. :class:`IdempotentCalls` keeps each keyed call's result (``MAX_KEPT``, ``KEEP_S``): a
resend waits for a first call still running, then answers its result; the same key with other
arguments is refused (``CONFLICT``: a new call needs a new key). A call that failed keeps
nothing, so its resend runs again. Past this process's memory (a restart, a sibling server),
``add_memory`` is still answered once: its note is stamped with the key's request id and the
owner looks for it before writing (``owner_endpoint.DEDUPED``, brain/store/stamping.py).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from contextvars import ContextVar
from typing import Any

import anyio
from fastmcp.server.dependencies import get_http_headers
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext

from brain.trust.identity import current as current_identity
from mcp_surface.tool_errors import CodedToolError

KEY_HEADER = "idempotency-key"
SESSION_HEADER = "mcp-session-id"
META_KEY = "idempotency_key"
MAX_KEY_CHARS = 256
MAX_KEPT = 10_000  # results kept, oldest dropped first
KEEP_S = 24 * 3600.0  # a resend a day later is a new call
# The tools keyed by their session and request id when the caller gives no key: the ones that
# write (a read's result is not kept unless the caller asks with a key).
WRITES = frozenset({
    "add_memory", "update_memory", "distill_to_permanent", "restore_note", "forget_memory",
    "consolidate_clusters", "close_session", "record_failure", "record_resolution", "files",
    "sources", "health", "changes", "fs",
})

# The request id of the keyed call running in this context, for the forwarder (it becomes
# the call's request id, and the owner checks for an applied add_memory before writing).
current_key: ContextVar[str | None] = ContextVar("brain_idempotency_key", default=None)


def request_key(user_id: str, agent_id: str, key: str) -> str:
    """The request id a caller's key stands for (stamped on the notes the call writes)."""
    digest = hashlib.sha256(f"{user_id}\0{agent_id}\0{key}".encode()).hexdigest()
    return f"idem-{digest[:32]}"


def _meta_key(context: MiddlewareContext) -> Any:
    ctx = context.fastmcp_context
    meta = ctx.request_context.meta if ctx is not None and ctx.request_context else None
    if meta is None:
        return None
    if isinstance(meta, dict):
        return meta.get(META_KEY)
    extra = getattr(meta, "model_extra", None) or {}
    return extra.get(META_KEY)


def call_key(context: MiddlewareContext) -> str | None:
    """The key the call names, or None (an unkeyed call runs as it always did)."""
    headers = get_http_headers(include={KEY_HEADER, SESSION_HEADER})
    key = headers.get(KEY_HEADER) or _meta_key(context)
    if key is None:
        session = headers.get(SESSION_HEADER)
        ctx = context.fastmcp_context
        rid = ctx.request_context.request_id if ctx is not None and ctx.request_context else None
        if not session or rid is None or context.message.name not in WRITES:
            return None
        key = f"mcp:{session}:{rid}"
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS:
        raise CodedToolError(
            "INVALID_ARGUMENT",
            f"an idempotency key must be a non-empty string of at most {MAX_KEY_CHARS} "
            "characters (the Idempotency-Key header or _meta.idempotency_key); nothing was "
            "run")
    return key


class IdempotentCalls(Middleware):
    """Answers a resent keyed call with the first call's result (see the module doc)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[str, float, Any]] = OrderedDict()
        self._running: dict[str, anyio.Event] = {}

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        key = call_key(context)
        if key is None:
            return await call_next(context)
        ident = current_identity.get()
        user, agent = (ident.user_id, ident.agent_id) if ident is not None else ("", "")
        rid = request_key(user, agent, key)
        name = context.message.name
        digest = hashlib.sha256(json.dumps([name, context.message.arguments or {}],
                                           sort_keys=True, default=str).encode()).hexdigest()
        while (running := self._running.get(rid)) is not None:
            await running.wait()  # the first call is still running: its result answers
        kept = self._kept_result(rid)
        if kept is not None:
            if kept[0] != digest:
                raise CodedToolError(
                    "CONFLICT",
                    f"this idempotency key was used for another call (not this {name} with "
                    "these arguments); a new call needs a new key. Nothing was run.")
            return kept[2]
        done = self._running[rid] = anyio.Event()
        token = current_key.set(rid)
        try:
            result = await call_next(context)
        finally:
            current_key.reset(token)
            del self._running[rid]
            done.set()
        self._kept[rid] = (digest, time.monotonic(), result)
        while len(self._kept) > MAX_KEPT:
            self._kept.popitem(last=False)
        return result

    def _kept_result(self, rid: str) -> tuple[str, float, Any] | None:
        kept = self._kept.get(rid)
        if kept is not None and time.monotonic() - kept[1] > KEEP_S:
            del self._kept[rid]
            return None
        return kept
