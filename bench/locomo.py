"""LoCoMo evidence recall (LLM-free), turn level and session level.

Protocol (../shared/bench/README.md): one project per conversation; every dialogue turn is a
memory ``(<session date time>) <speaker> said, "<text>"`` plus `` [shares <caption>]``;
every question (category 5, adversarial, excluded) is a search in its conversation's project.
any@k: some gold turn is in the top k; all@k: every gold turn is. Malformed evidence ids are
split on ``;``/``,``/spaces and kept when they name an existing turn; questions left with no
evidence are skipped. Session level: one memory per session, gold = sessions of the evidence.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import BenchContext, call, mcp_client, sections_for, tool_names, tool_runs
from bench.splits import split_of
from brain.notes import point_id

KS = (1, 5, 10)
CATEGORIES = (1, 2, 3, 4)
EXCLUDED_CATEGORY = 5
_SPLIT = re.compile(r"[;,\s]+")


@dataclass(slots=True)
class Turn:
    dia_id: str
    session: int
    text: str


@dataclass(slots=True)
class Question:
    text: str
    category: int
    gold_turns: frozenset[str]
    gold_sessions: frozenset[int]


@dataclass(slots=True)
class Conversation:
    index: int
    turns: list[Turn]
    sessions: dict[int, str]
    questions: list[Question] = field(default_factory=list)
    sample_id: str = ""  # the id bench/splits.json splits by

    @property
    def project(self) -> str:
        return f"locomo-{self.index}"


def turn_text(date: str, turn: dict[str, Any]) -> str:
    text = f'({date}) {turn["speaker"]} said, "{turn["text"]}"'
    if turn.get("blip_caption"):
        text += f" [shares {turn['blip_caption']}]"
    return text


def resolve_evidence(evidence: Sequence[Any], valid: set[str]) -> list[str]:
    out: list[str] = []
    for item in evidence:
        for tok in _SPLIT.split(str(item)):
            if tok in valid and tok not in out:
                out.append(tok)
    return out


def load(path: Path) -> list[Conversation]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    convs = []
    for ci, sample in enumerate(data):
        c = sample["conversation"]
        turns: list[Turn] = []
        sessions: dict[int, str] = {}
        n = 1
        while f"session_{n}" in c or f"session_{n}_date_time" in c:
            date = c.get(f"session_{n}_date_time", "")
            lines = [turn_text(date, t) for t in c.get(f"session_{n}", [])]
            turns.extend(
                Turn(t["dia_id"], n, lines[i]) for i, t in enumerate(c.get(f"session_{n}", []))
            )
            if lines:
                sessions[n] = "\n".join(lines)
            n += 1
        session_of = {t.dia_id: t.session for t in turns}
        conv = Conversation(ci, turns, sessions, sample_id=str(sample.get("sample_id", ci)))
        for qa in sample["qa"]:
            if qa.get("category") == EXCLUDED_CATEGORY:
                continue
            gold = resolve_evidence(qa.get("evidence", []), set(session_of))
            if not gold:
                continue
            conv.questions.append(
                Question(
                    qa["question"],
                    int(qa["category"]),
                    frozenset(gold),
                    frozenset(session_of[g] for g in gold),
                )
            )
        convs.append(conv)
    return convs


class Recall:
    """any@k / all@k, overall ("all", the full set), per category (full set), and per split
    ("dev", "test": overall rows of each half, bench/splits.json)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
        self.latency_ms: list[float] = []

    def add(
        self, category: int, ranked: Sequence[Any], gold: frozenset[Any], split: str | None = None
    ) -> None:
        for key in ("all", str(category), *((split,) if split else ())):
            for k in KS:
                top = set(ranked[:k])
                self.rows[key][f"any@{k}"].append(bool(top & gold))
                self.rows[key][f"all@{k}"].append(gold <= top)

    def table(self) -> dict[str, dict[str, float]]:
        out = {}
        for key, metrics in self.rows.items():
            out[key] = {m: round(sum(v) / len(v), 4) for m, v in metrics.items()}
            out[key]["n"] = len(next(iter(metrics.values())))
        return out


async def _ingest(
    client: Any, project: str, texts: Sequence[str], contexts: Sequence[str | None] | None = None
) -> list[str]:
    ids = []
    for i, text in enumerate(texts):
        args: dict[str, Any] = {"content": text, "project": project}
        if contexts is not None and contexts[i]:
            args["context"] = contexts[i]
        res = await call(client, "add_memory", args)
        ids.append(res["note"]["zk_id"])
    return ids


