"""``brain serve [--http]``: start the MCP server.

The one place the product reaches up into the tool layer: the command line sits in
``brain/`` (it is the installed ``brain`` script), while the server it launches lives above
it in ``mcp_server.py``. The import is made when the command runs, by name, so nothing else of
``brain/`` loads the MCP framework; ``tests/house/test_layering.py`` lists it as the only known
upward import.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
from typing import Any

from brain.process.ports import DEFAULT_HOST, DEFAULT_PORT, port_free


class _CancelledShutdown(logging.Filter):
    """Ctrl-C on ``brain serve --http``: uvicorn shuts down cleanly, then the interrupt
    cancels the ASGI lifespan, whose shutdown reports the cancellation as an error whose text
    is a traceback ending in ``CancelledError``. That is the interrupt, not a failure: the
    command's one ``[INTERRUPTED]`` line says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage().rstrip()
        return not (text.startswith("Traceback") and text.endswith(
            ("CancelledError", "KeyboardInterrupt")))


def _serve(args: argparse.Namespace) -> int:
    if args.http:
        port_free(args.host or DEFAULT_HOST, DEFAULT_PORT if args.port is None else args.port)
        logging.getLogger("uvicorn.error").addFilter(_CancelledShutdown())
    mcp_server = importlib.import_module("mcp_server")
    argv = ["--http"] if args.http else []
    if args.host:
        argv += ["--host", args.host]
    if args.port is not None:
        argv += ["--port", str(args.port)]
    mcp_server.main(argv)
    return 0


def _ui(args: argparse.Namespace) -> int:
    """``brain ui``: the web explorer, served by the process that owns the data dir
    (webui/run.py, started through mcp_server like ``serve``)."""
    if args.port is not None:
        os.environ["BRAIN__UI__PORT"] = str(args.port)
    importlib.import_module("mcp_server").main(["--ui"])
    return 0


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="start the MCP server (stdio by default)")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead")
    serve.add_argument("--host", default=None, help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="HTTP port (default 8765)")
    serve.set_defaults(func=_serve)
    ui = sub.add_parser("ui", help="the web explorer on loopback (prints a one-time login URL)")
    ui.add_argument("--port", type=int, default=None, help="port (default [ui] port, 8766)")
    ui.set_defaults(func=_ui)
