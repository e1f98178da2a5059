"""Tools that fold a family of admin actions into one (``health``, ``sources``, ``changes``,
``fs``, ``files``, ``model``): each takes ``action`` and the union of its actions' arguments.

:func:`check` keeps the union honest: an argument given (not at its default) to an action
that does not use it is refused with ``INVALID_ARGUMENT`` naming the actions it belongs to,
and an action's required argument that is missing is refused naming it, so a wrong call
changes nothing and says how to fix it.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from mcp_surface.tool_errors import CodedToolError

Uses = Mapping[str, frozenset[str]]


# A tool's argument defaults, read once per tool function. Weak keys: every server builds
# its own closures, and a cache holding them would keep every server a test made alive.
_DEFAULTS: weakref.WeakKeyDictionary[Callable[..., Any], dict[str, Any]] = (
    weakref.WeakKeyDictionary())


def _defaults(fn: Callable[..., Any]) -> dict[str, Any]:
    found = _DEFAULTS.get(fn)
    if found is None:
        found = _DEFAULTS[fn] = {
            name: p.default for name, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}
    return found


def uses(**actions: str) -> dict[str, frozenset[str]]:
    """``uses(gc="dry_run project")``: each action and the arguments it takes."""
    return {action: frozenset(names.split()) for action, names in actions.items()}


def check(tool: str, fn: Callable[..., Any], args: Mapping[str, Any], used: Uses,
          needs: Uses | None = None) -> None:
    """Refuse arguments ``args["action"]`` does not use, and its missing required ones."""
    action = args["action"]
    union = frozenset().union(*used.values())
    for name, default in _defaults(fn).items():
        if name not in union or name in used[action] or args.get(name) == default:
            continue
        owners = sorted(a for a, names in used.items() if name in names)
        raise CodedToolError(
            "INVALID_ARGUMENT",
            f"{name} does not apply to {tool}(action={action!r}); it is for action "
            f"{' / '.join(owners) or 'none'}",
            {"field": name, "action": action})
    for name in sorted((needs or {}).get(action, ())):
        if args.get(name) in (None, ""):
            raise CodedToolError(
                "INVALID_ARGUMENT", f"{tool}(action={action!r}) needs {name}",
                {"field": name, "action": action})
