"""``python -m brain.hooks <event>``: one hook run (see brain/hooks/client.py)."""

from brain.hooks.client import main

raise SystemExit(main())
