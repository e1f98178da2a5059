"""Regenerate the settings table in README.md and the whole .env.example from config.py.

python tools/render_docs.py          # rewrite both
python tools/render_docs.py --check  # exit 1 when either is out of date
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from config import render_env_example, render_settings_table  # noqa: E402

START, END = "<!-- settings-table:start -->", "<!-- settings-table:end -->"


def rendered_readme(text: str) -> str:
    block = f"{START}\n{render_settings_table()}\n{END}"
    return re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: block, text, flags=re.S)


def main() -> int:
    readme, env = ROOT / "README.md", ROOT / ".env.example"
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
