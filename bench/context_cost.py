"""A note's context is its own (issue 52 item 2): what borrowing the previous note's text as
context (what ``memory.session_context`` wrote before) is worth on the coding notes.

Two bulk-loaded stores of the coding-notes set (bench/data/coding_notes.json, stored in the
set's order, which is psf/requests' history order): ``plain`` (a note's context is what its
caller gave: a mistake's own context, else none) and ``borrowed`` (a note with no context of
its own gets the previous stored note's text, as the old session lever did). Every
answerable query is asked of each (the product's ``_retrieve``, top 10); any@k per half.
LoCoMo's side of the same question is the ``bulk-plain`` / ``bulk-ctx`` rows of
``python -m bench --only locomo --no-deep --no-ablations --locomo-parts bulk-plain,bulk-ctx``.

    .venv/bin/python -m bench.context_cost
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bench import open_brain
from bench.coding_notes import load
from bench.splits import split_of

KS = (1, 5, 10)


def run() -> dict[str, Any]:
    from brain.embedding.credential import query_vector
    from brain.embedding.registry import DEFAULT_MODEL, REGISTRY, build_embedder
    from brain.memory import RecallFilter
    from brain.memory.bulk import BulkNote, bulk_add
    from brain.memory.read import _retrieve

    embedder = build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx")
    data = load()
    halves = split_of("coding_notes")
    stored = [n for n in data["notes"] if not n["held_out"]]
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("plain", "borrowed"):
            brain = open_brain(Path(tmp) / mode, embedder)
            try:
                m = brain.memory
                notes, prev = [], None
                for n in stored:
                    context = n.get("context") or (prev if mode == "borrowed" else None)
                    notes.append(BulkNote(n["content"], project=data["project"],
                                          note_kind=n.get("note_kind", n["kind"]),
                                          tags=n["tags"],
                                          extra={"context": context} if context else {}))
                    prev = n["content"]
                res = bulk_add(m, notes)
                ids = dict(zip(res.zk_ids, [n["id"] for n in stored], strict=True))
                ranks: dict[str, list[int | None]] = {"dev": [], "test": []}
                for q in data["queries"]:
                    if not q["gold"]:
                        continue
                    contextual = bool((q.get("filters") or {}).get("include_contextual"))
                    flt = m.build_filter(RecallFilter(project=data["project"],
                                                      include_contextual=contextual))
                    cands = _retrieve(m, query_vector(m.embedder, q["query"]), q["query"], flt,
                                      max(KS), absolute=False)
                    ranks[halves[q["topic"]]].append(next(
                        (i for i, c in enumerate(cands) if ids.get(c.payload["zk_id"]) in q["gold"]),
                        None))
                out[mode] = {h: {f"any@{k}": round(sum(1 for r in v if r is not None and r < k)
                                                   / len(v), 4) for k in KS}
                             for h, v in ranks.items()}
            finally:
                brain.close()
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
