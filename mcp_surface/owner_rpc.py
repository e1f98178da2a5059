"""The owner's call channel: tool calls from sibling servers, as JSON lines on a Unix socket.

A proxying server already speaks MCP to its own client; between it and the owner a second
MCP session over HTTP cost ~3 ms per call (HTTP framing, session bookkeeping, model
validation on both ends). This channel keeps one socket per sibling with one JSON object per
line, many calls in flight at once (matched by id), and EOF the moment the owner dies.

Frames (UTF-8 JSON, one per line; JSON never holds a raw newline)::

    sibling -> owner   {"token": "...", "pid": 123}                          (first line)
    owner -> sibling   {"ok": true}                    (or the socket closes: wrong token)
    sibling -> owner   {"id": 1, "name": "search_memory", "args": {...},
                        "caller": {"user_id": "...", "agent_id": "..."},
                        "request_id": "...", "retry": false}
    owner -> sibling   {"id": 1, "result": <CallToolResult>} | {"id": 1, "error": "..."}
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectSendStream

MAX_FRAME = 256 * 1024 * 1024  # a result is at most a few MB; this only bounds a broken peer
HANDSHAKE_TIMEOUT_S = 5.0

Handler = Callable[[dict[str, Any], int], Awaitable[dict[str, Any]]]


def encode(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame, separators=(",", ":"), default=str).encode() + b"\n"


class _Framed:
    """One socket, read line by line, written whole frames at a time."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)
        self._send_lock = anyio.Lock()

    async def read(self) -> dict[str, Any] | None:
        try:
            line = await self.reader.receive_until(b"\n", MAX_FRAME)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError):
            return None
        return json.loads(line)

    async def send(self, frame: dict[str, Any]) -> None:
        data = encode(frame)
        async with self._send_lock:
            await self.stream.send(data)


# ------------------------------------------------------------------------------ owner side
class CallServer:
    """Accepts siblings on ``path`` and runs each call with ``handler(frame, pid)``."""

    def __init__(self, path: Path, token: Callable[[], str], handler: Handler) -> None:
        self.path = path
        self.token = token
        self.handler = handler
        self._listener: Any = None

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._listener = await anyio.create_unix_listener(self.path)
        os.chmod(self.path, 0o600)
        tg.start_soon(self._listener.serve, self._connection)

    async def aclose(self) -> None:
        if self._listener is not None:
            await self._listener.aclose()
        with contextlib.suppress(OSError):
            self.path.unlink()

    async def _connection(self, stream: SocketStream) -> None:
        from brain.process import owner as own

        async with stream:
            conn = _Framed(stream)
            with anyio.move_on_after(HANDSHAKE_TIMEOUT_S):
                hello = await conn.read()
            if not hello or not own.same_token(str(hello.get("token", "")), self.token()):
                return  # closing is the whole answer to a wrong token
            pid = int(hello.get("pid") or 0)
            await conn.send({"ok": True})
            async with anyio.create_task_group() as tg:
                while (frame := await conn.read()) is not None:
                    tg.start_soon(self._run, conn, frame, pid)
                tg.cancel_scope.cancel()  # the sibling went away: its calls have no reader

    async def _run(self, conn: _Framed, frame: dict[str, Any], pid: int) -> None:
        rid = frame.get("id")
        try:
            reply = {"id": rid, "result": await self.handler(frame, pid)}
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
            reply = {"id": rid, "error": str(exc) or type(exc).__name__}
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await conn.send(reply)


# ------------------------------------------------------------------------------ sibling side
class ChannelClosed(Exception):
    """The owner closed the channel (it died, or refused the token)."""


class CallError(Exception):
    """The owner ran the call and it failed (a tool error, bad arguments)."""


class CallClient:
    """One sibling's channel to the owner: many calls in flight, answers matched by id."""

    def __init__(self, conn: _Framed) -> None:
        self._conn = conn
        self._next = 0
        self._waiting: dict[Any, MemoryObjectSendStream[dict[str, Any]]] = {}
        self.closed = anyio.Event()

    @classmethod
    async def connect(cls, path: str, token: str) -> CallClient:
        stream = await anyio.connect_unix(path)
        conn = _Framed(stream)
        try:
            await conn.send({"token": token, "pid": os.getpid()})
            with anyio.fail_after(HANDSHAKE_TIMEOUT_S):
                ok = await conn.read()
        except BaseException:
            await stream.aclose()
            raise
        if not ok or not ok.get("ok"):
            await stream.aclose()
            raise ChannelClosed("the owner refused this process's token")
        return cls(conn)

    async def pump(self) -> None:
        """Deliver answers until the owner goes away; then fail every waiting call."""
        try:
            while (frame := await self._conn.read()) is not None:
                send = self._waiting.pop(frame.get("id"), None)
                if send is not None:
                    with contextlib.suppress(anyio.BrokenResourceError):
                        send.send_nowait(frame)
        finally:
            self.closed.set()
            for send in self._waiting.values():
                send.close()
            self._waiting.clear()
            with contextlib.suppress(Exception):
                await self._conn.stream.aclose()

    async def call(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send one call; its ``result`` (raises CallError, or ChannelClosed if the owner went
        away before answering)."""
        if self.closed.is_set():
            raise ChannelClosed("channel closed")
        self._next += 1
        rid = self._next
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](1)
        self._waiting[rid] = send
        try:
            try:
                await self._conn.send({**frame, "id": rid})
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise ChannelClosed(str(exc)) from exc
            try:
                reply = await receive.receive()
            except anyio.EndOfStream:
                raise ChannelClosed("the owner went away during the call") from None
        finally:
            self._waiting.pop(rid, None)
            receive.close()
        if "error" in reply:
            raise CallError(reply["error"])
        return reply["result"]

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._conn.stream.aclose()