def previous_turns(conv: Conversation) -> list[str | None]:
    """The context of each turn: the turn before it in the same session (None for the first)."""
    out: list[str | None] = []
    for i, t in enumerate(conv.turns):
        prev = conv.turns[i - 1] if i and conv.turns[i - 1].session == t.session else None
        out.append(prev.text if prev else None)
    return out


async def _evaluate(
    client: Any,
    convs: list[Conversation],
    maps: dict[int, dict[str, Any]],
    level: str,
    tool: str,
) -> dict[str, Any]:
    rec = Recall()
    splits = split_of("locomo")
    for conv in convs:
        m = maps[conv.index]
        for q in conv.questions:
            t = time.perf_counter()
            ids = await _ask(client, tool, q.text, conv.project, 10)
            rec.latency_ms.append((time.perf_counter() - t) * 1000)
            gold = q.gold_turns if level == "turn" else q.gold_sessions
            rec.add(q.category, [m.get(i) for i in ids], gold, splits.get(conv.sample_id))
    return rec.table()


def _content_only(payload: dict[str, Any]) -> str:
    return str(payload["content"])


# Index-time ablations, turn level, bulk-loaded into their own store (full mode).
INDEX_ABLATIONS: dict[str, dict[str, Any]] = {
    "bulk: default": {},
    "bulk: + previous turn as note context": {"context": True},
    "bulk: BM25 on content only (no title/keywords/tags)": {"keyword_fn": _content_only},
}


async def _bulk_evaluate(
    ctx: BenchContext,
    store_name: str,
    convs: list[Conversation],
    level: str,
    notes_of: Callable[[Conversation], tuple[list[Any], list[Any]]],
    cfg: dict[str, Any] | None = None,
    **bulk_kw: Any,
) -> dict[str, Any]:
    """Bulk-load each conversation's notes (``notes_of`` -> keys, BulkNotes) into a fresh
    store under ``cfg``, then evaluate search_memory at ``level``."""
    from brain.memory.bulk import bulk_add

    brain = ctx.open_brain(store_name, **sections_for(cfg or {}))
    try:
        maps: dict[int, dict[str, Any]] = {}
        for conv in convs:
            keys, notes = notes_of(conv)
            res = bulk_add(brain.memory, notes, **bulk_kw)
            maps[conv.index] = dict(zip(res.zk_ids, keys, strict=True))
        async with mcp_client(brain) as client:
            return await _evaluate(client, convs, maps, level, "search_memory")
    finally:
        brain.close()


async def index_ablations(ctx: BenchContext, convs: list[Conversation]) -> dict[str, Any]:
    from brain.memory.bulk import BulkNote

    results: dict[str, Any] = {}
    for i, (name, spec) in enumerate(INDEX_ABLATIONS.items()):

        def turns(conv: Conversation, spec: dict[str, Any] = spec) -> tuple[list[Any], list[Any]]:
            ctxs = previous_turns(conv) if spec.get("context") else [None] * len(conv.turns)
            notes = [BulkNote(t.text, project=conv.project, extra={"context": c} if c else {})
                     for t, c in zip(conv.turns, ctxs, strict=True)]
            return [t.dia_id for t in conv.turns], notes

        kw = {"keyword_fn": spec["keyword_fn"]} if "keyword_fn" in spec else {}
        results[name] = await _bulk_evaluate(ctx, f"locomo-ablation-{i}", convs, "turn", turns,
                                             **kw)
        ctx.log(f"locomo turn {name}: {_brief(results[name])}")
    return results


async def _ask(client: Any, tool: str, query: str, project: str, k: int) -> list[str]:
    args: dict[str, Any] = {"query": query, "project": project, "top_k": k}
    res = await call(client, tool, args)
    hits = res.get("results") or res.get("notes") or res.get("hits") or []
    return [h["zk_id"] for h in hits]


