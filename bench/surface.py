"""What the tool surface costs an agent's context on every turn, per profile (issue 32).

For each profile (``core``, the default, and ``full``) a fresh in-process server lists its
tools; the figures are the tool count, the tools/list JSON in characters (``json.dumps`` of
the listed tools, the measure issue 32's targets use, and the compact JSON the wire carries)
and its tokens by the bundled model's tokenizer, with the largest tools. AGENTS.md (what
users paste into their agent's instructions) and README.md are measured the same way.

``python -m bench --only surface`` runs this alone (seconds); the tokens part includes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import BenchContext, mcp_client

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("core", "full")


async def run(ctx: BenchContext) -> dict[str, Any]:
    count = ctx.embedder.count_tokens
    brain = ctx.open_brain("surface")
    out: dict[str, Any] = {"profiles": {}}
    try:
        for profile in PROFILES:
            async with mcp_client(brain, profile) as client:
                listed = await client.session.list_tools()
            tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                     for t in listed.tools]
            text = json.dumps(tools)
            sizes = sorted(((len(json.dumps(t)), t["name"]) for t in tools), reverse=True)
            out["profiles"][profile] = {
                "tools": len(tools),
                "chars": len(text),
                "wire_chars": len(json.dumps(tools, separators=(",", ":"))),
                "tokens": count(text),
                "largest": [{"tool": n, "chars": c} for c, n in sizes[:3]],
            }
    finally:
        brain.close()
    for name in ("AGENTS.md", "README.md"):
        doc = (ROOT / name).read_text(encoding="utf-8")
        out[name] = {"chars": len(doc), "tokens": count(doc)}
    ctx.log(f"surface: {json.dumps(out)}")
    return out


def section(s: dict[str, Any]) -> list[str]:
    """The report's table of the surface (bench/report.py)."""
    lines = [
        "## The tool surface",
        "",
        "What the server's tools/list costs an agent on every turn (`python -m bench --only "
        "surface`): characters of the listed tools' JSON (`json.dumps`, spaces included; the "
        "wire's compact JSON beside it) and tokens by the bundled model's tokenizer.",
        "",
        "| profile | tools | chars | wire chars | tokens | largest |",
        "|---|---|---|---|---|---|",
    ]
    for profile, p in s["profiles"].items():
        largest = ", ".join(f"{x['tool']} {x['chars']:,}" for x in p["largest"])
        lines.append(f"| {profile} | {p['tools']} | {p['chars']:,} | {p['wire_chars']:,} | "
                     f"{p['tokens']:,} | {largest} |")
    for name in ("AGENTS.md", "README.md"):
        lines.append(f"\n{name}: {s[name]['chars']:,} characters, {s[name]['tokens']:,} tokens.")
    return lines + [""]
