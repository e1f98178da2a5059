"""``python -m brain.hooks <event>``: one hook run (see brain/hooks/entry.py)."""

from brain.hooks.entry import main

raise SystemExit(main())
