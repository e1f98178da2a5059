"""Tokens of a search result page, compact (the default) against full notes, on LoCoMo.

Each LoCoMo turn is added with ``add_memory(content)`` (no caller context), then every
question is asked through ``search_memory`` twice, once per ``detail``. The page is the text
an MCP client hands the model (the tool result's text content). Its characters and tokens
(the bundled model's tokenizer) are compared, and so is recall: compact hits must name the
same notes in the same order, or the saving is not a saving.

The relevance band's effect (``membership``): each question is also asked with the tool's
defaults (no top_k), where the band decides which hits belong (a clear single answer comes
alone, brain/search/presentation.py). "before" is the page of an explicit top_k 5 (what the default
page was before the band decided membership, and what an explicit top_k still gets); "after"
is the default page. Per half: tokens of the page and any@k (a gold turn among its hits).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench import BenchContext, mcp_client, splits
from bench.locomo import _ingest, load

TOP_K = 5
BANDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
# The band is chosen on dev: the smallest whose "single" answers are right at least this
# often (the single hit is a gold turn); reported on test.
BAND_PRECISION = 0.8


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
    half = splits.split_of("locomo")
    banded: list[tuple[str, list[float], bool]] = []  # (split, scores, top hit is gold)
    # (split, tokens, any gold, hits) of the explicit top_k page and of the default page
    member: dict[str, list[tuple[str, int, bool, int]]] = {"before": [], "after": []}
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
                        if detail == "compact":
                            scores = [float(h["score"]) for h in
                                      (res.structured_content or {})["results"]]
                            top = bool(ids) and maps[conv.index].get(ids[0]) in q.gold_turns
                            banded.append((half.get(conv.sample_id, ""), scores, top))
                            compact_row = (half.get(conv.sample_id, ""), count(text),
                                           bool(keys & q.gold_turns), len(ids))
                    res = await client.call_tool("search_memory", {
                        "query": q.text, "project": conv.project})  # the defaults: the band
                    text = "".join(getattr(c, "text", "") for c in res.content)
                    ids = [h["zk_id"] for h in (res.structured_content or {})["results"]]
                    gold = bool({maps[conv.index].get(z) for z in ids} & q.gold_turns)
                    member["after"].append((half.get(conv.sample_id, ""), count(text), gold,
                                            len(ids)))
                    member["before"].append(compact_row)
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
    out["band"] = band_table(banded)
    out["membership"] = membership(member)
    ctx.log(f"tokens: {out}")
    return out


def band_table(rows: list[tuple[str, list[float], bool]]) -> dict[str, Any]:
    """How often each band answers "single" and how often that single hit is a gold turn,
    per half; the band chosen on dev (see BAND_PRECISION)."""
    from brain.search.presentation import answer_band

    table: dict[str, dict[str, Any]] = {}
    for band in BANDS:
        for half in ("dev", "test"):
            mine = [(s, top) for h, s, top in rows if h == half]
            single = [top for s, top in mine if answer_band(s, band) == "single"]
            table.setdefault(f"{band:g}", {})[half] = {
                "single_share": round(len(single) / max(len(mine), 1), 4),
                "single_right": round(sum(single) / len(single), 4) if single else None,
                "questions": len(mine)}
    good = [b for b in BANDS
            if (table[f"{b:g}"]["dev"]["single_right"] or 0) >= BAND_PRECISION]
    chosen = min(good) if good else max(
        BANDS, key=lambda b: table[f"{b:g}"]["dev"]["single_right"] or 0)
    return {"rows": table, "chosen": chosen, "precision_goal": BAND_PRECISION}


def membership(rows: dict[str, list[tuple[str, int, bool, int]]]) -> dict[str, Any]:
    """Per half, the explicit top_k page ("before") against the default page, where the band
    decides membership ("after"): tokens p50 / mean, any@k, hits per page, single share."""
    out: dict[str, Any] = {}
    for half in ("dev", "test"):
        for when in ("before", "after"):
            mine = [r for r in rows[when] if r[0] == half]
            if not mine:
                continue
            out.setdefault(half, {})[when] = {
                "questions": len(mine),
                "tokens_p50": statistics.median(r[1] for r in mine),
                "tokens_mean": round(statistics.fmean(r[1] for r in mine), 1),
                "any@k": round(sum(r[2] for r in mine) / len(mine), 4),
                "hits_mean": round(statistics.fmean(r[3] for r in mine), 3),
                "single_share": round(sum(r[3] == 1 for r in mine) / len(mine), 4),
            }
    return out
