"""Regenerate the settings table in docs/configuration.md and the whole .env.example from
config.py.

python tools/render_docs.py          # rewrite both
python tools/render_docs.py --check  # exit 1 when either is out of date
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, get_args, get_origin

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel, SecretStr  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402

from config import ENV_PREFIX, LEGACY_ALIASES, Settings, _default_workers  # noqa: E402

START, END = "<!-- settings-table:start -->", "<!-- settings-table:end -->"


def iter_settings_table() -> list[tuple[str, str, str]]:
    """(env variable, default, description) of every leaf setting, for docs and tests."""
    rows: list[tuple[str, str, str]] = []
    for name, field in Settings.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            for sub, subfield in ann.model_fields.items():
                env = f"{ENV_PREFIX}{name.upper()}__{sub.upper()}"
                entry = _entry_model(subfield.annotation)
                if entry is not None:  # a registry (dict of entries): one row per entry field
                    for n, (key, keyfield) in enumerate(entry.model_fields.items()):
                        about = f"{subfield.description}. " if n == 0 else ""
                        rows.append((f"{env}__<ID>__{key.upper()}", _default(keyfield),
                                     f"{about}{sub} entry: {keyfield.description or ''}"))
                    continue
                rows.append((env, _default(subfield), subfield.description or ""))
        elif name == "workers":
            for wname in _default_workers():
                for sub in ("ENABLED", "INTERVAL_S"):
                    env = f"{ENV_PREFIX}WORKERS__{wname.upper()}__{sub}"
                    rows.append((env, "", f"worker {wname}: {sub.lower()}"))
        else:
            rows.append((f"{ENV_PREFIX}{name.upper()}", str(field.default), field.description or ""))
    return rows


def _default(field: Any) -> str:
    if field.default_factory is not None:
        return repr(field.default_factory())
    default = field.default
    if isinstance(default, SecretStr):  # a secret's default is empty: show it so
        default = default.get_secret_value()
    return "" if default is PydanticUndefined else repr(default)


def _entry_model(annotation: Any) -> type[BaseModel] | None:
    """The entry model of a ``dict[str, Model]`` setting (an endpoint registry), else None."""
    if get_origin(annotation) is not dict:
        return None
    value = get_args(annotation)[1]
    return value if isinstance(value, type) and issubclass(value, BaseModel) else None


def render_env_example() -> str:
    """The text of ``.env.example``: every setting, commented out at its default."""
    out = [
        "# opencode-brain settings. Copy to .env and uncomment what you change.",
        "# Generic form: BRAIN__SECTION__FIELD (also settable in brain.toml as [section] field).",
        "",
    ]
    section = ""
    for env, default, desc in iter_settings_table():
        parts = env.split("__")
        sec = parts[1] if len(parts) > 2 else "general"
        if sec != section:
            section = sec
            out += ["", f"# ---- [{sec.lower()}]"]
        value = default.strip("'") if default not in ("None", "''") else ""
        out.append(f"# {desc}" if desc else f"# {env}")
        out.append(f"# {env}={value}")
    out += [
        "",
        "# ---- Legacy OpenCode Brain names (accepted as aliases of the fields above)",
        "# QDRANT_HOST=localhost        # with QDRANT_PORT: a Qdrant server instead of the embedded store",
        "# QDRANT_PORT=6333",
    ]
    for name, (sec, field) in LEGACY_ALIASES.items():
        out.append(f"# {name}=                      # = BRAIN__{sec.upper()}__{field.upper()}")
    return "\n".join(out) + "\n"


def render_settings_table() -> str:
    """docs/configuration.md's settings table (markdown), from the fields' descriptions."""
    rows = ["| Variable | Default | What it does |", "|---|---|---|"]
    for env, default, desc in iter_settings_table():
        shown = default.strip("'") if default not in ("None", "''", "") else ""
        rows.append(f"| `{env}` | `{shown}` | {desc} |" if shown else f"| `{env}` | | {desc} |")
    return "\n".join(rows)


def rendered_readme(text: str) -> str:
    block = f"{START}\n{render_settings_table()}\n{END}"
    return re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: block, text, flags=re.S)


def main() -> int:
    readme, env = ROOT / "docs" / "configuration.md", ROOT / ".env.example"
    new_readme, new_env = rendered_readme(readme.read_text()), render_env_example()
    if "--check" in sys.argv:
        stale = [
            p.name for p, new in ((readme, new_readme), (env, new_env)) if p.read_text() != new
        ]
        if stale:
            print(f"out of date: {', '.join(stale)}; run python tools/render_docs.py")
            return 1
        return 0
    readme.write_text(new_readme)
    env.write_text(new_env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
