"""Memory on autopilot: lifecycle hooks for Claude Code and OpenCode.

A hook is a short-lived process the agent's client starts at a lifecycle event (session start,
prompt, tool result, compaction, session end). It reads the client's JSON on stdin, talks to
the running brain over the owner's call channel (``owner.calls.sock``) and prints what to
inject. It must never hurt the agent: a hard deadline, fail open (exit 0, nothing injected,
the reason logged to ``<home>/hooks.log``), no second store, no process left behind. With no
server on the data dir it appends to a spool (``<home>/hooks.spool.jsonl``, 0600) that the next
owner drains at start.

The hook side (``client``, ``events``, ``shape``, ``summary``) imports the standard library
only, so a hook starts in tens of milliseconds; ``drain`` runs inside the owner.
"""

# Defaults, defined once: the hook's flags and ``brain install``'s options both use these.
SESSION_BUDGET_TOKENS = 1500  # SessionStart: open_session context injected at most
PROMPT_BUDGET_TOKENS = 500  # UserPromptSubmit: relevant memories injected at most
CONFIDENCE_FLOOR = 0.35  # UserPromptSubmit: hits below this meaning similarity are dropped
DEADLINE_MS = {  # per event; the client's own timeout (seconds, in settings) is far above
    "session-start": 2500,
    "user-prompt": 1200,
    "post-tool": 1200,
    "pre-compact": 3000,
    "session-end": 3000,
    "stop": 3000,
}
EVENTS = tuple(DEADLINE_MS)
CHARS_PER_TOKEN = 4  # budget estimate without a tokenizer (the hook loads no model)