# Turn-level stores written differently, each through add_memory into its own store and
# searched with the default configuration: the caller-context row (what an agent that passes
# the previous turn gets) and the write-time levers the brain applies by itself.
STORE_ROWS: dict[str, dict[str, Any]] = {
    "caller context: previous turn": {"ingest": "caller_context", "part": "caller"},
    "lever: session context (brain-supplied)": {
        "ingest": "sessions", "overrides": {"session_context": True}, "part": "lever",
    },
}
# What a run measures (``python -m bench --locomo-parts``): the systems on the plain stores
# (turn and session level), and each store row; separate processes can take separate parts.
PARTS = ("systems", "caller", "lever", "session", "bulk-plain", "bulk-ctx")
# Bulk-loaded turn stores (brain.memory.bulk writes add_memory's payloads, embedding in batches): a
# plain store is what add_memory(content) writes (the default since issue 52: a note's
# context is its own); a store with each turn's session predecessor as context and
# thread_prev is what memory.session_context wrote after open_session until then (and what a
# caller passing the previous turn writes, less thread_prev): the two rows say what the
# borrowed context was worth on LoCoMo.
BULK_ROWS: dict[str, dict[str, Any]] = {
    "bulk-plain": {"context": False},
    "bulk-ctx": {"context": True},
}
# Query-time levers evaluated on the bulk-ctx store (name -> settings overrides).
CTX_LEVERS: dict[str, dict[str, Any]] = {
    "lever: session context (bulk)": {},
    "lever: session context + neighbours 0.2 (bulk)": {"neighbour_weight": 0.2},
    "lever: session context + neighbours 0.4 (bulk)": {"neighbour_weight": 0.4},
}


async def _ingest_store(
    ctx: BenchContext, name: str, convs: list[Conversation], level: str, mode: str = "plain",
    overrides: dict[str, Any] | None = None,
) -> tuple[dict[int, dict[str, Any]], float, bool]:
    """Write every conversation through add_memory into the store ``name``: plain (content
    only, what an agent gets from ``add_memory(content)``), caller_context (the previous
    turn of its session passed as ``context``), or sessions (open_session at the start of
    each LoCoMo session, content only). (zk_id -> key maps, seconds, deep_search listed)."""
    maps: dict[int, dict[str, Any]] = {}
    async with ctx.configured(name, overrides or {}) as (brain, client):
        deep = ctx.deep and "deep_search" in await tool_names(client)
        t0 = time.perf_counter()
        for conv in convs:
            if level == "session":
                keys: list[Any] = list(conv.sessions)
                ids = await _ingest(client, conv.project, [conv.sessions[s] for s in keys])
            elif mode == "sessions":
                keys, ids = [], []
                for session in sorted({t.session for t in conv.turns}):
                    turns = [t for t in conv.turns if t.session == session]
                    await call(client, "open_session", {"project": conv.project})
                    ids += await _ingest(client, conv.project, [t.text for t in turns])
                    keys += [t.dia_id for t in turns]
            else:
                keys = [t.dia_id for t in conv.turns]
                ctxs = previous_turns(conv) if mode == "caller_context" else None
                ids = await _ingest(client, conv.project, [t.text for t in conv.turns], ctxs)
            maps[conv.index] = dict(zip(ids, keys, strict=True))
        ingest_s = time.perf_counter() - t0
        # Payload indexes appear once a store passes a size threshold, at open; a restart
        # would create them, so the bench does the same without restarting.
        ensure = getattr(brain.store, "ensure_indexes", None)
        if ensure is not None:
            ensure()
    ctx.log(f"locomo {level} ({mode}): {sum(len(m) for m in maps.values())} memories added "
            f"via add_memory in {ingest_s:.1f}s into {ctx.home(name)}")
    (ctx.home(name) / "bench-maps.json").write_text(json.dumps(
        {str(k): v for k, v in maps.items()}), encoding="utf-8")  # to evaluate it again
    return maps, ingest_s, deep


