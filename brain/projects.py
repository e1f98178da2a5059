"""What a folder's project is called: the name of the git work tree above it, else the
folder's own name, each run of characters outside ``[A-Za-z0-9_.-]`` as one ``-``.

The hooks name a session's project this way (from its cwd), the stdio server a client's
workspace, and a source added without a project gets the same name, so an agent that passes
its project (AGENTS.md) reaches its own folder in ``fs_search``, its citations and its branch
scope. Standard library only, and no ``re``: a hook imports this on its few-ms start.
"""

from __future__ import annotations

import os

MAX_CHARS = 128
_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def clean(text: str) -> str:
    """Each run of characters outside [A-Za-z0-9_.-] becomes one "-"."""
    out: list[str] = []
    in_run = False
    for ch in text:
        if ch in _CHARS:
            out.append(ch)
            in_run = False
        elif not in_run:
            out.append("-")
            in_run = True
    return "".join(out)


def git_root(folder: str) -> str:
    """The git work tree at or above ``folder`` (a linked worktree's own folder), or ""."""
    parent = os.path.abspath(os.path.expanduser(folder or "."))
    while True:
        if os.path.exists(os.path.join(parent, ".git")):
            return parent
        up = os.path.dirname(parent)
        if up == parent:
            return ""
        parent = up


def of_folder(folder: str, fallback: str = "general") -> str:
    """The project of work done in ``folder``: its git work tree's name, else its own."""
    root = git_root(folder) or os.path.abspath(os.path.expanduser(folder or "."))
    name = clean(os.path.basename(root)).strip("-.")
    return (name or fallback)[:MAX_CHARS]
