"""A session opening carries each fact once (issue 52): the handoff once (its fields, not the
two notes that render them), each note once whatever sections it belongs to, fixes under
their mistakes, an inbox note already shown listed by id only."""

from __future__ import annotations

import json
from typing import Any

from bench.session_open import DECISIONS, FLEETING, HANDOFF, seed
from brain.app import Brain


async def test_open_session_carries_each_fact_once(brain: Brain, client: Any) -> None:
    facts = seed(brain)
    opened = (await client.call_tool("open_session", {"project": "shop"})).data
    text, context = json.dumps(opened), json.dumps(opened["context"])
    for zk_id, fact in facts["notes"].items():
        assert text.count(json.dumps(fact)) == 1, fact  # the text once, as a whole string
        assert context.count(f'"{zk_id}"') <= 1, zk_id
    for name in ("objective", "completed", "blockers", "next_steps", "key_files"):
        assert opened["context"]["handoff"][name] == HANDOFF[name]
    for item in (*HANDOFF["completed"], *HANDOFF["next_steps"], *HANDOFF["key_files"]):
        assert text.count(json.dumps(item)) == 1, item
    ctx = opened["context"]
    # Fixes under their mistakes, none left over; the pinned decision among the decisions.
    fixed = [m for m in ctx["recent_mistakes"] if m.get("fixes")]
    assert len(fixed) == 3 and ctx["recent_fixes"] == []
    assert [d["content"] for d in ctx["recent_decisions"] if d.get("pinned")] == [DECISIONS[0]]
    assert ctx["pinned"] == []
    # The failure still fleeting (no fix yet) is in the inbox by id and age only.
    inbox = {n["zk_id"]: n for n in opened["inbox"]["notes"]}
    assert opened["inbox"]["count"] == len(inbox) == 3
    shown_whole = sorted(n["content"] for n in inbox.values() if "content" in n)
    assert shown_whole == sorted(FLEETING)
    [by_id] = [n for n in inbox.values() if "content" not in n]
    assert set(by_id) == {"zk_id", "age_days"} and f'"{by_id["zk_id"]}"' in context
    in_context = sum(context.count(f'"{z}"') for z in facts["notes"])
    assert in_context == len(facts["notes"]) - len(FLEETING)  # the fleeting ones: inbox only


async def test_a_note_outside_the_listed_sections_is_pinned_once(brain: Brain,
                                                                  client: Any) -> None:
    zk = brain.memory.add("Never run migrations against prod without a snapshot", "shop",
                          pinned=True).note["zk_id"]
    ctx = (await client.call_tool("get_session_context", {"project": "shop"})).data
    assert [p["zk_id"] for p in ctx["pinned"]] == [zk] and ctx["pinned"][0]["pinned"] is True
    assert ctx["handoff"] is None
