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

from bench import BenchContext, call, mcp_client, set_fusion, tool_names, tool_runs

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
        conv = Conversation(ci, turns, sessions)
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
    """any@k / all@k, per category and overall."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
        self.latency_ms: list[float] = []

    def add(self, category: int, ranked: Sequence[Any], gold: frozenset[Any]) -> None:
        for key in ("all", str(category)):
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


async def _accepts(client: Any, tool: str, arg: str) -> bool:
    for t in await client.list_tools():
        if t.name == tool:
            schema = getattr(t, "input_schema", None) or t.inputSchema or {}
            return arg in schema.get("properties", {})
    return False


async def _evaluate(
    client: Any,
    brain: Any,
    convs: list[Conversation],
    maps: dict[int, dict[str, Any]],
    level: str,
    tool: str,
    cfg: dict[str, Any],
) -> dict[str, Any]:
    default_cfg = brain.memory.cfg
    set_fusion(brain, **cfg)
    rec = Recall()
    try:
        for conv in convs:
            m = maps[conv.index]
            for q in conv.questions:
                t = time.perf_counter()
                ids = await _ask(client, tool, q.text, conv.project, 10)
                rec.latency_ms.append((time.perf_counter() - t) * 1000)
                gold = q.gold_turns if level == "turn" else q.gold_sessions
                rec.add(q.category, [m.get(i) for i in ids], gold)
    finally:
        brain.memory.cfg = default_cfg
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
    from brain.bulk import bulk_add

    brain = ctx.open_brain(store_name)
    try:
        if cfg:
            set_fusion(brain, **cfg)
        maps: dict[int, dict[str, Any]] = {}
        for conv in convs:
            keys, notes = notes_of(conv)
            res = bulk_add(brain.memory, notes, **bulk_kw)
            maps[conv.index] = dict(zip(res.zk_ids, keys, strict=True))
        async with mcp_client(brain) as client:
            return await _evaluate(client, brain, convs, maps, level, "search_memory", {})
    finally:
        brain.close()


async def index_ablations(ctx: BenchContext, convs: list[Conversation]) -> dict[str, Any]:
    from brain.bulk import BulkNote

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
        ctx.log(f"locomo turn {name}: {_brief(results[name]['all'])}")
    return results


async def _ask(client: Any, tool: str, query: str, project: str, k: int) -> list[str]:
    args: dict[str, Any] = {"query": query, "project": project, "top_k": k}
    res = await call(client, tool, args)
    hits = res.get("results") or res.get("notes") or res.get("hits") or []
    return [h["zk_id"] for h in hits]


async def run(ctx: BenchContext, systems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Turn- and session-level recall of every system (name -> MemoryConfig overrides;
    the first is the default configuration) plus deep_search if the tool exists."""
    convs = load(ctx.data / "locomo10.json")
    if ctx.quick:
        convs = convs[:2]
    out: dict[str, Any] = {
        "conversations": len(convs),
        "questions": sum(len(c.questions) for c in convs),
    }
    for level in ("turn", "session"):
        brain = ctx.open_brain(f"locomo-{level}")
        try:
            async with mcp_client(brain) as client:
                deep = ctx.deep and "deep_search" in await tool_names(client)
                with_context = level == "turn" and await _accepts(client, "add_memory", "context")
                maps: dict[int, dict[str, Any]] = {}
                t0 = time.perf_counter()
                for conv in convs:
                    if level == "turn":
                        keys: list[Any] = [t.dia_id for t in conv.turns]
                        texts = [t.text for t in conv.turns]
                        ctxs = previous_turns(conv) if with_context else None
                    else:
                        keys = list(conv.sessions)
                        texts = [conv.sessions[s] for s in keys]
                        ctxs = None
                    ids = await _ingest(client, conv.project, texts, ctxs)
                    maps[conv.index] = dict(zip(ids, keys, strict=True))
                ingest_s = time.perf_counter() - t0
                ctx.log(
                    f"locomo {level}: {sum(len(m) for m in maps.values())} memories "
                    f"added via add_memory in {ingest_s:.1f}s"
                    + (" (previous turn passed as context)" if with_context else "")
                )
                # Payload indexes appear once a store passes a size threshold, at open; a
                # restart would create them, so the bench does the same without restarting.
                ensure = getattr(brain.store, "ensure_indexes", None)
                if ensure is not None:
                    ensure()
                results: dict[str, Any] = {}
                runs = tool_runs(systems, deep)
                for name, tool, cfg in runs:
                    results[name] = await _evaluate(client, brain, convs, maps, level, tool, cfg)
                    ctx.log(f"locomo {level} {name}: {_brief(results[name]['all'])}")
                if not deep:
                    ctx.notes.append(
                        "deep_search is not listed by the server: its LoCoMo rows are skipped"
                    )
                out[level] = {
                    "ingest_s": round(ingest_s, 1),
                    "systems": results,
                    "context_passed": with_context,
                }
        finally:
            brain.close()
    if not ctx.quick:
        out["session"]["systems"].update(await session_pooling_ablation(ctx, convs))
        out["turn"]["systems"].update(await index_ablations(ctx, convs))
    return out


async def session_pooling_ablation(ctx: BenchContext, convs: list[Conversation]) -> dict[str, Any]:
    """Session notes (~3,500 characters, past the model's 256-token window) bulk-loaded with
    and without long-text pooling: the lever's effect at session level."""
    from brain.bulk import BulkNote

    def sessions(conv: Conversation) -> tuple[list[Any], list[Any]]:
        keys = list(conv.sessions)
        return keys, [BulkNote(conv.sessions[k], project=conv.project) for k in keys]

    results: dict[str, Any] = {}
    for i, (name, pool) in enumerate(
        (("bulk: default", True), ("bulk: no long-text pooling (model truncates)", False))
    ):
        results[name] = await _bulk_evaluate(ctx, f"locomo-session-ablation-{i}", convs,
                                             "session", sessions, {"pool_long_text": pool})
        ctx.log(f"locomo session {name}: {_brief(results[name]['all'])}")
    return results


def _brief(row: dict[str, float]) -> str:
    return " ".join(f"{k}={row[k]:.3f}" for k in ("any@1", "any@5", "any@10", "all@10"))
