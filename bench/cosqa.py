"""CoSQA (dev) code search: web queries against Python functions.

Protocol (../shared/bench/README.md): the corpus is every distinct ``code`` (552), stored as
memories through add_memory; each label-1 item (313) is a search_memory query whose gold is
its own code. R@1, R@5, R@10 and MRR@10.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bench import BenchContext, call, mcp_client, set_fusion, tool_names, tool_runs

PROJECT = "cosqa"


def load(path: Path) -> tuple[list[str], list[tuple[str, int]]]:
    """(corpus of distinct codes, [(query, index of its gold code)])."""
    items = json.loads(Path(path).read_text(encoding="utf-8"))
    corpus = list(dict.fromkeys(it["code"] for it in items))
    index = {code: i for i, code in enumerate(corpus)}
    queries = [(it["doc"], index[it["code"]]) for it in items if int(it["label"]) == 1]
    return corpus, queries


class Ranking:
    def __init__(self) -> None:
        self.ranks: list[int | None] = []
        self.latency_ms: list[float] = []

    def add(self, ranked: list[Any], gold: Any) -> None:
        self.ranks.append(ranked.index(gold) + 1 if gold in ranked else None)

    def table(self) -> dict[str, float]:
        n = len(self.ranks) or 1
        out: dict[str, float] = {}
        for k in (1, 5, 10):
            out[f"R@{k}"] = round(sum(1 for r in self.ranks if r and r <= k) / n, 4)
        out["MRR@10"] = round(sum(1 / r for r in self.ranks if r and r <= 10) / n, 4)
        out["n"] = len(self.ranks)
        return out


async def run(ctx: BenchContext, systems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    corpus, queries = load(ctx.data / "cosqa-dev.json")
    brain = ctx.open_brain("cosqa")
    results: dict[str, Any] = {}
    try:
        async with mcp_client(brain) as client:
            deep = ctx.deep and "deep_search" in await tool_names(client)
            t0 = time.perf_counter()
            id_of: dict[str, int] = {}
            for i, code in enumerate(corpus):
                res = await call(client, "add_memory", {"content": code, "project": PROJECT})
                id_of[res["note"]["zk_id"]] = i
            ingest_s = time.perf_counter() - t0
            ctx.log(f"cosqa: {len(corpus)} codes added via add_memory in {ingest_s:.1f}s")
            runs = tool_runs(systems, deep)
            default_cfg = brain.memory.cfg
            for name, tool, cfg in runs:
                brain.memory.cfg = default_cfg
                set_fusion(brain, **cfg)
                rk = Ranking()
                for query, gold in queries:
                    t = time.perf_counter()
                    res = await call(
                        client, tool, {"query": query, "project": PROJECT, "top_k": 10}
                    )
                    rk.latency_ms.append((time.perf_counter() - t) * 1000)
                    hits = res.get("results") or res.get("notes") or res.get("hits") or []
                    rk.add([id_of.get(h["zk_id"]) for h in hits], gold)
                results[name] = rk.table()
                ctx.log(f"cosqa {name}: " + " ".join(f"{k}={v}" for k, v in results[name].items()))
            brain.memory.cfg = default_cfg
    finally:
        brain.close()
    return {
        "corpus": len(corpus),
        "queries": len(queries),
        "ingest_s": round(ingest_s, 1),
        "systems": results,
    }
