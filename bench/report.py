"""The report of one ``python -m bench`` run (bench_out/BENCHMARKS.md, tables) and the JSON
of every figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LOCOMO_COLS = ("any@1", "any@5", "any@10", "all@1", "all@5", "all@10")
COSQA_COLS = ("R@1", "R@5", "R@10", "MRR@10")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else str(value)


def _ms(p: dict[str, Any] | None) -> str:
    if not p or p.get("n") == 0:  # nothing timed (e.g. the index run came during the import)
        return "n/a"
    return f"{p['p50']:.1f} / {p['p95']:.1f}"


SPLIT_LOCOMO = ("any@1", "any@5", "any@10")
SPLIT_COSQA = ("R@1", "R@5", "MRR@10")


def split_table(systems: dict[str, Any], cols: tuple[str, ...], pick: Any) -> list[str]:
    """Dev and test halves side by side (bench/splits.json): levers are chosen on dev, test
    is the headline. Empty when the rows carry no halves (other data, a subsample)."""
    names = [n for n in systems if pick(systems[n], "test") or pick(systems[n], "dev")]
    if not names:
        return []
    rows = []
    for name in names:
        dev, test = pick(systems[name], "dev") or {}, pick(systems[name], "test") or {}
        rows.append([name, *(dev.get(c) for c in cols), *(test.get(c) for c in cols)])
    n_dev = next((pick(systems[n], "dev") or {}).get("n") for n in names)
    n_test = next((pick(systems[n], "test") or {}).get("n") for n in names)
    return [
        f"Dev (n = {n_dev}) and test (n = {n_test}) halves; test is the headline:",
        "",
        _table(["system", *(f"dev {c}" for c in cols), *(f"test {c}" for c in cols)], rows),
        "",
    ]


def locomo_section(level: str, data: dict[str, Any], describe: dict[str, str]) -> str:
    systems = data["systems"]
    halves = split_table(systems, SPLIT_LOCOMO, lambda row, s: row.get(s))
    rows = [
        [name, describe.get(name, ""), *(systems[name]["all"].get(c) for c in LOCOMO_COLS)]
        for name in systems
    ]
    out = [
        f"### LoCoMo, {level} level",
        "",
        *halves,
        f"Full set (n = {next(iter(systems.values()))['all']['n']}), for continuity:",
        "",
        _table(["system", "what", *LOCOMO_COLS], rows),
        "",
    ]
    cats = [str(c) for c in (1, 2, 3, 4)]
    crow = []
    for name in systems:
        crow.append(
            [
                name,
                *(systems[name].get(c, {}).get("any@5") for c in cats),
                *(systems[name].get(c, {}).get("any@10") for c in cats),
            ]
        )
    out += [
        f"Per category ({level} level), any@5 then any@10:",
        "",
        _table(["system", *(f"c{c} @5" for c in cats), *(f"c{c} @10" for c in cats)], crow),
        "",
    ]
    return "\n".join(out)


def cosqa_section(data: dict[str, Any], describe: dict[str, str]) -> str:
    systems = data["systems"]
    rows = [
        [name, describe.get(name, ""), *(systems[name].get(c) for c in COSQA_COLS)]
        for name in systems
    ]
    return "\n".join(
        [
            f"### CoSQA dev ({data['corpus']} codes, {data['queries']} queries; "
            f"{data.get('backend', 'torch')} backend)",
            "",
            *split_table(systems, SPLIT_COSQA, lambda row, s: row.get(s)),
            "Full set, for continuity:",
            "",
            _table(["system", "what", *COSQA_COLS], rows),
            "",
        ]
    )


def _ms99(p: dict[str, Any] | None) -> str:
    if not p or not p.get("n"):
        return "n/a"
    return f"{p['p50']:.1f} / {p.get('p99', p['p95']):.1f}"


def _side_by_side(r: dict[str, Any], rst: dict[str, Any]) -> list[str]:
    """The importing process's search p50 over the restarted server's on the same store (the
    issue's target: within 1.2x), with the CPU time per call of each."""
    out = []
    for key, scope in (("search_all_ms", "all projects"), ("search_project_ms", "1 project")):
        here, there = r.get(key) or {}, rst.get(key) or {}
        if here.get("p50") and there.get("p50"):
            cpu = ""
            if "cpu_ms_per_call" in here and "cpu_ms_per_call" in there:
                cpu = (f"; CPU per call {here['cpu_ms_per_call']} vs "
                       f"{there['cpu_ms_per_call']} ms")
            out.append(f"  - search_memory ({scope}) p50 in the importing process "
                       f"{here['p50']:.1f} ms vs restarted {there['p50']:.1f} ms: "
                       f"{here['p50'] / there['p50']:.2f}x{cpu}.")
    return out


def speed_section(data: dict[str, Any]) -> str:
    rows = []
    for r in data.get("scales", []):
        rows.append(
            [
                f"{r['notes']:,}",
                _ms(r.get("search_all_ms")),
                _ms(r.get("search_project_ms")),
                _ms(r.get("search_all_unoptimized_ms")),
                _ms(r.get("deep_search_ms")),
                _ms(r.get("add_memory_ms")),
                _ms(r.get("query_embedding_ms")),
                r.get("bulk_notes_per_s"),
                r.get("time_to_indexed_s"),
                r.get("rss_after_calls_mb"),
                r.get("rss_at_rest_mb"),
                r.get("peak_rss_mb"),
                r.get("disk_mb"),
            ]
        )
    out = [
        f"### Speed (in-process MCP client; {data.get('backend', 'torch')} backend; "
        "ms p50 / p95; the store as the product leaves it, workers running)",
        "",
        _table(
            [
                "notes",
                "search_memory (all projects)",
                "search_memory (1 project)",
                "search before the first index run",
                "deep_search",
                "add_memory",
                "query embedding (floor)",
                "bulk notes/s",
                "s until indexed",
                "RSS right after the calls MB",
                "RSS at rest MB (3 s later)",
                "peak RSS MB (the bench process)",
                "store disk MB",
            ],
            rows,
        ),
        "",
    ]
    for r in data.get("scales", []):
        vec = r.get("vectors") or {}
        if vec.get("source") == "cache":
            out.append(
                f"- {r['notes']:,} notes: the import took the notes' vectors from the vector "
                f"cache (bench/vector_cache.py, embedded once by the same model; embedding "
                f"runs at {vec.get('embed_notes_per_s')} notes/s, measured in this run on "
                f"{vec.get('sample'):,} of the notes); bulk notes/s is the import "
                "without embedding.")
    for r in data.get("scales", []):
        rst = r.get("restarted") or {}
        if rst.get("error"):
            out.append(f"- {r['notes']:,} notes, a restarted server: not measured "
                       f"({rst['error']}).")
        elif rst:
            out.append(
                f"- {r['notes']:,} notes, a restarted server on the store this scale left "
                f"(bench.restart, ms p50 / p95): search_memory (all projects) "
                f"{_ms(rst.get('search_all_ms'))}, (1 project) "
                f"{_ms(rst.get('search_project_ms'))}, deep_search "
                f"{_ms(rst.get('deep_search_ms'))}, add_memory {_ms(rst.get('add_memory_ms'))}; "
                f"RSS right after the calls {rst.get('rss_after_calls_mb')} MB, at rest "
                f"(3 s later) {rst.get('rss_at_rest_mb')} MB."
            )
            out.extend(_side_by_side(r, rst))
            mem = rst.get("rss_parts_mb") or {}
            if mem.get("largest"):
                top = ", ".join(f"{k} {v}" for k, v in mem["largest"].items())
                out.append(f"  - where that RSS is (MB): anonymous {mem.get('RssAnon')}, "
                           f"file-backed {mem.get('RssFile')}; the largest mappings: {top}.")
            for scope in ("all_projects", "one_project"):
                st = rst.get(f"stages_{scope}") or {}
                if st:
                    parts = ", ".join(f"{k.strip()} {v}"
                                      for k, v in st["profiled_stage_ms_per_call"].items())
                    out.append(
                        f"  - where a search ({scope.replace('_', ' ')}) goes: the tool call "
                        f"{_ms(st['tool_call_ms'])} ms, its body on the calling thread "
                        f"{_ms(st['body_ms'])} ms (p50 / p95); profiled, "
                        f"{st['profiled_body_ms_per_call']} ms per body: {parts} ms "
                        "(bench/search_stages.py)."
                    )
    for r in data.get("scales", []):
        during = r.get("during_maintenance") or {}
        if during:
            out.append(
                f"- {r['notes']:,} notes, p50 / p99 idle vs during an index maintenance run: "
                f"search_memory (all projects) {_ms99(r.get('search_all_ms'))} vs "
                f"{_ms99(during.get('search_all_ms'))} ms "
                f"({(during.get('search_all_ms') or {}).get('n', 0)} searches during the run, "
                "one search + add pair every ~0.3 s); "
                f"add_memory {_ms99(r.get('add_memory_ms'))} vs "
                f"{_ms99(during.get('add_memory_ms'))} ms."
            )
        rest = r.get("index_at_rest")
        if rest:
            out.append(
                f"- {r['notes']:,} notes: index after the import {r.get('index_after_import')}; "
                f"at rest {rest}."
            )
    for r in data.get("scales", []):
        ns, st = r.get("service_search_nostamp_ms"), r.get("service_search_stamp_ms")
        if ns and st:
            out.append(
                f"- {r['notes']:,} notes: MemoryService.search without access stamping "
                f"{_ms(ns)} ms, with stamping {_ms(st)} ms (p50 / p95)."
            )
        o = r.get("other_backend")
        if o:
            out.append(
                f"- {r['notes']:,} notes, same store and queries with the {o['backend']} "
                f"embedding backend for the query: search_memory (1 project) "
                f"{_ms(o['search_project_ms'])} ms, (all projects) {_ms(o['search_all_ms'])} "
                f"ms, query embedding {_ms(o['query_embedding_ms'])} ms (p50 / p95)."
            )
    s = data.get("startup") or {}
    if "error" in s:
        out.append(f"- startup (python mcp_server.py over stdio): failed: {s['error']}")
    elif s:
        out.append(
            f"- startup (python mcp_server.py over stdio): list_tools answered after "
            f"{s['list_tools_s']} s, first tool call (brain_stats) {s['first_call_s']} s, "
            f"first search_memory (loads the model) {s['first_search_s']} s."
        )
    return "\n".join(out) + "\n"


def health_section(h: dict[str, Any]) -> str:
    """Integrity scan time at scale (bench/health.py)."""
    rows = [[h["notes"], h["scan_best_s"], h["points_per_s"], h["stats_ms"], h["peak_rss_mb"]]]
    return "\n".join([
        "Full integrity scan (every owner: one payload pass, graph and sources cross-checks, "
        "two HasVector-filtered passes) of a bulk-filled Edge store (bench/health.py; "
        f"runs {h['scan_s']} s):",
        "",
        _table(["notes", "scan s (best)", "points/s", "health_stats ms", "peak RSS MB"], rows),
        "",
    ])


def load(root: Path, quick: bool) -> dict[str, Any]:
    """The figures of the last report (for ``--merge``); empty when there is none."""
    path = root / "bench_out" / ("benchmarks-quick.json" if quick else "benchmarks.json")
    if not path.is_file():
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def write(results: dict[str, Any], root: Path, describe: dict[str, str]) -> tuple[Path, Path]:
    out_dir = root / "bench_out"
    out_dir.mkdir(exist_ok=True)
    json_path = out_dir / ("benchmarks-quick.json" if results.get("quick") else "benchmarks.json")
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    md = render(results, describe)
    # The run's own report goes next to its JSON. BENCHMARKS.md at the root is the committed
    # record: sections assembled from several such runs and from the one-purpose benches
    # (bench.reeval, bench.ceiling, bench.rebuild, hooks_latency), each naming its command
    # and date. A new run must not silently replace figures it did not measure.
    md_path = out_dir / ("BENCHMARKS-quick.md" if results.get("quick") else "BENCHMARKS.md")
    md_path.write_text(md, encoding="utf-8")
    return md_path, json_path


def render(results: dict[str, Any], describe: dict[str, str]) -> str:
    m = results["machine"]
    parts = [
        "# Benchmarks",
        "",
        f"Written by `make bench{' BENCH_ARGS=--quick' if results.get('quick') else ''}` "
        f"(`python -m bench`) on {m['date']}. Mode: "
        f"{'quick (subsample)' if results.get('quick') else 'full'}. Model: "
        f"{results.get('model')} ({results.get('backend', 'torch')} backend). Every figure goes through the public MCP tools "
        "(in-process fastmcp Client over create_server): add_memory to store, search_memory "
        "(top_k = 10, project filter) to query; the speed scale loads use brain.memory.bulk.",
        "",
        f"Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), Python {m['python']}, torch "
        f"{m['torch']} ({m['torch_threads']} threads), qdrant-edge {m['qdrant_edge']}, load "
        f"average at start {m['load_average']}. Total run time "
        f"{results.get('elapsed_s')} s.",
        "",
    ]
    if results.get("targets"):
        parts += ["## Targets (default configuration, no LLM)", ""]
        parts += [f"- {t}" for t in results["targets"]] + [""]
    parts += ["## Recall", ""]
    if "locomo" in results:
        lo = results["locomo"]
        parts.append(
            f"LoCoMo: {lo['conversations']} conversations, {lo['questions']} questions "
            "(category 5 excluded, unresolvable evidence skipped); "
            f"{lo.get('backend', 'torch')} embedding backend."
        )
        parts.append("")
        for level in ("turn", "session"):
            if level in lo:
                parts.append(locomo_section(level, lo[level], describe))
    if "cosqa" in results:
        parts.append(cosqa_section(results["cosqa"], describe))
    if "coding_notes" in results:
        parts += coding_notes_section(results["coding_notes"], describe)
    if "speed" in results:
        parts += ["## Speed", "", speed_section(results["speed"])]
    if "health" in results:
        parts += ["## Vector health", "", health_section(results["health"])]
    if "citations" in results:
        from bench.citations import section

        parts += ["## Citations", "", section(results["citations"])]
    if "through_time" in results:
        from bench.through_time import section as time_section

        parts += ["## Facts through time", "", time_section(results["through_time"])]

    if "through_time_branches" in results:
        from bench.through_time_branches import section as branches_section

        parts += ["## Branch scope", "", branches_section(results["through_time_branches"])]
    if "llm" in results:
        llm = results["llm"]
        parts += [
            "## Write path with an LLM",
            "",
            "add_memory p50 with no LLM and with an OpenAI-compatible model answering in "
            f"{llm['llm_delay_s']:g} s (loopback), {llm['n']} adds each, interleaved:",
            "",
            "| no LLM p50 ms | with LLM p50 ms | ratio |",
            "|---|---|---|",
            f"| {llm['p50_ms_no_llm']:.2f} | {llm['p50_ms_llm']:.2f} | {llm['ratio']:.3f} |",
            "",
        ]
    if "hype" in results:
        parts += hype_section(results["hype"])
    if "peer" in results:
        from bench.peer import section as peer_section

        parts += peer_section(results["peer"])
    if "surface" in results:
        from bench import surface

        parts += surface.section(results["surface"])
    if "tokens" in results:
        parts += tokens_section(results["tokens"])
    if results.get("notes"):
        parts += ["## Notes", ""] + [f"- {n}" for n in results["notes"]] + [""]
    return "\n".join(parts)


def tokens_section(t: dict[str, Any]) -> list[str]:
    """Tokens of a search_memory result page, compact hits against whole notes."""
    c, f = t["compact"], t["full"]
    return [
        "## Tokens of a result page",
        "",
        f"search_memory, top_k {t['top_k']}, on {t['questions']} LoCoMo questions (turns added "
        "with add_memory(content)); the page is the tool result's text as a client receives it, "
        "tokens by the bundled model's tokenizer:",
        "",
        "| detail | chars p50 | tokens p50 | tokens mean | any@5 |",
        "|---|---|---|---|---|",
        f"| compact (default) | {c['chars_p50']:g} | {c['tokens_p50']:g} | {c['tokens_mean']:g} "
        f"| {c['any@5']:.3f} |",
        f"| full | {f['chars_p50']:g} | {f['tokens_p50']:g} | {f['tokens_mean']:g} "
        f"| {f['any@5']:.3f} |",
        "",
        f"full / compact tokens: {t['token_ratio_p50']:g}x at the median, "
        f"{t['token_ratio_mean']:g}x on average; the same hits in the same order on "
        f"{t['same_hits_share']:.1%} of the questions.",
        "",
        *band_section(t.get("band")),
        *membership_section(t.get("membership")),
    ]


def membership_section(m: dict[str, Any] | None) -> list[str]:
    """The relevance band deciding membership: the explicit top_k 5 page (before) against
    the default page (after), per half (bench/tokens.py)."""
    if not m:
        return []
    out = ["### The band decides membership", "",
           "search_memory with its defaults (no top_k: a clear single answer comes alone) "
           "against an explicit top_k 5 (what the default page was, and what an explicit "
           "top_k still gets), compact pages:", "",
           "| half | page | questions | tokens p50 | tokens mean | hits per page | "
           "single share | any@k |", "|---|---|---|---|---|---|---|---|"]
    for half, rows in m.items():
        for when, label in (("before", "top_k 5 (before)"), ("after", "default (after)")):
            r = rows.get(when)
            if r:
                out.append(f"| {half} | {label} | {r['questions']} | {r['tokens_p50']:g} | "
                           f"{r['tokens_mean']:g} | {r['hits_mean']:.2f} | "
                           f"{r['single_share']:.3f} | {r['any@k']:.3f} |")
    return [*out, ""]


def hype_section(h: dict[str, Any]) -> list[str]:
    """HyPE plumbing on LoCoMo dev with the loopback stub (bench/hype.py)."""
    out = [
        "## HyPE (write-time hypothetical questions): plumbing only",
        "",
        f"**{h['note']}**",
        "",
        f"LoCoMo turn level, {h['split']} half: {h['conversations']} conversations, "
        f"{h['notes']} notes (bulk-loaded), {h['questions']} questions, search_memory top_k "
        f"10. Up to {h['per_note']} questions per note, written by the background queue from "
        "the stub's replies (bench/hype.py). The echo stub asks each note's own sentences "
        "back; the oracle stub answers with the LoCoMo questions whose evidence is the note "
        "(it reads the gold: an upper bound of the plumbing, not a quality figure).",
        "",
        "| run | any@1 | any@5 | any@10 | search ms mean | question points | jobs done / failed "
        "| write s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in h["rows"].items():
        r = row["recall"]
        jobs = (f"{row['jobs_done']} / {row['jobs_failed']}" if "jobs_done" in row else "-")
        out.append(f"| {name} | {r['any@1']:.3f} | {r['any@5']:.3f} | {r['any@10']:.3f} | "
                   f"{row['search_ms_mean']:.2f} | {row.get('points', 0)} | {jobs} | "
                   f"{row.get('write_s', '-')} |")
    return [*out, ""]


def band_section(band: dict[str, Any] | None) -> list[str]:
    """The relevance band (answer: single | many) on the LoCoMo halves."""
    if not band:
        return []
    out = [
        "### Relevance band",
        "",
        "How often search_memory (top 5) answers \"single\" and how often that single hit is a "
        "gold turn, per band (the second hit scores at most (1 - band) of the top). The band "
        f"is chosen on dev: the smallest whose singles are right at least "
        f"{band['precision_goal']:.0%} of the time; test reports it.",
        "",
        "| band | dev single share | dev single right | test single share | test single right |",
        "|---|---|---|---|---|",
    ]
    for b, row in band["rows"].items():
        dev, test = row["dev"], row["test"]
        mark = " (chosen)" if float(b) == band["chosen"] else ""

        def pct(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}"

        out.append(f"| {b}{mark} | {dev['single_share']:.3f} | {pct(dev['single_right'])} | "
                   f"{test['single_share']:.3f} | {pct(test['single_right'])} |")
    return [*out, ""]


def coding_notes_section(data: dict[str, Any], describe: dict[str, str]) -> list[str]:
    """bench/coding_notes.py's part: recall by half, then abstention and the top score's
    spread."""
    from bench.coding_notes import COLS

    systems = data["systems"]
    out = [
        f"### Coding notes ({data['source']}: {data['notes']} notes, {data['answerable']} "
        f"answerable and {data['unanswerable']} unanswerable queries; "
        f"{data.get('backend', 'torch')} backend)",
        "",
        "Answerable queries, dev then test (split by topic; test is the headline):",
        "",
        _table(["system", "what", *(f"dev {c}" for c in COLS), *(f"test {c}" for c in COLS)],
               [[name, describe.get(name, ""), *(row.get("dev", {}).get(c) for c in COLS),
                 *(row.get("test", {}).get(c) for c in COLS)] for name, row in systems.items()]),
        "",
    ]
    kinds = systems.get("default", {}).get("by_kind", {})
    if kinds:
        out += ["Default configuration, whole set, by the kind of note a query asks for:", "",
                _table(["kind", "n", *COLS], [[k, v["n"], *(v.get(c) for c in COLS)]
                                              for k, v in kinds.items()]), ""]
    out += [
        "Abstention: share of searches answering empty or `answer: \"none\"`, and the top "
        "hit's score (p10 / p50 / p90):",
        "",
    ]
    rows = []
    for name, a in data["abstention"].items():
        for h in ("dev", "test"):
            for group, v in a.get(h, {}).items():
                t = v["top_score"]
                spread = ("n/a" if t["p50"] is None
                          else f"{t['p10']:.3f} / {t['p50']:.3f} / {t['p90']:.3f}")
                rows.append([name, h, group, v["n"], v["none"], spread])
    out += [_table(["search", "half", "queries", "n", "none", "top score p10 / p50 / p90"],
                   rows), ""]
    return out
