"""Derive a file's category from its path and content, plus a whitelisted frontmatter capture.

Contribution layouts (skills, rules, instructions, agents, commands, identity files) match at
the source root and inside well-known tool directories (``.claude/agents/x.md``). Markdown
under agents/, rules/, instructions/, docs/ and ``*.agent.md`` keep their contribution
category only when their frontmatter carries ``id`` or ``name``; otherwise they are plain docs.

Package manifests (package.json, plugin.json, manifest.json, pyproject.toml, Cargo.toml)
carry a usability flag (:func:`manifest_fields`): usable when their content declares a
recognized package shape. (The agent-core owner marker is brain/trust/tenancy.py's.)
"""

from __future__ import annotations

import re
from typing import Any

CATEGORIES = (
    "skills",
    "rules",
    "instructions",
    "agents",
    "commands",
    "contribution",
    "docs",
    "conversation",
    "config",
    "code",
    "other",
)

TOOL_DIRS = frozenset(
    {".claude", ".cursor", ".codex", ".gemini", ".github", ".opencode", ".windsurf", ".agents"}
)
IDENTITY_FILES = frozenset(
    {
        "agents.md",
        "claude.md",
        "gemini.md",
        ".cursorrules",
        ".windsurfrules",
        "copilot-instructions.md",
        "contributing.md",
    }
)
_MARKDOWN = (".md", ".markdown", ".mdx")
_DOC_TEXT = (*_MARKDOWN, ".rst", ".txt", ".adoc")
_CONFIG_EXT = frozenset({".toml", ".yaml", ".yml", ".json", ".ini", ".cfg", ".conf", ".jsonc"})
_CONFIG_NAMES = frozenset({"dockerfile", "makefile", "containerfile", "justfile", "procfile"})
_CODE_EXT = frozenset(
    [
        ".py",
        ".pyi",
        ".js",
        ".jsx",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".mts",
        ".cts",
        ".go",
        ".rs",
        ".java",
        ".kt",
        ".kts",
        ".scala",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hpp",
        ".hh",
        ".cs",
        ".fs",
        ".rb",
        ".php",
        ".swift",
        ".m",
        ".mm",
        ".lua",
        ".pl",
        ".pm",
        ".r",
        ".jl",
        ".dart",
        ".ex",
        ".exs",
        ".erl",
        ".hs",
        ".ml",
        ".mli",
        ".clj",
        ".cljs",
        ".elm",
        ".vue",
        ".svelte",
        ".astro",
        ".sh",
        ".bash",
        ".zsh",
        ".fish",
        ".ps1",
        ".sql",
        ".zig",
        ".nim",
        ".v",
        ".sv",
        ".vhd",
        ".html",
        ".htm",
        ".css",
        ".scss",
        ".sass",
        ".less",
        ".proto",
        ".graphql",
        ".gql",
        ".tf",
        ".hcl",
        ".cmake",
        ".gradle",
        ".groovy",
        ".bat",
        ".cmd",
        ".asm",
        ".s",
        ".sol",
        ".wgsl",
        ".glsl",
        ".ipynb",
    ]
)
CAPTURE_KEYS = ("id", "name", "title", "description", "required_features", "credential_ids")
_MAX_FRONTMATTER = 64 * 1024
_MAX_VALUE = 1000


def categorize(rel_posix: str, text: str | None) -> tuple[str, dict[str, Any]]:
    """Return ``(category, capture)``; capture is empty unless an admitted markdown has one."""
    parts = [p for p in rel_posix.strip("/").split("/") if p]
    if not parts:
        return "other", {}
    name = parts[-1]
    lower = name.lower()
    # Layout is read from the deepest tool dir, else from the source root.
    base = max((i + 1 for i, p in enumerate(parts[:-1]) if p.lower() in TOOL_DIRS), default=0)
    sub = [p.lower() for p in parts[base:-1]]
    dirs = [p.lower() for p in parts[:-1]]
    is_md = lower.endswith(_MARKDOWN)

    fixed = _identity_category(lower, sub, is_md)
    if fixed is not None:
        return fixed, _capture(text) if is_md else {}
    gated = _gated_category(lower, sub, dirs, is_md)
    if gated is not None:
        capture = _capture(text)
        if capture.get("id") or capture.get("name"):
            return gated, capture
        return "docs", {}
    return _plain_category(lower, dirs), {}


def _identity_category(lower: str, sub: list[str], is_md: bool) -> str | None:
    """Filename-identity forms: always admitted, no frontmatter needed."""
    if lower == "skill.md" or (is_md and sub[:1] in (["skills"], ["skill"])):
        return "skills"
    if lower in IDENTITY_FILES:
        return "contribution"
    if lower.endswith(".mdc"):
        return "rules"
    if is_md and sub[:1] in (["commands"], ["command"]):
        return "commands"
    return None


