"""HyPE plumbing on LoCoMo (turn level, dev half): the write-time hypothetical questions go
through the real queue, store and search, with the loopback chat stub (tests/fake_llm.py)
answering deterministically. No chat model can run here (no network, no local model), so
this measures the plumbing, never the quality of real questions.

One store per run, bulk-loaded with every turn of the dev conversations (add_memory's
payloads; bulk writes queue no enrichment, so the notes stay as add_memory(content) leaves
them), then searched with search_memory (top_k 10, project filter) three times:

- ``no HyPE``: the baseline, no question point;
- ``HyPE, echo stub``: the stub "asks" each note's own sentences back as questions (no
  information the note lacks): shows what the extra leg costs and that it does not disturb
  the ranking much when the questions say what the note says;
- ``HyPE, oracle stub``: the stub answers with the LoCoMo questions whose evidence is the
  note (it reads the gold): an upper bound showing that a question written at write time
  does bring its note up through the whole pipeline. It is NOT a quality figure.

``python -m bench --only hype`` runs it (``--quick``: 1 conversation).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from bench import BenchContext, mcp_client
from bench.locomo import Conversation, _evaluate, load
from bench.splits import split_of

QUESTIONS = 3
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
NOTE = ("No quality figure is possible here: no real chat model can run in this environment "
        "(no network, no local chat model); the loopback stub tests the plumbing only.")


def _quoted(content: str) -> str:
    """The spoken text of a LoCoMo turn note (``(date) X said, "..."``)."""
    start, end = content.find('"'), content.rfind('"')
    return content[start + 1 : end] if 0 <= start < end else content


def echo_questions(content: str, n: int = QUESTIONS) -> list[str]:
    """The note's own sentences turned into questions (deterministic, no new information)."""
    speaker = content.split(")", 1)[-1].split(" said", 1)[0].strip()
    parts = [p.strip(" .!?") for p in _SENTENCE.split(_quoted(content)) if p.strip(" .!?")]
    return [f"What did {speaker} say about: {p}?" for p in parts[:n]] or [content[:200]]


async def run(ctx: BenchContext) -> dict[str, Any]:
    import huggingface_hub.constants as hub

    from brain.memory.bulk import BulkNote, bulk_add
    from tests.fake_llm import FakeLLM  # a source-checkout tool, like the rest of the bench

    splits = split_of("locomo")
    convs = [c for c in load(ctx.data / "locomo10.json") if splits.get(c.sample_id) == "dev"]
    if ctx.quick:
        convs = convs[:1]
    oracle: dict[str, list[str]] = {}
    for conv in convs:
        for t in conv.turns:
            asked = [q.text for q in conv.questions if t.dia_id in q.gold_turns]
            if asked:
                oracle[t.text] = asked[:QUESTIONS]
    mode = {"stub": "echo"}

    def answer(request: dict[str, Any]) -> str:
        import json

        prompt = str(request["messages"][-1]["content"])
        content = prompt.rsplit("Note:\n", 1)[-1].strip()
        echo = mode["stub"] == "echo"
        questions = echo_questions(content) if echo else oracle.get(content, [])
        return json.dumps({"questions": questions})

    offline, hub.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE, False  # the stub is on loopback
    out: dict[str, Any] = {
        "split": "dev", "conversations": len(convs),
        "questions": sum(len(c.questions) for c in convs),
        "notes": sum(len(c.turns) for c in convs), "per_note": QUESTIONS, "note": NOTE,
        "rows": {},
    }
    try:
        with FakeLLM(answer) as fake:
            brain = ctx.open_brain(
                "locomo-hype",
                llm={"base_url": fake.base_url, "max_retries": 0, "backfill": False,
                     "job_max_attempts": 1, "timeout_s": 10.0},
                memory={"hype_questions": QUESTIONS},
            )
            try:
                maps: dict[int, dict[str, Any]] = {}
                for conv in convs:
                    notes = [BulkNote(t.text, project=conv.project) for t in conv.turns]
                    res = bulk_add(brain.memory, notes)
                    maps[conv.index] = dict(zip(res.zk_ids, [t.dia_id for t in conv.turns],
                                                strict=True))
                out["rows"]["no HyPE"] = await _measure(brain, convs, maps)
                ctx.log(f"hype: no HyPE {out['rows']['no HyPE']['recall']}")
                for stub in ("echo", "oracle"):
                    mode["stub"] = stub
                    _drop_all(brain)
                    t0 = time.perf_counter()
                    queued = brain.agentic.backfill_hype()
                    drained = await asyncio.to_thread(brain.agentic.drain, 3600.0)
                    write_s = time.perf_counter() - t0
                    row = await _measure(brain, convs, maps)
                    row.update(_written(brain, queued, write_s, drained))
                    name = f"HyPE, {stub} stub"
                    out["rows"][name] = row
                    ctx.log(f"hype: {name} {row}")
            finally:
                brain.close()
    finally:
        hub.HF_HUB_OFFLINE = offline
    return out


def _drop_all(brain: Any) -> None:
    from brain.vector_store import Filter, Match

    brain.store.delete_by_filter(Filter(must=(Match("kind", "hype"),)))
    q = brain.agentic.queue
    if q is not None:  # a fresh round: every note is queued again
        with q._lock:
            q._db.execute("DELETE FROM jobs WHERE kind='hype'")


def _written(brain: Any, queued: int, seconds: float, drained: bool) -> dict[str, Any]:
    from brain.memory import hype

    jobs = [j for j in brain.agentic.queue.jobs() if j["kind"] == "hype"]
    return {
        "queued": queued,
        "jobs_done": sum(j["state"] == "done" for j in jobs),
        "jobs_failed": sum(j["state"] == "failed" for j in jobs),
        "points": hype.count(brain.store),
        "write_s": round(seconds, 1),
        "drained": drained,
    }


async def _measure(brain: Any, convs: list[Conversation],
                   maps: dict[int, dict[str, Any]]) -> dict[str, Any]:
    async with mcp_client(brain) as client:
        t0 = time.perf_counter()
        table = await _evaluate(client, convs, maps, "turn", "search_memory")
        elapsed = time.perf_counter() - t0
    n = max(1, sum(len(c.questions) for c in convs))
    row = table.get("dev") or table["all"]
    return {"recall": {k: row[k] for k in ("any@1", "any@5", "any@10", "n")},
            "search_ms_mean": round(1000 * elapsed / n, 2)}
