"""Relevant or nothing (issue 52): how often a search answers ``none`` when its brain holds no
answer, and what the floor costs the questions that have one, on LoCoMo.

Every conversation is bulk-loaded into one store (one project each, the default
configuration). Each question (category 5 excluded) is asked twice: of its own conversation
(answerable: any@k against its gold turns) and of the next conversation's project (no
answer there: the share that answers ``none``). Both figures come from one retrieval per
search: the ranked candidates, and the relevance floor's verdict on them
(brain/search/relevance.py), so "floor on" and "floor off" are the same hits with and
without the verdict. Reported on the dev and test halves (bench/splits.json); the floor was
fitted on dev.

    .venv/bin/python -m bench.abstention [--json out.json] [--dump rows.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench import data_dir, open_brain
from bench.locomo import load
from bench.splits import split_of

KS = (1, 5, 10)


def load_conversations(m: Any, convs: list[Any]) -> dict[int, dict[str, str]]:
    """Every conversation's turns bulk-loaded into its own project: per conversation, the
    note id -> the turn's dia_id its gold names."""
    from brain.memory.bulk import BulkNote, bulk_add

    keys: dict[int, dict[str, str]] = {}
    for conv in convs:
        res = bulk_add(m, [BulkNote(t.text, project=conv.project) for t in conv.turns])
        keys[conv.index] = dict(zip(res.zk_ids, [t.dia_id for t in conv.turns], strict=True))
    return keys


def collect(home: Path, data: Path, log: Any = print) -> list[dict[str, Any]]:
    """One row per search: half, answerable, the gold rank (answerable), the verdict."""
    from brain.embedding.credential import query_vector
    from brain.embedding.registry import DEFAULT_MODEL, REGISTRY, build_embedder
    from brain.memory import RecallFilter
    from brain.memory.core import embed_text
    from brain.memory.read import _retrieve
    from brain.search import relevance

    convs = load(data / "locomo10.json")
    splits = split_of("locomo")
    # the product's default backend (onnx, 8-bit weights), as make bench measures
    brain = open_brain(home, build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx"),
                       retrieval={"relevance_floor": True})  # off by default: judged here
    try:
        m = brain.memory
        floor = brain.search_policy.relevance
        keys = load_conversations(m, convs)
        log(f"abstention: {sum(len(k) for k in keys.values())} turns loaded; floor {floor}")
        rows = []
        for i, conv in enumerate(convs):
            other = convs[(i + 1) % len(convs)]
            for q in conv.questions:
                qv = query_vector(m.embedder, q.text)
                sparse = m.bm25.query(q.text)
                for target, answerable in ((conv, True), (other, False)):
                    flt = m.build_filter(RecallFilter(project=target.project))
                    cands = _retrieve(m, qv, q.text, flt, max(KS), absolute=False)
                    ev = relevance.evidence(cands, sparse, embed_text)
                    rank = next((r for r, c in enumerate(cands)
                                 if keys[target.index].get(c.payload["zk_id"]) in q.gold_turns),
                                None) if answerable else None
                    rows.append({
                        "split": splits.get(conv.sample_id), "answerable": answerable,
                        "gold_rank": rank, "answers": relevance.answered(
                            cands, sparse, embed_text, floor),
                        "similarity": ev.similarity if ev else None,
                        "coverage": ev.coverage if ev else None,
                    })
        return rows
    finally:
        brain.close()


def table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for half in ("dev", "test"):
        asked = [r for r in rows if r["split"] == half and r["answerable"]]
        other = [r for r in rows if r["split"] == half and not r["answerable"]]
        if not asked:
            continue
        row: dict[str, Any] = {"questions": len(asked)}
        for k in KS:
            found = [r for r in asked if r["gold_rank"] is not None and r["gold_rank"] < k]
            row[f"any@{k} floor off"] = round(len(found) / len(asked), 4)
            row[f"any@{k} floor on"] = round(sum(r["answers"] for r in found) / len(asked), 4)
        row["none on another conversation"] = round(
            sum(not r["answers"] for r in other) / len(other), 4)
        row["none on own conversation"] = round(
            sum(not r["answers"] for r in asked) / len(asked), 4)
        out[half] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="folder of locomo10.json (default ../shared/bench)")
    ap.add_argument("--json", help="write the table here too")
    ap.add_argument("--dump", help="write every search's row here (to fit a floor on dev)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = collect(Path(tmp), data_dir(args.data))
    result = table(rows)
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    if args.dump:
        Path(args.dump).write_text(json.dumps(rows), encoding="utf-8")


if __name__ == "__main__":
    main()
