"""CoSQA (dev) code search: web queries against Python functions.

Protocol (../shared/bench/README.md): the corpus is every distinct ``code`` (552); each
label-1 item (313) is a query whose gold is its own code. R@1, R@5, R@10 and MRR@10, on
the full set and on the dev / test halves of the queries (bench/splits.json).

Three ways in, the same queries (issue 17 asks the three searches to rank alike):
- notes: each code stored with add_memory, queried with search_memory (every system row);
- documents: each code uploaded with ingest_file, queried with search_files;
- a source folder: each code a ``.py`` file of a folder added with add_source, queried with
  fs_search (semantic).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio

from bench import BenchContext, call, tool_names, tool_runs
from bench.splits import split_of

PROJECT = "cosqa"
FILE_ROWS = ("search_files (uploaded documents)", "fs_search semantic (source folder)")


def load(path: Path) -> tuple[list[str], list[tuple[str, int, str]]]:
    """(corpus of distinct codes, [(query, index of its gold code, query id)])."""
    items = json.loads(Path(path).read_text(encoding="utf-8"))
    corpus = list(dict.fromkeys(it["code"] for it in items))
    index = {code: i for i, code in enumerate(corpus)}
    queries = [(it["doc"], index[it["code"]], str(it.get("idx", n)))
               for n, it in enumerate(items) if int(it["label"]) == 1]
    return corpus, queries


class Ranking:
    def __init__(self) -> None:
        self.ranks: dict[str, list[int | None]] = {"all": [], "dev": [], "test": []}
        self.latency_ms: list[float] = []

    def add(self, ranked: list[Any], gold: Any, split: str | None = None) -> None:
        rank = ranked.index(gold) + 1 if gold in ranked else None
        self.ranks["all"].append(rank)
        if split:
            self.ranks[split].append(rank)

    @staticmethod
    def _metrics(ranks: list[int | None]) -> dict[str, float]:
        n = len(ranks) or 1
        out: dict[str, float] = {}
        for k in (1, 5, 10):
            out[f"R@{k}"] = round(sum(1 for r in ranks if r and r <= k) / n, 4)
        out["MRR@10"] = round(sum(1 / r for r in ranks if r and r <= 10) / n, 4)
        out["n"] = len(ranks)
        return out

    def table(self) -> dict[str, Any]:
        """The full set's metrics at the top level (continuity), each half under its name."""
        out: dict[str, Any] = self._metrics(self.ranks["all"])
        for split in ("dev", "test"):
            if self.ranks[split]:
                out[split] = self._metrics(self.ranks[split])
        return out


async def _rank_all(
    client: Any, tool: str, queries: list[tuple[str, int, str]], args: dict[str, Any],
    key: str, id_of: dict[Any, int],
) -> dict[str, Any]:
    splits = split_of("cosqa")
    rk = Ranking()
    for query, gold, qid in queries:
        t = time.perf_counter()
        res = await call(client, tool, {"query": query, **args})
        rk.latency_ms.append((time.perf_counter() - t) * 1000)
        hits = res.get("results") or res.get("notes") or res.get("hits") or []
        rk.add([id_of.get(h[key]) for h in hits], gold, splits.get(qid))
    return rk.table()


async def run(ctx: BenchContext, systems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    corpus, queries = load(ctx.data / "cosqa-dev.json")
    results: dict[str, Any] = {}
    async with ctx.configured("cosqa", {}) as (_brain, client):
        deep = ctx.deep and "deep_search" in await tool_names(client)
        t0 = time.perf_counter()
        id_of: dict[Any, int] = {}
        for i, code in enumerate(corpus):
            res = await call(client, "add_memory", {"content": code, "project": PROJECT})
            id_of[res["note"]["zk_id"]] = i
        ingest_s = time.perf_counter() - t0
    ctx.log(f"cosqa: {len(corpus)} codes added via add_memory in {ingest_s:.1f}s")
    for name, tool, cfg in tool_runs(systems, deep):
        async with ctx.configured("cosqa", cfg) as (_brain, client):
            results[name] = await _rank_all(
                client, tool, queries, {"project": PROJECT, "top_k": 10}, "zk_id", id_of)
        ctx.log(f"cosqa {name}: {_brief(results[name])}")
    if not ctx.quick:  # uploads and a source folder: ~50 s, the full run's part
        results.update(await file_rows(ctx, corpus, queries))
    return {
        "corpus": len(corpus),
        "queries": len(queries),
        "ingest_s": round(ingest_s, 1),
        "systems": results,
    }


async def file_rows(
    ctx: BenchContext, corpus: list[str], queries: list[tuple[str, int, str]]
) -> dict[str, Any]:
    """search_files and fs_search on the same queries: each code a ``.py`` file, uploaded
    as a document and indexed as a source folder (default settings, the same policy)."""
    folder = ctx.home("cosqa-code")
    names = {f"code_{i:04d}.py": i for i in range(len(corpus))}
    for name, i in names.items():
        (folder / name).write_text(corpus[i] + "\n", encoding="utf-8")
    out: dict[str, Any] = {}
    store = "cosqa-files"
    (ctx.scratch / store).mkdir(parents=True, exist_ok=True)
    async with ctx.configured(store, {}, paths={"allowed_roots": [str(ctx.scratch)]}) as (
        _brain, client,
    ):
        t0 = time.perf_counter()
        ids = [(await call(client, "ingest_file", {"path": str(folder / n)}))["id"]
               for n in names]
        for file_id in ids:
            while (await call(client, "get_file", {"file_id": file_id}))["status"] == "processing":
                await anyio.sleep(0.05)
        await call(client, "add_source", {"path": str(folder), "name": "cosqa",
                                          "trigger": "manual"})
        await call(client, "sync_source", {"source": "cosqa", "wait": True})
        ctx.log(f"cosqa files: {len(names)} uploads and a source folder indexed in "
                f"{time.perf_counter() - t0:.1f}s")
        out[FILE_ROWS[0]] = await _rank_all(client, "search_files", queries, {"limit": 10},
                                            "file", names)
        ctx.log(f"cosqa {FILE_ROWS[0]}: {_brief(out[FILE_ROWS[0]])}")
        out[FILE_ROWS[1]] = await _rank_all(
            client, "fs_search", queries, {"search_mode": "semantic", "source": "cosqa",
                                           "limit": 10}, "path", names)
        ctx.log(f"cosqa {FILE_ROWS[1]}: {_brief(out[FILE_ROWS[1]])}")
    return out


def _brief(row: dict[str, Any]) -> str:
    def one(m: dict[str, Any]) -> str:
        return f"R@5={m['R@5']:.3f} MRR@10={m['MRR@10']:.3f}"

    return " | ".join(f"{k}: {one(row[k])}" for k in ("dev", "test") if k in row) + (
        f" | all: {one(row)}")