def _gated_category(lower: str, sub: list[str], dirs: list[str], is_md: bool) -> str | None:
    """Forms that need frontmatter ``id`` or ``name`` to keep their category."""
    if not is_md:
        return None
    if lower.endswith(".agent.md") or sub[:1] in (["agents"], ["agent"]):
        return "agents"
    if sub[:1] in (["rules"], ["rule"]):
        return "rules"
    if sub[:1] in (["instructions"], ["instruction"]):
        return "instructions"
    if "docs" in dirs or "doc" in dirs:
        return "docs"
    return None


def _plain_category(lower: str, dirs: list[str]) -> str:
    suffix = "." + lower.rsplit(".", 1)[-1] if "." in lower.lstrip(".") else ""
    if lower.endswith(_MARKDOWN) or lower.endswith(".rst") or lower.startswith("readme"):
        return "docs"
    if lower.endswith(_DOC_TEXT) and ("docs" in dirs or "doc" in dirs):
        return "docs"
    if suffix in (".jsonl", ".ndjson"):
        return "conversation"
    if suffix in _CONFIG_EXT or lower in _CONFIG_NAMES or lower.startswith("dockerfile"):
        return "config"
    if suffix in _CODE_EXT:
        return "code"
    return "other"


# -- manifests ---------------------------------------------------------------------------

MANIFESTS = frozenset({"package.json", "plugin.json", "manifest.json", "marketplace.json",
                       "pyproject.toml", "cargo.toml"})
_PLUGIN_PARTS = ("commands", "agents", "skills", "hooks", "mcpServers", "rules", "plugins")


def manifest_fields(rel_posix: str, text: str | None) -> dict[str, Any]:
    """``{manifest_usable, manifest_shape}`` for a package manifest, else ``{}``. Usable
    means the content declares a recognized package shape: npm (name and version), an agent
    plugin or marketplace (a name and what it contributes), a web-extension style manifest
    (name and version or manifest_version), a Python project or a Cargo package (a name)."""
    name = rel_posix.rsplit("/", 1)[-1].lower()
    if name not in MANIFESTS:
        return {}
    shape = _shape(name, text or "")
    return {"manifest_usable": shape is not None, "manifest_shape": shape or ""}


def _shape(name: str, text: str) -> str | None:
    if name.endswith(".toml"):
        import tomllib

        try:
            data = tomllib.loads(text[:_MAX_FRONTMATTER * 16])
        except (tomllib.TOMLDecodeError, ValueError):
            return None
        table = data.get("project" if name == "pyproject.toml" else "package")
        ok = isinstance(table, dict) and isinstance(table.get("name"), str)
        return ("python" if name == "pyproject.toml" else "cargo") if ok else None
    import json

    try:
        data = json.loads(text[:_MAX_FRONTMATTER * 16])
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    if name == "package.json":
        return "npm" if isinstance(data.get("version"), str) else None
    if name in ("plugin.json", "marketplace.json"):
        return "plugin" if any(k in data for k in _PLUGIN_PARTS) or "version" in data else None
    has_version = isinstance(data.get("version"), str) or "manifest_version" in data
    return "manifest" if has_version else None


# -- frontmatter -------------------------------------------------------------------------

_FM_RE = re.compile(
    r"\A(?:\ufeff)?---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL
)


def parse_frontmatter(text: str | None) -> dict[str, Any]:
    """Parse a leading ``---`` YAML block; any malformed input yields ``{}``, never raises."""
    if not text:
        return {}
    match = _FM_RE.match(text[:_MAX_FRONTMATTER])
    if not match:
        return {}
    body = match.group(1)
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is optional
        return _simple_yaml(body)
    try:
        data = yaml.safe_load(body)
    except Exception:  # noqa: BLE001 - any YAML failure means "no frontmatter"
        return _simple_yaml(body)
    return data if isinstance(data, dict) else {}


def _capture(text: str | None) -> dict[str, Any]:
    data = parse_frontmatter(text)
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = re.sub(r"(?<!^)(?=[A-Z])", "_", str(raw_key)).lower().replace("-", "_")
        if key in CAPTURE_KEYS and key not in out:
            clean = _clean_value(value)
            if clean not in (None, "", []):
                out[key] = clean
    return out


def _clean_value(value: Any) -> str | list[str] | None:
    if isinstance(value, (list, tuple)):
        return [str(v)[:_MAX_VALUE] for v in value if isinstance(v, (str, int, float))][:100]
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value).strip()[:_MAX_VALUE]
    return None


def _simple_yaml(body: str) -> dict[str, Any]:
    """Tiny fallback: ``key: value``, ``key: [a, b]`` and ``- item`` lists."""
    out: dict[str, Any] = {}
    current: str | None = None
    for line in body.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = re.match(r"\s+-\s+(.*)$", line) or re.match(r"-\s+(.*)$", line)
        if item and current is not None and isinstance(out.get(current), list):
            out[current].append(_unquote(item.group(1)))
            continue
        kv = re.match(r"([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if not kv:
            continue
        current, value = kv.group(1), kv.group(2).strip()
        if not value:
            out[current] = []
        elif value.startswith("[") and value.endswith("]"):
            out[current] = [_unquote(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            out[current] = _unquote(value)
    return out


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
