"""Hook entry by file path: ``python -P <repo>/brain/hooks/run.py <event> ...``.

Installed hooks run this file rather than ``-m brain.hooks`` so that the agent's working
directory (often a project with its own ``brain`` package) never shadows ours: ``-P`` keeps
the cwd and this file's folder off ``sys.path``, and the repository root is put first.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from brain.hooks.client import main  # noqa: E402

raise SystemExit(main())
