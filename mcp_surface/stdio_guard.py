"""The stdio transport, with an answer for every request line the SDK cannot decode.

``mcp.server.stdio.stdio_server`` (mcp 2.3.0) parses each stdin line with pydantic's JSON
parser. A line it rejects — not JSON, not a JSON-RPC message, or JSON whose strings hold a lone
UTF-16 surrogate such as ``"\\ud800"``, which pydantic refuses but Python's ``json`` accepts —
is put on the read stream as an ``Exception``; the SDK's dispatcher logs it at debug level and
drops it. The client never gets a reply and waits forever for that request id.

:func:`guarded_stdio_server` keeps the SDK's claim of fds 0/1 (stray prints stay off the
wire) and screens what it reads: an undecodable line gets a JSON-RPC error, with the
request's id when the line still yields one (JSON-RPC 2.0: -32700 parse error, or -32600
invalid request), and the server reads on. On the way out, a reply holding a lone surrogate
(which would kill the SDK's writer, and the server with it) is sent with U+FFFD in its place.
:func:`run_stdio` is FastMCP's ``run_stdio_async`` over these streams.

The lines themselves are read and written on the event loop (:func:`pipe_stdio_server`),
not as the SDK does, on a worker thread per read, write and flush: those hand-offs cost
1.2 ms of every call (a ping answered in 3.2 vs 1.9 ms, two servers side by side). Where
stdin or stdout is not a pipe, socket or terminal (a regular file), the SDK's transport
serves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
from asyncio.streams import FlowControlMixin
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from fastmcp import FastMCP
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from mcp_surface.text_guard import as_text

log = logging.getLogger("brain.stdio")

# The longest request line read (a bigger one is answered with a parse error): far above any
# argument a tool accepts (the largest, a note's content, is bounded well below it).
LINE_LIMIT = 64 * 1024 * 1024

Inbound = SessionMessage | Exception


_NOT_JSON = object()


def _received(exc: Exception) -> tuple[Any, str | None]:
    """(what the client sent, as Python's lenient ``json`` reads it, or _NOT_JSON; pydantic's
    JSON complaint if the JSON itself was refused). Pydantic keeps the whole line as the input
    of a ``json_invalid`` error, and the parsed message as the input of an outermost one."""
    if not isinstance(exc, ValidationError):
        return _NOT_JSON, None
    errors = exc.errors()
    complaint = next((e["msg"] for e in errors if e["type"] == "json_invalid"), None)
    if complaint is None:
        # Under a union each error's loc starts with the member tried; the shortest loc's
        # input is the message itself.
        dicts = [e for e in errors if isinstance(e["input"], dict)]
        outer = min(dicts or errors, key=lambda e: len(e["loc"]))
        return outer["input"], None
    line = str(errors[0]["input"])
    try:
        return json.loads(line), complaint
    except (ValueError, RecursionError):
        rid = top_level_id(line)
        return ({"id": rid} if rid is not None else _NOT_JSON), complaint


def top_level_id(line: str) -> int | str | None:
    """The ``"id"`` member of the outermost object of a line no parser can read whole
    (truncated, or nested past the parsers' limits), found by one linear scan, so the client
    waiting on that id gets its answer. Only a key of the outermost object counts."""
    depth, i, n = 0, 0, len(line)
    while i < n:
        c = line[i]
        if c == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            if depth == 1 and line[i:j + 1] == '"id"':
                rest = line[j + 1:].lstrip()
                if rest.startswith(":"):
                    try:
                        value, _ = json.JSONDecoder().raw_decode(rest[1:].lstrip())
                    except (ValueError, RecursionError):
                        return None
                    ok = isinstance(value, int | str) and not isinstance(value, bool)
                    return value if ok else None
            i = j + 1
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        i += 1
    return None


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _request_id(msg: Any) -> int | str | None:
    rid = msg.get("id") if isinstance(msg, dict) else None
    # bool is an int to Python but not a JSON-RPC id; an id holding a surrogate could not be
    # written back, so both are answered as unknown (null), as JSON-RPC 2.0 says.
    if isinstance(rid, bool) or not isinstance(rid, int | str) or not _encodable(rid):
        return None
    return rid


def _unanswerable(msg: Any) -> bool:
    """JSON-RPC 2.0 answers neither a notification nor a response (a reply to our request)."""
    if not isinstance(msg, dict):
        return False
    if "method" in msg:
        return "id" not in msg
    return "result" in msg or "error" in msg


def error_for(exc: Exception) -> JSONRPCError | None:
    """The JSON-RPC 2.0 error that answers a line the transport could not decode; None for
    one that JSON-RPC says must not be answered."""
    msg, complaint = _received(exc)
    if _unanswerable(msg):
        return None
    if msg is not _NOT_JSON and not _encodable(msg):
        code, text = PARSE_ERROR, ("Parse error: a string holds a lone UTF-16 surrogate "
                                   "(e.g. \\ud800); send valid Unicode text")
    elif complaint is not None or msg is _NOT_JSON:
        code, text = PARSE_ERROR, f"Parse error: {complaint or 'the line is not valid JSON'}"
    else:
        code, text = INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message"
    return JSONRPCError(jsonrpc="2.0", id=_request_id(msg),
                        error=ErrorData(code=code, message=text))


async def _screen(
    source: Any, forward: MemoryObjectSendStream[Inbound], write: Any
) -> None:
    """Pass decoded messages on; answer each undecodable line instead of dropping it."""
    async with forward:
        async for item in source:
            if isinstance(item, Exception):
                try:
                    reply = error_for(item)
                except Exception:  # noqa: BLE001 - e.g. RecursionError on a deep line
                    reply = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(
                        code=PARSE_ERROR, message="Parse error: the line could not be read"))
                if reply is None:
                    log.warning("stdio: dropped an undecodable notification or response")
                    continue
                log.warning("stdio: undecodable request (id %r) answered with %d",
                            reply.id, reply.error.code)
                await write.send(SessionMessage(reply))
                continue
            await forward.send(item)


def writable(item: SessionMessage) -> SessionMessage:
    """``item``, or a copy with each lone surrogate replaced by U+FFFD. The SDK's writer
    serializes each message as UTF-8 and dies on one (the whole server with it); one can come
    from the disk, e.g. a file name that is not UTF-8 quoted in an error message."""
    try:
        item.message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        raw = item.message.model_dump(by_alias=True, exclude_unset=True)
        log.warning("stdio: a reply held a lone surrogate; sent with U+FFFD in its place")
        fixed = jsonrpc_message_adapter.validate_python(as_text(raw), by_name=False)
        return SessionMessage(fixed, metadata=item.metadata)
    return item


class _TextWriter:
    """The write stream, with :func:`writable` applied to every message."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, item: SessionMessage) -> None:
        await self.inner.send(writable(item))

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _TextWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def wire_line(item: SessionMessage) -> bytes:
    """The message as one line of the wire, serialized once (:func:`writable` on failure)."""
    try:
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        text = writable(item).message.model_dump_json(by_alias=True, exclude_unset=True)
    return text.encode("utf-8") + b"\n"


def read_message(line: bytes) -> Inbound:
    """One stdin line as the SDK's reader makes it: the message, or the exception that
    refused it (undecodable bytes read as U+FFFD, as its text reader does)."""
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(
            line.decode("utf-8", errors="replace"), by_name=False))
    except Exception as exc:  # noqa: BLE001 - the screen answers whatever refused the line
        return exc


