"""``python -m bench [--quick]``: every benchmark, then bench_out/BENCHMARKS.md and the JSON."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Query-time configurations compared on the same store ([retrieval] / [memory] settings
# overrides: the store is reopened under each). The first is the shipped default; the
# baselines use the same model and the same store.
SYSTEMS: dict[str, dict[str, Any]] = {
    "default": {},
    "bm25": {"fusion": "bm25"},
    "dense": {"fusion": "dense"},
    "rrf": {"fusion": "rrf", "rrf_k": 60},
}
# Ablations: the default with one lever removed (or an alternative fusion).
ABLATIONS: dict[str, dict[str, Any]] = {
    "weighted": {"fusion": "weighted", "dense_weight": 0.5},
    "dbsf, dense_weight 0.35": {"dense_weight": 0.35},
    "dbsf, dense_weight 0.55": {"dense_weight": 0.55},
    "dbsf, no code weight": {"code_dense_weight": 0.45},
    "dbsf, code weight 0.7": {"code_dense_weight": 0.7},
    "dbsf, code weight 0.9": {"code_dense_weight": 0.9},
    "dbsf, fixed dense weight": {"adaptive_weight": False},
    "dbsf, no keyword lead": {"keyword_lead": 0.0},
    "dbsf, keyword lead 0.2": {"keyword_lead": 0.2},
    "deep_search, related links at 0.85": {"tool": "deep_search", "related_decay": 0.85},
}
# Ablations that cannot change a benchmark's figures are not run on it: LoCoMo holds no code,
# so the code weight never applies there (its rows would repeat the default's).
CODE_ONLY = ("dbsf, no code weight", "dbsf, code weight 0.7", "dbsf, code weight 0.9")

DESCRIBE: dict[str, str] = {
    "default": "shipped default configuration",
    "bm25": "baseline: BM25 alone",
    "dense": "baseline: dense cosine alone",
    "rrf": "baseline: plain RRF (k = 60)",
    "deep_search": "deep_search tool (default arguments)",
    "deep_search, related links at 0.85": "ablation: deep_search with a 'related' link (what "
    "auto-linking writes) weighed like a typed one (0.85, default 0.5)",
    "weighted": "ablation: weighted fusion (cosine + BM25 / best BM25) instead of dbsf, "
    "dense weight 0.5 (0.8 for code)",
    "dbsf, dense_weight 0.35": "ablation: default with dense_weight 0.35 (default 0.45)",
    "dbsf, dense_weight 0.55": "ablation: default with dense_weight 0.55 (default 0.45)",
    "dbsf, no code weight": "ablation: code candidates fused with the prose weight",
    "dbsf, code weight 0.7": "ablation: code_dense_weight 0.7 (default 0.8)",
    "dbsf, code weight 0.9": "ablation: code_dense_weight 0.9 (default 0.8)",
    "dbsf, fixed dense weight": "ablation: dense_weight for every query (retrieval."
    "adaptive_weight false; default: the weight each query's legs choose, brain/search/adaptive.py)",
    "dbsf, no keyword lead": "ablation: without the keyword lead (retrieval.keyword_lead 0; "
    "default 0.05: BM25's decisive first hit ranks first)",
    "dbsf, keyword lead 0.2": "ablation: keyword lead only when BM25's first hit leads its "
    "second by 20% (default 5%)",
    "bulk: no long-text pooling (model truncates)": "ablation: a long note's vector is "
    "its first 256 tokens, not the mean over its window-sized pieces, bulk-loaded",
    "bulk: default": "control: default config, store bulk-loaded (brain.memory.bulk)",
    "bulk: + previous turn as note context": "lever: note context = previous turn "
    "(embedded with the content), bulk-loaded",
    "bulk: BM25 on content only (no title/keywords/tags)": "ablation: enriched fields not "
    "indexed by BM25, bulk-loaded",
    "caller context: previous turn": "add_memory with the previous turn of its session passed "
    "as context by the caller (what the harness did by hand; not the headline)",
    "lever: session context (brain-supplied)": "lever: open_session at each LoCoMo session, "
    "add_memory(content) only; memory.session_context = true links each note to its "
    "session's previous note (thread_prev; its context stays its own since issue 52)",
    "lever: session context (bulk)": "lever (the default until issue 52, now retired: a "
    "note's context is its own): each turn carries its session's previous turn as context, "
    "as after open_session; bulk-loaded",
    "lever: session context + neighbours 0.2 (bulk)": "lever: + retrieval.neighbour_weight "
    "0.2 (a note gains 0.2 x its best session neighbour's fused score)",
    "lever: session context + neighbours 0.4 (bulk)": "lever: + retrieval.neighbour_weight 0.4",
    "search_files (uploaded documents)": "each code uploaded with ingest_file, search_files "
    "(limit 10), default settings",
    "fs_search semantic (source folder)": "each code a .py file of a source folder, fs_search "
    "semantic (limit 10), default settings",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="brain bench", description=__doc__)
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run (about 2 minutes on 2 CPUs): 2 LoCoMo conversations on the plain stores (no lever "
        "stores), CoSQA memory rows (no files part), speed at 7k notes only, no tokens part, "
        "baselines without the ablations",
    )
    p.add_argument(
        "--data",
        default=None,
        help="folder with locomo10.json and cosqa-dev.json "
        "(default $BRAIN_BENCH_DATA or ../shared/bench)",
    )
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated subset of locomo,cosqa,coding_notes,speed,llm,tokens (default: "
        "all six; coding_notes: decisions, mistakes, fixes and handoffs of psf/requests' "
        "history, any@k and abstention (bench/coding_notes.py); "
        "--quick: all but tokens; tokens includes surface; and, only when named, "
        "surface: the tool list's size per profile and AGENTS.md's, in seconds; "
        "health: integrity scan time at 100k notes; citations: stale-flag precision/recall "
        "over a replayed git history and the re-check cost at 10k notes; through_time: the "
        "valid fact on top as settings change over commits, false supersessions; "
        "through_time_branches: branch-only notes leaking to other branches, promotions on "
        "merge, archives of abandoned branches (bench/through_time_branches.py); hype: HyPE plumbing "
        "on LoCoMo dev with a loopback stub model; rebuild: a model switch's cost; "
        "quantization: none vs int8; ingest_contention: search_memory and add_memory p50/p99 "
        "idle vs during a 15 MB document ingest vs during a sync of 20,000 generated files "
        "(2,000 with --quick; bench/ingest_contention.py); cli_contention: the same calls from an "
        "MCP client over stdio to a real server while `brain sync` of 2,000 files runs from a "
        "second shell, failed calls counted (bench/cli_contention.py); peer: mcp-memory-service side by side at 1k and 10k "
        "notes (bench/peer.py; installs it from PyPI into its own venv on first use))",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the other sections of the last report (run one part again)",
    )
    p.add_argument("--no-ablations", action="store_true", help="baselines only")
    p.add_argument(
        "--backend",
        choices=("torch", "onnx", "onnx-fp32", "onnx-int8"),
        default=None,
        help="embedding backend (default: the configured one, BRAIN__EMBEDDING__BACKEND)",
    )
    p.add_argument("--no-write", action="store_true", help="print, do not write the report")
    p.add_argument("--no-deep", action="store_true", help="skip the deep_search rows")
    p.add_argument("--locomo-parts", default=None,
                   help="LoCoMo parts to run: systems (plain stores), caller (caller-context "
                   "store), lever (session-context store); split them over processes "
                   "(default: all three; --quick: systems)")
    p.add_argument("--no-bulk", action="store_true",
                   help="skip the bulk-loaded LoCoMo index ablations")
    p.add_argument("--json", default=None,
                   help="also write the figures of this run to this JSON file")
    return p.parse_args(argv)


def plan(args: argparse.Namespace) -> tuple[set[str], tuple[str, ...]]:
    """The benchmarks and LoCoMo parts a run measures. Quick mode leaves out what costs most
    beside the headline rows (493 s with them, 290 s without on one machine; 130 s on another,
    BENCHMARKS.md "The quick mode"): the LoCoMo lever stores and the tokens bench (CoSQA's
    files part is left out in bench/cosqa.py)."""
    default_only = ("locomo,cosqa,coding_notes,speed,llm" if args.quick
                    else "locomo,cosqa,coding_notes,speed,llm,tokens")
    only = {x.strip() for x in (args.only or default_only).split(",") if x.strip()}
    parts = args.locomo_parts or ("systems" if args.quick else "systems,caller,lever")
    return only, tuple(x.strip() for x in parts.split(",") if x.strip())


async def run(args: argparse.Namespace, write: bool = False) -> dict[str, Any]:
    from bench import BenchContext, data_dir, machine_info
    from brain.embedding.registry import REGISTRY, build_embedder
    from config import EmbeddingSettings

    only, locomo_parts = plan(args)
    data = data_dir(args.data)
    if ({"locomo", "cosqa", "hype"} & only) and not (data / "locomo10.json").is_file():
        print(
            f"brain bench: no benchmark data in {data}; pass --data or set BRAIN_BENCH_DATA",
            file=sys.stderr,
        )
        raise SystemExit(2)
    record = REGISTRY["sentence-transformers/all-MiniLM-L6-v2"]
    backend = args.backend or EmbeddingSettings().backend
    embedder = build_embedder(record, backend=backend)
    embedder.embed_query("warm up")
    ctx = BenchContext(
        embedder=embedder, data=data, quick=args.quick, log=lambda m: print(m, flush=True),
        deep=not args.no_deep, ablations=not (args.no_ablations or args.no_bulk),
        parts=locomo_parts,
    )
    systems = dict(SYSTEMS)
    if not (args.no_ablations or args.quick):
        systems.update(ABLATIONS)
    results: dict[str, Any] = {
        "quick": args.quick, "machine": machine_info(), "model": record.id, "backend": backend,
    }
    if args.merge:
        from bench import ROOT, report

        results = {**report.load(ROOT, args.quick), **results}
    t0 = time.perf_counter()

    def checkpoint() -> None:
        # The report is rewritten after each benchmark, so a long full run leaves figures
        # behind even if a later part fails or is stopped.
        results["elapsed_s"] = round(time.perf_counter() - t0, 1)
        results["targets"] = targets(results)
        results["notes"] = list(dict.fromkeys(ctx.notes))
        if args.json:
            import json
            from pathlib import Path

            Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n",
                                       encoding="utf-8")
        if write:
            from bench import ROOT, report

            report.write(results, ROOT, DESCRIBE)

    if "locomo" in only:
        from bench import locomo

        prose = {k: v for k, v in systems.items() if k not in CODE_ONLY}
        results["locomo"] = {**await locomo.run(ctx, prose), "backend": backend}
        checkpoint()
    if "cosqa" in only:
        from bench import cosqa

        results["cosqa"] = {**await cosqa.run(ctx, systems), "backend": backend}
        checkpoint()
    if "coding_notes" in only:
        from bench import coding_notes

        prose = {k: v for k, v in systems.items() if k not in CODE_ONLY}  # notes hold no code
        results["coding_notes"] = {**await coding_notes.run(ctx, prose), "backend": backend}
        checkpoint()
    if "speed" in only:
        from bench import speed

        results["speed"] = {"backend": backend}
        await speed.run(ctx, results["speed"], checkpoint)
    if "quantization" in only:
        from bench import quantization

        ctx.log("quantization: none vs int8 (recall, speed, size) ...")
        results["quantization"] = await quantization.run(ctx)
        checkpoint()
    if "health" in only:
        from bench import health

        ctx.log("integrity scan at scale ...")
        results["health"] = await asyncio.to_thread(health.run, ctx.scratch, args.quick, ctx.log)
        checkpoint()
    if "citations" in only:
        from bench import citations

        ctx.log("citations: flags over a replayed git history, re-check cost at 10k notes ...")
        results["citations"] = await asyncio.to_thread(citations.run, ctx.scratch, args.quick,
                                                       ctx.log)
        checkpoint()
    if "ingest_contention" in only:
        from bench import ingest_contention

        ctx.log("tool calls during a 15 MB document ingest and a large sync ...")
        results["ingest_contention"] = await asyncio.to_thread(
            ingest_contention.run, ctx.scratch, args.quick, ctx.log)
        checkpoint()
    if "cli_contention" in only:
        from bench import cli_contention

        ctx.log("tool calls over stdio while the CLI syncs 2,000 files through the owner ...")
        results["cli_contention"] = await asyncio.to_thread(
            cli_contention.run, ctx.scratch, args.quick, ctx.log)
        checkpoint()
    if "through_time" in only:
        from bench import through_time

        ctx.log("through_time: facts that change over a replayed git history ...")
        results["through_time"] = await asyncio.to_thread(through_time.run, ctx.scratch,
                                                          args.quick, ctx.log)
        checkpoint()
    if "through_time_branches" in only:
        from bench import through_time_branches

        ctx.log("branch scope: leaks, promotions and archives over a scripted git history ...")
        results["through_time_branches"] = await asyncio.to_thread(
            through_time_branches.run, ctx.scratch, args.quick, ctx.log)
        checkpoint()
    if "rebuild" in only:
        from bench import rebuild

        ctx.log("model switch: rebuild generation ...")
        results["rebuild"] = await asyncio.to_thread(rebuild.run, ctx.scratch, args.quick,
                                                     ctx.log)
        checkpoint()
    if "peer" in only:
        from bench import peer
        from bench.peer_env import PeerUnavailable

        ctx.log("peer: mcp-memory-service side by side over MCP stdio ...")
        try:
            results["peer"] = await peer.run([1000] if args.quick else [1000, 10000],
                                             log=ctx.log)
        except PeerUnavailable as exc:
            results["peer"] = {"error": str(exc)}
            ctx.notes.append(f"peer comparison not run: {exc}")
        checkpoint()
    if "llm" in only:
        from bench.agentic import measure_add_latency

        ctx.log("add_memory with a 2 s LLM vs no LLM (real model, interleaved) ...")
        results["llm"] = await asyncio.to_thread(
            measure_add_latency, 30 if args.quick else 100, 2.0, embedder
        )
        ctx.log(f"llm: {results['llm']}")
    if "hype" in only:
        from bench import hype

        ctx.log("HyPE plumbing on LoCoMo dev (loopback stub, not a real model) ...")
        results["hype"] = await hype.run(ctx)
        checkpoint()
    if "tokens" in only or "surface" in only:
        from bench import surface

        results["surface"] = await surface.run(ctx)
    if "tokens" in only:
        from bench import tokens

        results["tokens"] = await tokens.run(ctx)
    checkpoint()
    return results


def _half(row: dict[str, Any], split: str) -> dict[str, Any]:
    """A system's metrics on ``split`` ("test" is the headline); the full set when the data
    has no such half (another data set, or a subsample)."""
    if "all" in row:  # LoCoMo rows: "all", categories, "dev", "test"
        return dict(row.get(split) or row["all"])
    return dict(row.get(split) or row)


def _versus_best(rows: dict[str, Any], metrics: tuple[str, ...], split: str = "test") -> str:
    """'not worse than the best single baseline' on every metric, or where it is."""
    d = _half(rows["default"], split)
    if not any(b in rows for b in ("bm25", "dense")):
        return "no single-leg baseline measured"
    worse = []
    for m in metrics:
        best_v, best_b = max((_half(rows[b], split)[m], b) for b in ("bm25", "dense")
                             if b in rows)
        if d[m] < best_v:
            worse.append(f"{m} {d[m]:.3f} < {best_b} {best_v:.3f}")
    return ("not worse than the best single baseline on " + ", ".join(metrics)
            if not worse else "WORSE than a single baseline: " + "; ".join(worse))


def _met(value: float, target: float) -> str:
    return f"target >= {target:.2f}: {'met' if value >= target else 'NOT met'}"


def search_target_ms(notes: int) -> int | None:
    """The search_memory p50 target at a scale (issue 14): 25 ms from 100k notes, 40 ms at 1M."""
    if notes >= 1_000_000:
        return 40
    return 25 if notes >= 100_000 else None


def targets(r: dict[str, Any]) -> list[str]:
    """The issue-17 targets, on the test half, default configuration, add_memory(content)
    with no caller context."""
    out = []
    lo = r.get("locomo", {})
    turn = lo.get("turn", {}).get("systems", {})
    if "default" in turn:
        d = _half(turn["default"], "test")
        out.append(
            f"LoCoMo turn (test, n = {d['n']}) any@5 {d['any@5']:.3f} ({_met(d['any@5'], 0.75)}), "
            f"any@10 {d['any@10']:.3f} ({_met(d['any@10'], 0.85)}); "
            + _versus_best(turn, ("any@1", "any@5", "any@10")) + "."
        )
    session = lo.get("session", {}).get("systems", {})
    if "default" in session:
        d = _half(session["default"], "test")
        bm = _half(session["bm25"], "test")["any@1"] if "bm25" in session else None
        versus = ("BM25 not measured" if bm is None else f"vs BM25 {bm:.3f} (target above: "
                  f"{'met' if d['any@1'] > bm else 'NOT met'})")
        out.append(
            f"LoCoMo session (test) any@5 {d['any@5']:.3f} ({_met(d['any@5'], 0.95)}), any@1 "
            f"{d['any@1']:.3f} {versus}; "
            + _versus_best(session, ("any@1", "any@5", "any@10")) + "."
        )
    co = r.get("cosqa", {}).get("systems", {})
    if "default" in co:
        d = _half(co["default"], "test")
        out.append(
            f"CoSQA (test, n = {d['n']}) MRR@10 {d['MRR@10']:.3f} ({_met(d['MRR@10'], 0.88)}), "
            f"R@5 {d['R@5']:.3f} ({_met(d['R@5'], 0.97)}); "
            + _versus_best(co, ("R@1", "R@5", "R@10", "MRR@10")) + "."
        )
        for row in ("search_files (uploaded documents)", "fs_search semantic (source folder)"):
            if row in co:
                f = _half(co[row], "test")
                ok = all(abs(f[m] - d[m]) <= 0.01 for m in ("R@5", "MRR@10"))
                out.append(
                    f"CoSQA (test) {row}: R@5 {f['R@5']:.3f}, MRR@10 {f['MRR@10']:.3f} vs "
                    f"search_memory {d['R@5']:.3f} / {d['MRR@10']:.3f} (target within 0.01: "
                    f"{'met' if ok else 'NOT met'})."
                )
    cn = r.get("coding_notes", {})
    if "default" in cn.get("systems", {}):
        d = _half(cn["systems"]["default"], "test")
        line = (f"Coding notes (test, n = {d['n']}) any@5 {d['any@5']:.3f}, any@10 "
                f"{d['any@10']:.3f}; " + _versus_best(cn["systems"], ("any@1", "any@5", "any@10")))
        for name, a in cn.get("abstention", {}).items():
            u = a.get("test", {}).get("unanswerable")
            if u:
                line += (f"; {name}: none on {u['n']} unanswerable {u['none']:.3f} (issue 52 "
                         f"target >= 0.80: {'met' if u['none'] >= 0.8 else 'NOT met'})")
        out.append(line + ".")
    llm = r.get("llm")
    if llm:
        ok = llm["ratio"] <= 1.10
        out.append(
            f"add_memory p50 with a {llm['llm_delay_s']:g} s LLM {llm['p50_ms_llm']:.1f} ms vs "
            f"{llm['p50_ms_no_llm']:.1f} ms without (ratio {llm['ratio']:.3f}; target within "
            f"10%: {'met' if ok else 'NOT met'})."
        )
    for row in r.get("speed", {}).get("scales", []):
        s_all = row["search_all_ms"]["p50"]
        s_one = row["search_project_ms"]["p50"]
        from bench.speed import PROJECTS

        line = (f"{row['notes']:,} notes: search_memory p50 {s_one:.1f} ms in one project "
                f"(of {PROJECTS}), {s_all:.1f} ms across all")
        cap = search_target_ms(row["notes"])
        if cap is not None:
            ok = max(s_one, s_all) <= cap
            line += f" (target <= {cap} ms: {'met' if ok else 'NOT met'})"
        if row.get("deep_search_ms"):
            ds = row["deep_search_ms"]["p50"]
            line += (
                f"; deep_search p50 {ds:.1f} ms (target <= 80 ms: "
                f"{'met' if ds <= 80 else 'NOT met'})"
            )
        a = row["add_memory_ms"]["p50"]
        line += f"; add_memory p50 {a:.1f} ms (target <= 40 ms: {'met' if a <= 40 else 'NOT met'})"
        during = (row.get("during_maintenance") or {}).get("search_all_ms") or {}
        if during.get("n") and "p99" in row["search_all_ms"]:
            idle99, run99 = row["search_all_ms"]["p99"], during["p99"]
            ok = run99 <= 3 * idle99
            line += (f"; search p99 during index maintenance {run99:.1f} ms vs {idle99:.1f} ms "
                     f"idle (target within 3x: {'met' if ok else 'NOT met'})")
        if row.get("time_to_indexed_s") is not None:
            line += f"; {row['time_to_indexed_s']} s until indexed after the bulk import"
        if row["notes"] >= 1_000_000:
            line += (f"; RSS at rest {row.get('rss_at_rest_mb')} MB"
                     + _rss_target(row["notes"], row.get("rss_at_rest_mb"))
                     + f", store {row.get('disk_mb')} MB on disk")
        out.append(line + ".")
        rst = row.get("restarted") or {}
        cap = search_target_ms(row["notes"])
        if rst.get("search_all_ms") and cap is not None:
            worst = max(rst["search_all_ms"]["p50"], rst["search_project_ms"]["p50"])
            out.append(
                f"{row['notes']:,} notes, a restarted server on that store: search_memory p50 "
                f"{rst['search_project_ms']['p50']:.1f} ms in one project, "
                f"{rst['search_all_ms']['p50']:.1f} ms across all (target <= {cap} ms: "
                f"{'met' if worst <= cap else 'NOT met'}); deep_search "
                f"{rst['deep_search_ms']['p50']:.1f} ms; add_memory "
                f"{rst['add_memory_ms']['p50']:.1f} ms; RSS at rest {rst['rss_at_rest_mb']} MB"
                + _rss_target(row["notes"], rst["rss_at_rest_mb"]) + ".")
    return out


def _rss_target(notes: int, rss: float | None) -> str:
    if notes < 1_000_000 or rss is None:
        return ""
    return f" (target <= 1536 MB: {'met' if rss <= 1536 else 'NOT met'})"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from bench import ROOT, report

    results = asyncio.run(run(args, write=not args.no_write))
    print(report.render(results, DESCRIBE))
    if not args.no_write:
        md_path, json_path = report.write(results, ROOT, DESCRIBE)
        print(f"wrote {md_path} and {json_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
