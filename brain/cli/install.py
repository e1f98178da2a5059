"""``brain install|uninstall claude-code|opencode [--project DIR] [--dry-run]`` and ``brain hook``.

Install writes the MCP server entry and the memory hooks (Claude Code: command hooks in
settings.json; OpenCode: a plugin file) user-wide or for one project. It is idempotent (a
second run changes no byte), ``--dry-run`` prints the diff and writes nothing, and a manifest
next to the client's settings records what was added (and any entry it replaced), so
uninstall removes exactly that: a user's other hooks, servers and settings stay.

Where things go:

============  =====================================  ========================================
client        user-wide                              ``--project DIR``
============  =====================================  ========================================
claude-code   ~/.claude/settings.json (hooks),       DIR/.claude/settings.json (hooks),
              ~/.claude.json (mcpServers)            DIR/.mcp.json (mcpServers)
opencode      ~/.config/opencode/opencode.json,      DIR/opencode.json,
              ~/.config/opencode/plugins/...js       DIR/.opencode/plugins/opencode-brain.js
============  =====================================  ========================================
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brain import hooks
from brain.errors import InvalidArgument

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(hooks.__file__).resolve().parent / "run.py"
PLUGIN_TEMPLATE = Path(hooks.__file__).resolve().parent / "opencode_plugin.js"
SERVER_KEY = "brain"
MARKER = "brain/hooks/run.py"  # in every hook command we write: how uninstall knows ours
PLUGIN_MARKER = "// opencode-brain: memory on autopilot"
MANIFEST = "opencode-brain.install.json"
HOOK_TIMEOUT_S = 10  # Claude Code's outer bound; the hook's own deadline is at most 3 s
# Claude Code event -> (matcher or None, hook event)
CLAUDE_EVENTS: tuple[tuple[str, str | None, str], ...] = (
    ("SessionStart", None, "session-start"),
    ("UserPromptSubmit", None, "user-prompt"),
    # Bash: failures and their fixes; the file tools: what the turn read or edited, which a
    # note written in that turn cites (brain/citations/turns.py).
    ("PostToolUse", "Bash|Read|Edit|Write|MultiEdit|NotebookEdit", "post-tool"),
    ("PostToolUseFailure", "Bash", "post-tool"),
    ("PreCompact", None, "pre-compact"),
    ("SessionEnd", None, "session-end"),
)


@dataclass
class Options:
    home: Path
    user_id: str
    agent_id: str
    session_budget: int = hooks.SESSION_BUDGET_TOKENS
    prompt_budget: int = hooks.PROMPT_BUDGET_TOKENS
    floor: float = hooks.CONFIDENCE_FLOOR
    python: str = sys.executable
    env: dict[str, str] = field(default_factory=dict)  # --env KEY=VALUE, into the server entry

    def hook_args(self) -> list[str]:
        return [
            "--home", str(self.home), "--user-id", self.user_id, "--agent-id", self.agent_id,
            "--session-budget", str(self.session_budget),
            "--prompt-budget", str(self.prompt_budget), "--floor", str(self.floor),
        ]

    def hook_command(self, event: str) -> str:
        argv = [self.python, "-I", "-S", str(RUNNER), event, *self.hook_args()]
        return " ".join(shlex.quote(a) for a in argv)

    def server_env(self) -> dict[str, str]:
        return {"BRAIN__HOME": str(self.home), **self.env}


@dataclass
class Plan:
    """File contents before and after; None = absent."""

    files: dict[Path, tuple[str | None, str | None]] = field(default_factory=dict)

    def set(self, path: Path, after: str | None) -> None:
        before = self.files[path][0] if path in self.files else _read(path)
        self.files[path] = (before, after)

    def current(self, path: Path) -> str | None:
        return self.files[path][1] if path in self.files else _read(path)

    def changes(self) -> list[tuple[Path, str | None, str | None]]:
        return [(p, b, a) for p, (b, a) in self.files.items() if b != a]

    def diff(self) -> str:
        out: list[str] = []
        for path, before, after in self.changes():
            out += difflib.unified_diff(
                (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True),
                fromfile=str(path) if before is not None else "/dev/null",
                tofile=str(path) if after is not None else "/dev/null",
            )
        return "".join(out)

    def apply(self) -> None:
        for path, _before, after in self.changes():
            if after is None:
                path.unlink(missing_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.brain-tmp")
            tmp.write_text(after, encoding="utf-8")
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o777)
            os.replace(tmp, path)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _load(plan: Plan, path: Path) -> dict[str, Any]:
    text = plan.current(path)
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(
            f"{path} is not plain JSON ({exc}); fix it (or remove its comments) and run "
            "install again, or add the entries by hand (see README, Memory on autopilot)"
        ) from None
    if not isinstance(data, dict):
        raise InvalidArgument(f"{path} does not hold a JSON object; fix it and run again")
    return data


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


# ------------------------------------------------------------------------------ targets
@dataclass(frozen=True)
class Target:
    client: str
    hooks_file: Path | None  # Claude Code settings.json
    mcp_file: Path
    mcp_section: str  # "mcpServers" | "mcp"
    plugin_file: Path | None
    manifest: Path


def target(client: str, project: str | None) -> Target:
    home = Path.home()
    if client == "claude-code":
        base = Path(project).resolve() if project else None
        cdir = (base / ".claude") if base else home / ".claude"
        mcp = (base / ".mcp.json") if base else home / ".claude.json"
        return Target(client, cdir / "settings.json", mcp, "mcpServers", None, cdir / MANIFEST)
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "opencode"
    base = Path(project).resolve() if project else None
    cfg = (base / "opencode.json") if base else xdg / "opencode.json"
    pdir = (base / ".opencode") if base else xdg
    return Target(
        client, None, cfg, "mcp", pdir / "plugins" / "opencode-brain.js", pdir / MANIFEST
    )


def _server_entry(t: Target, o: Options) -> dict[str, Any]:
    server = str(ROOT / "mcp_server.py")
    if t.client == "claude-code":
        return {"type": "stdio", "command": o.python, "args": [server], "env": o.server_env()}
    return {"type": "local", "command": [o.python, server], "environment": o.server_env(),
            "enabled": True}


def _is_ours(group: Any) -> bool:
    return isinstance(group, dict) and any(
        isinstance(h, dict) and MARKER in str(h.get("command", ""))
        for h in group.get("hooks") or []
    )


def _claude_hooks(data: dict[str, Any], o: Options | None) -> None:
    """Put our hook groups in ``data["hooks"]`` (o given) or take them out (o None), leaving
    every other group where it is."""
    all_hooks = data.get("hooks")
    if all_hooks is None and o is None:
        return
    if not isinstance(all_hooks, dict):
        all_hooks = {}
    for name, matcher, event in CLAUDE_EVENTS:
        groups = list(all_hooks.get(name) or [])
        ours: dict[str, Any] | None = None
        if o is not None:
            ours = {"hooks": [{"type": "command", "command": o.hook_command(event),
                               "timeout": HOOK_TIMEOUT_S}]}
            if matcher is not None:
                ours = {"matcher": matcher, **ours}
        kept: list[Any] = []
        for g in groups:
            if not _is_ours(g):
                kept.append(g)
            elif ours is not None:
                kept.append(ours)  # in place of our previous group: a rerun moves nothing
                ours = None
        if ours is not None:
            kept.append(ours)
        if kept:
            all_hooks[name] = kept
        else:
            all_hooks.pop(name, None)
    if all_hooks:
        data["hooks"] = all_hooks
    else:
        data.pop("hooks", None)


def plan_install(t: Target, o: Options) -> Plan:
    plan = Plan()
    manifest = _load(plan, t.manifest)
    mcp = _load(plan, t.mcp_file)
    found = mcp.get(t.mcp_section)
    servers: dict[str, Any] = found if isinstance(found, dict) else {}
    entry = _server_entry(t, o)
    previous = manifest.get("replaced_server")
    if SERVER_KEY in servers and servers[SERVER_KEY] != entry and not manifest:
        previous = servers[SERVER_KEY]  # a user's own "brain" entry: put back at uninstall
    servers[SERVER_KEY] = entry
    mcp[t.mcp_section] = servers
    plan.set(t.mcp_file, _dump(mcp))
    if t.hooks_file is not None:
        settings = _load(plan, t.hooks_file)
        _claude_hooks(settings, o)
        plan.set(t.hooks_file, _dump(settings))
    if t.plugin_file is not None:
        plan.set(t.plugin_file, render_plugin(o))
    created = sorted(
        str(p) for p, (before, _after) in plan.files.items() if before is None
    ) if not manifest else manifest.get("created", [])
    record = {"client": t.client, "server_key": SERVER_KEY, "mcp_file": str(t.mcp_file),
              "hooks_file": str(t.hooks_file or ""), "plugin_file": str(t.plugin_file or ""),
              "replaced_server": previous, "created": created}
    plan.set(t.manifest, _dump(record))
    return plan


def plan_uninstall(t: Target) -> Plan:
    plan = Plan()
    manifest = _load(plan, t.manifest)
    created = set(manifest.get("created") or [])

    def put(path: Path, data: dict[str, Any]) -> None:
        plan.set(path, None if not data and str(path) in created else _dump(data))

    if t.hooks_file is not None and plan.current(t.hooks_file) is not None:
        settings = _load(plan, t.hooks_file)
        _claude_hooks(settings, None)
        put(t.hooks_file, settings)
    if plan.current(t.mcp_file) is not None and manifest:
        mcp = _load(plan, t.mcp_file)
        servers = mcp.get(t.mcp_section)
        if isinstance(servers, dict) and SERVER_KEY in servers:
            if manifest.get("replaced_server") is not None:
                servers[SERVER_KEY] = manifest["replaced_server"]
            else:
                del servers[SERVER_KEY]
            if not servers:
                del mcp[t.mcp_section]
        put(t.mcp_file, mcp)
    plugin = plan.current(t.plugin_file) if t.plugin_file is not None else None
    if t.plugin_file is not None and plugin is not None and plugin.startswith(PLUGIN_MARKER):
        plan.set(t.plugin_file, None)
    if plan.current(t.manifest) is not None:
        plan.set(t.manifest, None)
    return plan


def render_plugin(o: Options) -> str:
    text = PLUGIN_TEMPLATE.read_text(encoding="utf-8")
    deadline = max(hooks.DEADLINE_MS.values()) + 2000  # the hook's own, plus Python's start
    for key, value in (
        ("@PYTHON@", json.dumps(o.python)[1:-1]),
        ("@RUNNER@", json.dumps(str(RUNNER))[1:-1]),
        ("@ARGS@", json.dumps(o.hook_args())),
        ("@DEADLINE_MS@", str(deadline)),
    ):
        text = text.replace(key, value)
    return text


# ------------------------------------------------------------------------------ commands
def _options(args: argparse.Namespace) -> Options:
    from config import load_settings

    env = parse_env(getattr(args, "env", None) or [])
    s = load_settings()
    return Options(
        Path(s.home).expanduser().resolve(), s.identity.user_id, s.identity.agent_id,
        args.session_budget, args.prompt_budget, args.floor, env=env,
    )


_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def parse_env(pairs: list[str]) -> dict[str, str]:
    """``--env KEY=VALUE`` pairs for the server entry, each checked: a variable name, no
    secret (a client's config file is no place for one), no BRAIN__HOME (the install's own),
    and every BRAIN__ value one the settings accept. Raises InvalidArgument, writing nothing."""
    from config import ConfigInvalid, load_settings

    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise InvalidArgument(f"--env {pair!r} is not KEY=VALUE; write e.g. --env "
                                  f"BRAIN__PATHS__ALLOWED_ROOTS=/srv/code", env=pair)
        if key.upper() == "BRAIN__HOME":
            raise InvalidArgument("--env BRAIN__HOME: the install writes the data dir itself; "
                                  "set BRAIN__HOME in this shell before 'brain install'.")
        if any(w in key.upper() for w in _SECRET_WORDS):
            raise InvalidArgument(f"--env {key}: secrets are not written into a client's "
                                  "config file; set it in the environment the client starts "
                                  "from, or in the data dir's brain.toml.", env=key)
        out[key] = value
    given = {k: v for k, v in out.items() if k.startswith("BRAIN__")}
    if given:
        saved = {k: os.environ.get(k) for k in given}
        os.environ.update(given)
        try:
            load_settings()
        except ConfigInvalid as exc:
            raise InvalidArgument(f"--env: {exc}") from None
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return out


def _run(plan: Plan, dry_run: bool, what: str) -> int:
    changes = plan.changes()
    if not changes:
        print(f"brain: {what}: nothing to change")
        return 0
    if dry_run:
        print(plan.diff(), end="")
        print(f"brain: {what}: dry run, {len(changes)} file(s) would change")
        return 0
    plan.apply()
    for path, before, after in changes:
        verb = "removed" if after is None else "created" if before is None else "updated"
        print(f"brain: {what}: {verb} {path}")
    return 0


def _install(args: argparse.Namespace) -> int:
    t = target(args.client, args.project)
    return _run(plan_install(t, _options(args)), args.dry_run, f"install {args.client}")


def _uninstall(args: argparse.Namespace) -> int:
    t = target(args.client, args.project)
    return _run(plan_uninstall(t), args.dry_run, f"uninstall {args.client}")


def _hook(args: argparse.Namespace) -> int:
    from brain.hooks.entry import main

    return main([args.event, *args.rest])


def register(sub: Any) -> None:
    for name, func, text in (
        ("install", _install, "add the brain's MCP server and memory hooks to an agent"),
        ("uninstall", _uninstall, "remove what `brain install` added"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("client", choices=("claude-code", "opencode"))
        p.add_argument("--project", metavar="DIR", default=None,
                       help="this project only (default: user-wide)")
        p.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
        if name == "install":
            p.add_argument("--env", action="append", metavar="KEY=VALUE", default=None,
                           help="a variable for the server entry (repeat), e.g. "
                                "BRAIN__PATHS__ALLOWED_ROOTS=/srv/code")
            p.add_argument("--session-budget", type=int, default=hooks.SESSION_BUDGET_TOKENS,
                           help="tokens of context injected at session start")
            p.add_argument("--prompt-budget", type=int, default=hooks.PROMPT_BUDGET_TOKENS,
                           help="tokens of memories injected per prompt")
            p.add_argument("--floor", type=float, default=hooks.CONFIDENCE_FLOOR,
                           help="meaning similarity below which a memory is not injected")
        p.set_defaults(func=func)
    h = sub.add_parser("hook", help="run one memory hook (JSON on stdin); what install wires")
    h.add_argument("event", choices=hooks.EVENTS)
    h.add_argument("rest", nargs=argparse.REMAINDER)
    h.set_defaults(func=_hook)
