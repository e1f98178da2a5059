"""``python -m brain.cli``: the ``brain`` command without the installed script."""

from brain.cli import main

raise SystemExit(main())
