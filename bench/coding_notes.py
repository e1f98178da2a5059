"""Coding notes: a coding agent's memory of a real repository (psf/requests), and the
questions a later task asks of it, some with no answer in the memory.

Data: bench/data/coding_notes.json, built by bench/coding_notes_build.py from psf/requests'
HISTORY.md and module docstrings at a pinned commit (decisions, mistakes, fixes, module
context notes, release handoffs); committed, so the bench needs no network.

Protocol: every stored note (``held_out`` false) is one ``add_memory`` in one project, with
its ``note_kind``, tags and (for a mistake) context; each query is a ``search_memory`` there
(with the query's ``filters`` when it has some: a question about a handoff asks for the
contextual kinds).

- Answerable queries (gold ids): any@1 / any@5 / any@10 (some gold note in the top k) and
  MRR@10, per system row, on the dev / test halves (bench/splits.json, split by topic) and
  the whole set.
- Unanswerable queries (gold ``[]``: a held-out note's query, or an off-topic subject):
  the share whose answer is empty or ``answer: "none"`` (abstention), beside the share of
  answerable queries abstained on (a false "none"); and the top hit's score, p10 / p50 / p90,
  answerable vs unanswerable, the evidence an abstention floor is calibrated on (on dev).
  Measured twice for the default configuration: with ``top_k = 10`` (as every recall row
  asks) and with the tool's own defaults (no ``top_k``), as an agent calls it.

``python -m bench.coding_notes --dump FILE``: the default configuration (and BM25 alone)
with every query's row (half, gold rank, answer, the numbers its first hits carry), the
material a relevance floor is fitted on (dev) and checked on (test).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench import BenchContext, call, tool_names, tool_runs
from bench.splits import split_of

DATA_PATH = Path(__file__).with_name("data") / "coding_notes.json"
KS = (1, 5, 10)
HALVES = ("dev", "test", "all")
COLS = ("any@1", "any@5", "any@10", "MRR@10")


def load(path: Path = DATA_PATH) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def subsample(data: dict[str, Any], n: int) -> dict[str, Any]:
    """Every len/n-th query, and the stored notes their gold needs plus as many others again
    (a small store that still has distractors): a seconds-long run for tests."""
    step = max(1, len(data["queries"]) // n)
    queries = data["queries"][::step][:n]
    need = {g for q in queries for g in q["gold"]}
    stored = [x for x in data["notes"] if not x["held_out"]]
    others = [x for x in stored if x["id"] not in need][: len(need) + 5]
    notes = [x for x in data["notes"] if x["id"] in need] + others
    return {**data, "notes": notes, "queries": queries}


def pct(xs: list[float]) -> dict[str, float | None]:
    """p10 / p50 / p90 (nearest rank) of the top hit's score; None where no query had a hit."""
    if not xs:
        return {"p10": None, "p50": None, "p90": None, "n": 0}
    s = sorted(xs)

    def at(q: float) -> float:
        return round(s[min(len(s) - 1, round(q * (len(s) - 1)))], 4)

    return {"p10": at(0.1), "p50": round(statistics.median(s), 4), "p90": at(0.9), "n": len(s)}


