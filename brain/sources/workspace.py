"""The workspace a client already names: which folder becomes its project's source.

A stdio client (Claude Code, OpenCode) announces its workspace as MCP roots, and starts the
server in the project's folder. ``[sources] workspace = auto`` turns that into a source on
the first tool call (mcp_surface/workspace.py asks; SourcesService.ensure_workspace adds it
within the caller's allowed roots). This module only decides which folders qualify:

- a root is a ``file://`` URI of an existing folder; the filesystem root, the user's home
  and any folder above it never qualify (a client started in ``~`` names all of it);
- without roots, the folder the server started in qualifies when it lies in a git work
  tree: the work tree's top becomes the source.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import unquote, urlparse

from brain import projects

MAX_ROOTS = 4  # a client naming more is not naming one workspace


def too_wide(real: str) -> bool:
    """The filesystem root, the user's home, or a folder holding it."""
    home = os.path.realpath(os.path.expanduser("~"))
    return real == os.sep or home == real or home.startswith(real.rstrip(os.sep) + os.sep)


def from_roots(uris: Iterable[str]) -> list[str]:
    """The folders of a client's ``file://`` roots that may become sources."""
    found: list[str] = []
    for uri in list(uris)[:MAX_ROOTS]:
        parsed = urlparse(str(uri))
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            continue
        real = os.path.realpath(unquote(parsed.path))
        if os.path.isdir(real) and not too_wide(real) and real not in found:
            found.append(real)
    return found


def git_top(start: str) -> str | None:
    """The top of the git work tree holding ``start`` (a ``.git`` folder or file), if any."""
    top = projects.git_root(os.path.realpath(start))
    return None if not top or too_wide(top) else top
