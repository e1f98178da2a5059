"""opencode-brain: persistent, linked memory for coding agents.

Scripts use :func:`open_brain` (brain/api.py); the agent uses the MCP server (mcp_server.py).
"""

from __future__ import annotations

# No imports here: every hook process loads this package, and typing alone costs it ~10 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from brain.api import ScriptBrain


def open_brain(home: Any = None, **kwargs: Any) -> ScriptBrain:
    """Connect a script to the brain: ``with open_brain() as brain: brain.add_memory(...)``.
    Imported on first use, so the package stays light for the hooks (see brain/api.py)."""
    from brain.api import open_brain as _open

    return _open(home, **kwargs)


__all__ = ["open_brain"]
