"""How much an agent reads when it opens a session (issue 52): the characters of
open_session's answer and of the SessionStart hook's briefing, on one scripted brain (a
handoff, decisions, mistakes with their fixes, context notes, a pinned decision, fleeting
notes), through the in-process MCP client as an agent calls it.

    .venv/bin/python -m bench.session_open [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

DECISIONS = (
    "We chose Postgres over SQLite because several workers write concurrently",
    "API errors are returned as RFC 7807 problem documents, never as bare strings",
    "Background jobs run on the arq queue; celery was dropped for its broker footprint",
    "Feature flags live in the settings table and are read once per request",
    "Session tokens are rotated on every privilege change, not only at login",
)
MISTAKES = (
    ("alembic upgrade failed: DATABASE_URL was not set in the migration shell",
     "export DATABASE_URL from .env before alembic upgrade head (make migrate does it)"),
    ("pytest hung on the websocket test: the event loop fixture was session scoped",
     "give the websocket test its own function-scoped loop (pytest-asyncio loop_scope)"),
    ("docker build cache missed every time: COPY . came before pip install",
     "copy requirements.txt and pip install first, then COPY the sources"),
    ("the nightly export wrote naive datetimes and the BI import shifted them by an hour",
     None),
)
CONTEXT = (
    "The service is a FastAPI app deployed with docker compose on one VM per region",
    "Payments go through Stripe; webhooks land on /hooks/stripe and are idempotent by event id",
)
FLEETING = (
    "maybe cache the product list in redis for the landing page",
    "the admin search could use trigram indexes instead of ILIKE",
)
HANDOFF = {
    "objective": "add refunds to the checkout flow",
    "completed": ["refund model and migration", "POST /refunds with idempotency keys"],
    "blockers": ["Stripe test clock does not emit charge.refunded for partial refunds"],
    "next_steps": ["partial refunds", "refund emails", "admin refund button"],
    "key_files": ["shop/refunds.py", "shop/stripe_hooks.py", "migrations/0042_refunds.py"],
}


def seed(brain: Any) -> dict[str, Any]:
    """The scripted brain: every fact an opening should carry, with its note id."""
    m = brain.memory
    facts: dict[str, Any] = {"notes": {}, "handoff": HANDOFF}
    for text in CONTEXT:
        facts["notes"][m.add(text, "shop", note_kind="project_context").note["zk_id"]] = text
    for i, text in enumerate(DECISIONS):
        zk = m.add(text, "shop", note_kind="decision", pinned=i == 0).note["zk_id"]
        facts["notes"][zk] = text
    for i, (failure, fix) in enumerate(MISTAKES):
        zk = brain.mistakes.record_failure(failure, "shop", f"step-{i}: failed")["note"]["zk_id"]
        facts["notes"][zk] = failure
        if fix:
            fixed = brain.mistakes.record_resolution(zk, fix)["fix"]["zk_id"]
            facts["notes"][fixed] = fix
    for text in FLEETING:
        facts["notes"][m.add(text, "shop", memory_type="fleeting").note["zk_id"]] = text
    brain.sessions.close_session("shop", **HANDOFF)
    return facts


async def measure() -> dict[str, Any]:
    from fastmcp import Client

    from bench import open_brain
    from brain.embedding.registry import REGISTRY, build_embedder
    from brain.hooks.summary import render_session
    from mcp_server import create_server

    with tempfile.TemporaryDirectory() as tmp:
        brain = open_brain(Path(tmp), build_embedder(REGISTRY["offline/hash-384"]))
        try:
            facts = seed(brain)
            async with Client(create_server(brain=brain)) as client:
                opened = (await client.call_tool("open_session", {"project": "shop"})).data
        finally:
            brain.close()
    text = json.dumps(opened)
    return {
        "open_session_chars": len(text),
        "briefing_chars": len(render_session(opened, 1500)),
        "notes": len(facts["notes"]),
        "facts_present": sum(1 for t in facts["notes"].values() if t in text),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()
    out = asyncio.run(measure())
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