async def _pipes(loop: asyncio.AbstractEventLoop, stdin: Any, stdout: Any
                 ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """Event-loop streams over the claimed stdin and stdout; None when either is not a
    pipe, socket or terminal."""
    for f in (stdin, stdout):  # asyncio's own test, before either end is made non-blocking
        try:
            mode = os.fstat(f.fileno()).st_mode
        except (OSError, ValueError):
            return None
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
            return None
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    transport, protocol = await loop.connect_write_pipe(FlowControlMixin, stdout)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def _read_lines(reader: asyncio.StreamReader, out: Any) -> None:
    async with out:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:
                line = end.partial  # the last line, without its newline; b"" at the end
            except asyncio.LimitOverrunError as over:
                # A line past LINE_LIMIT: skipped, and answered as the screen answers any
                # unreadable line (the id cannot be read without holding the whole line).
                await reader.readexactly(over.consumed)
                while True:
                    try:
                        await reader.readuntil(b"\n")
                        break
                    except asyncio.LimitOverrunError as more:
                        await reader.readexactly(more.consumed)
                await out.send(ValueError(f"a line longer than {LINE_LIMIT} bytes"))
                continue
            if not line:
                return
            await out.send(read_message(line))


async def _write_lines(writer: asyncio.StreamWriter, source: Any) -> None:
    async with source:
        async for item in source:
            writer.write(wire_line(item))
            await writer.drain()


@asynccontextmanager
async def pipe_stdio_server() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_server`` (same fd claim, same streams), reading and writing lines
    on the event loop; the SDK's own where stdin or stdout is a regular file."""
    from mcp.server import stdio as sdk  # the fd claim: stray prints never reach the wire
    from mcp.shared._context_streams import create_context_streams

    stdin, restore_in = sdk._claim_fd(0, sys.stdin, "rb", sdk._open_stdin_diversion)
    stdout, restore_out = sdk._claim_fd(1, sys.stdout, "wb", sdk._open_stdout_diversion)
    try:
        pipes = await _pipes(asyncio.get_running_loop(), stdin, stdout)
        if pipes is None:
            async with stdio_server(
                    anyio.wrap_file(sdk._UnownedTextWrapper(stdin, encoding="utf-8",
                                                            errors="replace")),
                    anyio.wrap_file(sdk._UnownedTextWrapper(stdout, encoding="utf-8")),
            ) as (read, write):
                yield read, _TextWriter(write)  # the SDK's writer dies on a lone surrogate
            return
        reader, writer = pipes
        read_send, read_stream = create_context_streams[Inbound](0)
        write_stream, write_recv = create_context_streams[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_read_lines, reader, read_send)
                tg.start_soon(_write_lines, writer, write_recv)
                yield read_stream, write_stream
                tg.cancel_scope.cancel()
        finally:
            writer.close()
    finally:
        if restore_out is not None:
            restore_out()
        if restore_in is not None:
            restore_in()


@asynccontextmanager
async def guarded_stdio_server() -> AsyncIterator[tuple[MemoryObjectReceiveStream[Inbound], Any]]:
    async with pipe_stdio_server() as (read_stream, writer):
        forward, screened = anyio.create_memory_object_stream[Inbound](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_screen, read_stream, forward, writer)
            try:
                yield screened, writer
            finally:
                tg.cancel_scope.cancel()


async def run_stdio(server: FastMCP) -> None:
    """``FastMCP.run_stdio_async`` (fastmcp 4.2.3) over the guarded transport, no banner."""
    from fastmcp.server.context import reset_transport, set_transport

    token = set_transport("stdio")
    try:
        async with server._lifespan_manager(), guarded_stdio_server() as (read, write):
            low = server._mcp_server
            await low.run(read, write, low.create_initialization_options())
    finally:
        reset_transport(token)
