"""Tokens of a search result page, compact (the default) against full notes, on LoCoMo.

Each LoCoMo turn is added with ``add_memory(content)`` (no caller context), then every
question is asked through ``search_memory`` twice, once per ``detail``. The page is the text
an MCP client hands the model (the tool result's text content). Its characters and tokens
(the bundled model's tokenizer) are compared, and so is recall: compact hits must name the
same notes in the same order, or the saving is not a saving.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench import BenchContext, mcp_client
from bench.locomo import _ingest, load

TOP_K = 5


async def run(ctx: BenchContext) -> dict[str, Any]:
    convs = load(ctx.data / "locomo10.json")
    if ctx.quick:
        convs = convs[:2]
    brain = ctx.open_brain("tokens")
    count = ctx.embedder.count_tokens
    pages: dict[str, dict[str, list[float]]] = {
        d: {"chars": [], "tokens": []} for d in ("compact", "full")
    }
    hits_at_5 = {"compact": 0, "full": 0}
    same_ids = questions = 0
    try:
        async with mcp_client(brain) as client:
            t0 = time.perf_counter()
            maps: dict[int, dict[str, str]] = {}
            for conv in convs:
                ids = await _ingest(client, conv.project, [t.text for t in conv.turns])
                maps[conv.index] = dict(zip(ids, [t.dia_id for t in conv.turns], strict=True))
            ctx.log(f"tokens: {sum(len(m) for m in maps.values())} turns added in "
                    f"{time.perf_counter() - t0:.1f}s")
            for conv in convs:
                for q in conv.questions:
                    ranked: dict[str, list[str]] = {}
                    for detail in ("compact", "full"):
                        res = await client.call_tool("search_memory", {
                            "query": q.text, "project": conv.project, "top_k": TOP_K,
                            "detail": detail})
                        text = "".join(getattr(c, "text", "") for c in res.content)
                        pages[detail]["chars"].append(len(text))
                        pages[detail]["tokens"].append(count(text))
                        ids = [h["zk_id"] for h in (res.structured_content or {})["results"]]
                        ranked[detail] = ids
                        keys = {maps[conv.index].get(z) for z in ids}
                        hits_at_5[detail] += bool(keys & q.gold_turns)
                    questions += 1
                    same_ids += ranked["compact"] == ranked["full"]
    finally:
        brain.close()
    out: dict[str, Any] = {"questions": questions, "top_k": TOP_K,
                           "same_hits_share": round(same_ids / max(questions, 1), 4)}
    for detail, m in pages.items():
        out[detail] = {
            "chars_p50": statistics.median(m["chars"]),
            "tokens_p50": statistics.median(m["tokens"]),
            "tokens_mean": round(statistics.fmean(m["tokens"]), 1),
            "any@5": round(hits_at_5[detail] / max(questions, 1), 4),
        }
    out["token_ratio_p50"] = round(out["full"]["tokens_p50"] / max(out["compact"]["tokens_p50"], 1), 2)
    out["token_ratio_mean"] = round(
        out["full"]["tokens_mean"] / max(out["compact"]["tokens_mean"], 1), 2)
    ctx.log(f"tokens: {out}")
    return out