async def run(ctx: BenchContext, systems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Turn- and session-level recall of every system (name -> settings overrides; the first
    is the default configuration) plus deep_search if the tool exists. Every system reads
    the same store, reopened under its own settings; rows carry the full set ("all", per
    category) and the dev / test halves (bench/splits.json)."""
    convs = load(ctx.data / "locomo10.json")
    if ctx.quick:
        convs = convs[:2]
    out: dict[str, Any] = {
        "conversations": len(convs),
        "questions": sum(len(c.questions) for c in convs),
    }
    levels = [lv for lv in ("turn", "session")
              if "systems" in ctx.parts or (lv == "session" and "session" in ctx.parts)]
    for level in levels:
        name = f"locomo-{level}"
        maps, ingest_s, deep = await _ingest_store(ctx, name, convs, level)
        results: dict[str, Any] = {}
        for sys_name, tool, cfg in tool_runs(systems, deep):
            async with ctx.configured(name, cfg) as (_brain, client):
                results[sys_name] = await _evaluate(client, convs, maps, level, tool)
            ctx.log(f"locomo {level} {sys_name}: {_brief(results[sys_name])}")
        if not deep:
            ctx.notes.append("deep_search is not listed by the server: its LoCoMo rows are skipped")
        out[level] = {"ingest_s": round(ingest_s, 1), "systems": results, "context_passed": False}
    for i, (row, spec) in enumerate(STORE_ROWS.items()):
        if spec["part"] not in ctx.parts:
            continue
        store = f"locomo-turn-store-{i}"
        overrides = spec.get("overrides", {})
        smaps, _s, _d = await _ingest_store(ctx, store, convs, "turn", spec["ingest"], overrides)
        async with ctx.configured(store, overrides) as (_brain, client):
            turn_rows = out.setdefault("turn", {"systems": {}, "context_passed": False})
            turn_rows["systems"][row] = await _evaluate(client, convs, smaps, "turn",
                                                        "search_memory")
        ctx.log(f"locomo turn {row}: {_brief(turn_rows['systems'][row])}")
    for part, spec in BULK_ROWS.items():
        if part in ctx.parts:
            rows = await bulk_rows(ctx, convs, part, spec["context"], systems)
            out.setdefault("turn", {"systems": {}, "context_passed": False})["systems"].update(rows)
    if not ctx.quick and ctx.ablations and "systems" in ctx.parts:
        out["session"]["systems"].update(await session_pooling_ablation(ctx, convs))
        out["turn"]["systems"].update(await index_ablations(ctx, convs))
    return out


async def bulk_rows(
    ctx: BenchContext, convs: list[Conversation], part: str, context: bool,
    systems: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Turn level on a bulk-loaded store: every system on the plain one ("bulk: <name>"), the
    session-context levers on the one with context and thread_prev."""
    from brain.memory.bulk import BulkNote, bulk_add

    name = f"locomo-turn-{part}"
    brain = ctx.open_brain(name)
    maps: dict[int, dict[str, Any]] = {}
    t0 = time.perf_counter()
    try:
        for conv in convs:
            ctxs = previous_turns(conv) if context else [None] * len(conv.turns)
            notes = [BulkNote(t.text, project=conv.project, extra={"context": c} if c else {})
                     for t, c in zip(conv.turns, ctxs, strict=True)]
            res = bulk_add(brain.memory, notes)
            maps[conv.index] = dict(zip(res.zk_ids, [t.dia_id for t in conv.turns],
                                        strict=True))
            if context:  # thread_prev, as session_context records it
                for i, t in enumerate(conv.turns):
                    if i and conv.turns[i - 1].session == t.session:
                        brain.store.set_payload([point_id(res.zk_ids[i])],
                                                {"thread_prev": res.zk_ids[i - 1]})
        ensure = getattr(brain.store, "ensure_indexes", None)
        if ensure is not None:
            ensure()
    finally:
        brain.close()
    (ctx.home(name) / "bench-maps.json").write_text(json.dumps(
        {str(k): v for k, v in maps.items()}), encoding="utf-8")
    ctx.log(f"locomo turn {part}: bulk-loaded in {time.perf_counter() - t0:.1f}s into "
            f"{ctx.home(name)}")
    runs = ({f"bulk: {n}": cfg for n, cfg in systems.items() if "tool" not in cfg}
            if not context else CTX_LEVERS)
    results: dict[str, Any] = {}
    for row, cfg in runs.items():
        async with ctx.configured(name, cfg) as (_brain, client):
            results[row] = await _evaluate(client, convs, maps, "turn", "search_memory")
        ctx.log(f"locomo turn {row}: {_brief(results[row])}")
    return results


async def session_pooling_ablation(ctx: BenchContext, convs: list[Conversation]) -> dict[str, Any]:
    """Session notes (~3,500 characters, past the model's 256-token window) bulk-loaded with
    and without long-text pooling: the lever's effect at session level."""
    from brain.memory.bulk import BulkNote

    def sessions(conv: Conversation) -> tuple[list[Any], list[Any]]:
        keys = list(conv.sessions)
        return keys, [BulkNote(conv.sessions[k], project=conv.project) for k in keys]

    results: dict[str, Any] = {}
    for i, (name, pool) in enumerate(
        (("bulk: default", True), ("bulk: no long-text pooling (model truncates)", False))
    ):
        results[name] = await _bulk_evaluate(ctx, f"locomo-session-ablation-{i}", convs,
                                             "session", sessions, {"pool_long_text": pool})
        ctx.log(f"locomo session {name}: {_brief(results[name])}")
    return results


def _brief(table: dict[str, Any]) -> str:
    def one(row: dict[str, float]) -> str:
        return " ".join(f"{k}={row[k]:.3f}" for k in ("any@1", "any@5", "any@10"))

    return " | ".join(f"{key}: {one(table[key])}" for key in ("dev", "test", "all")
                      if key in table)