class Tally:
    """Per half: the first gold rank of each answerable query; for every query, whether the
    answer abstained and the top hit's score."""

    def __init__(self) -> None:
        self.ranks: dict[str, list[int | None]] = {h: [] for h in HALVES}
        self.by_kind: dict[str, list[int | None]] = {}  # whole set, by the query's note kind
        self.none: dict[str, dict[str, list[bool]]] = {h: {} for h in HALVES}
        self.top: dict[str, dict[str, list[float]]] = {h: {} for h in HALVES}
        self.rows: list[dict[str, Any]] = []  # one per query, for a calibration (--dump)

    def add(self, q: dict[str, Any], res: dict[str, Any], half: str | None) -> None:
        hits = res.get("results") or []
        ids = [h.get("zk_id") for h in hits]
        abstained = not hits or res.get("answer") == "none"
        group = "answerable" if q["gold"] else "unanswerable"
        kinds = [group] + ([f"unanswerable: {q['unanswerable']}"] if not q["gold"] else [])
        rank = next((i + 1 for i, z in enumerate(ids) if z in q["gold_zk"]), None)
        self.rows.append({
            "id": q["id"], "topic": q["topic"], "half": half, "kind": q["kind"],
            "answerable": bool(q["gold"]), "unanswerable": q.get("unanswerable"),
            "rank": rank, "answer": res.get("answer"), "abstained": abstained,
            # every number a hit carries (the fused score, and whatever evidence a build
            # adds beside it), for the first three hits
            "hits": [{k: v for k, v in h.items() if isinstance(v, (int, float))
                      and not isinstance(v, bool)} for h in hits[:3]],
        })
        if q["gold"]:
            self.by_kind.setdefault(q["kind"], []).append(rank)
        for h in ("all", half) if half else ("all",):
            if q["gold"]:
                self.ranks[h].append(rank)
            for k in kinds:
                self.none[h].setdefault(k, []).append(abstained)
                if hits:
                    self.top[h].setdefault(k, []).append(float(hits[0].get("score") or 0.0))

    @staticmethod
    def _metrics(ranks: list[int | None]) -> dict[str, Any]:
        n = len(ranks)
        row: dict[str, Any] = {f"any@{k}": round(sum(1 for r in ranks if r and r <= k) / n, 4)
                               for k in KS}
        row["MRR@10"] = round(sum(1 / r for r in ranks if r and r <= 10) / n, 4)
        row["n"] = n
        return row

    def recall(self) -> dict[str, Any]:
        out: dict[str, Any] = {h: self._metrics(self.ranks[h]) for h in HALVES if self.ranks[h]}
        out["by_kind"] = {k: self._metrics(v) for k, v in sorted(self.by_kind.items())}
        return out

    def abstention(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for h in HALVES:
            if not self.none[h]:
                continue
            out[h] = {k: {"n": len(v), "none": round(sum(v) / len(v), 4),
                          "top_score": pct(self.top[h].get(k, []))}
                      for k, v in sorted(self.none[h].items())}
        return out


async def _ask(client: Any, tool: str, data: dict[str, Any], args: dict[str, Any],
               splits: dict[str, str]) -> Tally:
    tally = Tally()
    for q in data["queries"]:
        extra = {"filters": q["filters"]} if q.get("filters") else {}
        res = await call(client, tool, {"query": q["query"], "project": data["project"],
                                        **args, **extra})
        tally.add(q, res, splits.get(q["topic"]))
    return tally


async def run(ctx: BenchContext, systems: dict[str, dict[str, Any]],
              path: Path = DATA_PATH, sample: int | None = None,
              detail: bool = False) -> dict[str, Any]:
    """The figures; ``detail``: also every query's row of the default configuration
    (``per_query``: its half, rank, answer, and the numbers its first hits carry)."""
    data = load(path)
    if sample:
        data = subsample(data, sample)
    splits = split_of("coding_notes")
    stored = [n for n in data["notes"] if not n["held_out"]]
    zk: dict[str, str] = {}
    async with ctx.configured("coding_notes", {}) as (_brain, client):
        deep = ctx.deep and "deep_search" in await tool_names(client)
        t0 = time.perf_counter()
        for n in stored:
            args: dict[str, Any] = {"content": n["content"], "project": data["project"],
                                    "note_kind": n.get("note_kind", n["kind"]),
                                    "tags": n["tags"]}
            if n.get("context"):
                args["context"] = n["context"]
            res = await call(client, "add_memory", args)
            zk[n["id"]] = res["note"]["zk_id"]
        ingest_s = time.perf_counter() - t0
    for q in data["queries"]:
        q["gold_zk"] = {zk[g] for g in q["gold"]}
    ctx.log(f"coding_notes: {len(stored)} notes added via add_memory in {ingest_s:.1f}s")
    rows: dict[str, Any] = {}
    abstention: dict[str, Any] = {}
    per_query: list[dict[str, Any]] = []
    for name, tool, cfg in tool_runs(systems, deep):
        async with ctx.configured("coding_notes", cfg) as (_brain, client):
            tally = await _ask(client, tool, data, {"top_k": 10}, splits)
            rows[name] = tally.recall()
            if name == "default":
                abstention["default, top_k 10"] = tally.abstention()
                per_query = tally.rows
                agent = await _ask(client, tool, data, {}, splits)
                abstention["default, tool defaults (no top_k)"] = agent.abstention()
        ctx.log(f"coding_notes {name}: {_brief(rows[name])}")
    for name, a in abstention.items():
        ctx.log(f"coding_notes abstention ({name}): {_brief_abstention(a)}")
    unanswerable = [q for q in data["queries"] if not q["gold"]]
    return {
        "source": f"{data['source']} @ {data['commit'][:12]}",
        "notes": len(stored),
        "queries": len(data["queries"]),
        "answerable": len(data["queries"]) - len(unanswerable),
        "unanswerable": len(unanswerable),
        "ingest_s": round(ingest_s, 1),
        "systems": rows,
        "abstention": abstention,
        **({"per_query": per_query} if detail else {}),
    }


def _brief(row: dict[str, Any]) -> str:
    return " | ".join(f"{h}: any@5={row[h]['any@5']:.3f} any@10={row[h]['any@10']:.3f}"
                      for h in HALVES if h in row)


def _brief_abstention(a: dict[str, Any]) -> str:
    out = []
    for h in ("dev", "test"):
        if h in a:
            u, y = a[h].get("unanswerable", {}), a[h].get("answerable", {})
            out.append(f"{h}: none on unanswerable {u.get('none', 0):.3f}, on answerable "
                       f"{y.get('none', 0):.3f}")
    return " | ".join(out)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.coding_notes [--dump FILE]``: the default configuration alone (and
    BM25 alone, the baseline), every query's row written to FILE for a calibration."""
    import argparse
    import asyncio
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    p = argparse.ArgumentParser(prog="python -m bench.coding_notes", description=main.__doc__)
    p.add_argument("--dump", default=None, help="write the figures and every query's row here")
    p.add_argument("--backend", default=None, choices=("torch", "onnx", "onnx-fp32", "onnx-int8"))
    args = p.parse_args(argv)
    from brain.embedding.registry import REGISTRY, build_embedder
    from config import EmbeddingSettings

    backend = args.backend or EmbeddingSettings().backend
    embedder = build_embedder(REGISTRY["sentence-transformers/all-MiniLM-L6-v2"], backend=backend)
    ctx = BenchContext(embedder=embedder, data=DATA_PATH.parent, deep=False,
                       log=lambda m: print(m, flush=True))
    out = asyncio.run(run(ctx, {"default": {}, "bm25": {"fusion": "bm25"}}, detail=True))
    rows = out.pop("per_query")
    print(json.dumps({**out, "backend": backend}, indent=1))  # the report renders it: bench.report
    if args.dump:
        Path(args.dump).write_text(json.dumps({**out, "backend": backend, "per_query": rows},
                                              indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
