"""Hook entry by file path: ``python -I -S <repo>/brain/hooks/run.py <event> ...``.

Installed hooks run this file rather than ``-m brain.hooks`` so that the agent's working
directory (often a project with its own ``brain`` package) never shadows ours: ``-I -S`` keeps
the cwd, this file's folder and site-packages off ``sys.path`` (the hook needs the standard
library only, and site's import hooks cost more than the hook itself); the repository root is
put first.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))

from brain.hooks.entry import main  # noqa: E402

raise SystemExit(main())
