"""What limits LoCoMo recall: the ceiling of any weighting of the two legs (issue 17).

Reads a LoCoMo store a bench run left behind (as ``bench.reeval`` does), takes each
question's dense and BM25 legs exactly as search_memory does (the same filter, the same
candidates), and fuses them with the product's own ``brain.search.fusion.fuse`` (dbsf) at 21
dense weights, 0.00 to 1.00. It reports, per split:

- the fixed weights' any@k (what a setting can reach);
- the *oracle weight*: a question counts as found at k when any of the 21 weights puts a gold
  turn in its top k. No query-adaptive fusion of these two legs (weights that follow the
  query and candidates) can do better than this, since it only picks a weight per query;
- the share of questions with a gold hit anywhere in the fused candidates (the most any
  reranking of them could reach).

With ``--pieces`` (session level) it also simulates the max-over-pieces lever: each note's
dense score is the best cosine of its window-sized pieces (``brain.embedding.registry.window_pieces``,
the pieces the product already embeds and mean-pools) instead of the pooled vector's, exact
over the conversation's notes, fused the same way. The product does not store piece vectors;
this measures whether building them would pay.

This is a diagnostic over the product's legs, not a product figure::

    python -m bench.ceiling STORE_HOME [--level turn|session] [--pieces] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

KS = (1, 5, 10)
WEIGHTS = tuple(i / 20 for i in range(21))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench import data_dir, open_brain
    from bench.locomo import load
    from bench.splits import split_of
    from brain.embedding.registry import REGISTRY, build_embedder, window_pieces
    from brain.memory import RecallFilter
    from brain.memory.filters import build_filter
    from brain.notes import point_id
    from brain.search.fusion import LEG_FIELDS, fuse
    from brain.vector_store import Hit
    from config import EmbeddingSettings

    home = Path(args.store)
    maps = {int(k): v for k, v in json.loads((home / "bench-maps.json").read_text()).items()}
    convs = [c for c in load(data_dir(args.data) / "locomo10.json") if c.index in maps]
    embedder = build_embedder(REGISTRY["sentence-transformers/all-MiniLM-L6-v2"],
                              backend=EmbeddingSettings().backend)
    brain = open_brain(home, embedder)
    n = brain.settings.retrieval.candidates
    splits = split_of("locomo")
    found: dict[str, dict[str, list[Any]]] = {}
    try:
        for conv in convs:
            key_of = {point_id(k): v for k, v in maps[conv.index].items()}
            flt = build_filter(brain.memory, RecallFilter(project=conv.project))
            if args.pieces:
                ids = list(key_of)
                content = {p.id: p.payload["content"] for p in brain.store.retrieve(ids)}
                texts = [content[i] for i in ids]
                owner, vecs = [], []
                for i, text in enumerate(texts):
                    parts = window_pieces(embedder, text)
                    owner.extend([i] * len(parts))
                    vecs.append(embedder.embed_documents(parts))
                piece_vecs, owners = np.concatenate(vecs), np.asarray(owner)
            for q in conv.questions:
                dense = brain.store.query_dense(embedder.embed_query(q.text).tolist(), flt, n,
                                                fields=LEG_FIELDS)
                sparse = brain.store.query_sparse(brain.bm25.query(q.text), flt, n,
                                                  fields=LEG_FIELDS)
                gold = q.gold_turns if args.level == "turn" else q.gold_sessions
                ranked = {w: [key_of.get(c.id) for c in fuse(dense, sparse, "dbsf", w)]
                          for w in WEIGHTS}
                rows = found.setdefault(splits.get(conv.sample_id) or "none", {})
                if args.pieces:
                    qv = embedder.embed_query(q.text)
                    best = np.full(len(ids), -2.0)
                    np.maximum.at(best, owners, piece_vecs @ qv)
                    order = np.argsort(-best)[:n]
                    by_piece = [Hit(ids[i], float(best[i]), {}) for i in order]
                    rows.setdefault("pieces", []).append(
                        {w: [bool(set([key_of.get(c.id) for c in fuse(by_piece, sparse, "dbsf",
                                                                         w)][:k]) & gold)
                             for k in KS] for w in WEIGHTS})
                rows.setdefault("hits", []).append(
                    {w: [bool(set(r[:k]) & gold) for k in KS] for w, r in ranked.items()})
                rows.setdefault("pool", []).append(bool(set(ranked[0.0]) & gold))
    finally:
        brain.close()
    out: dict[str, Any] = {"store": str(home), "level": args.level, "candidates": n}
    for split, rows in sorted(found.items()):
        hits, total = rows["hits"], len(rows["hits"])
        out[split] = {
            "n": total,
            "fixed": {f"{w:.2f}": [round(sum(h[w][i] for h in hits) / total, 3)
                                   for i in range(len(KS))] for w in WEIGHTS},
            "oracle_weight": [round(sum(any(h[w][i] for w in WEIGHTS) for h in hits) / total, 3)
                              for i in range(len(KS))],
            "gold_in_candidates": round(sum(rows["pool"]) / total, 3),
        }
        if "pieces" in rows:
            out[split]["pieces_fixed"] = {
                f"{w:.2f}": [round(sum(h[w][i] for h in rows["pieces"]) / total, 3)
                             for i in range(len(KS))] for w in WEIGHTS}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ceiling", description=__doc__)
    p.add_argument("store")
    p.add_argument("--level", choices=("turn", "session"), default="turn")
    p.add_argument("--pieces", action="store_true",
                   help="also simulate max-over-pieces dense scores (session level)")
    p.add_argument("--data", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    out = run(args)
    for split in ("dev", "test"):
        if split in out:
            s = out[split]
            best = max(s["fixed"].items(), key=lambda kv: kv[1][1])
            print(f"{Path(args.store).name} {split} (n = {s['n']}): oracle weight any@1/5/10 "
                  f"{s['oracle_weight']}; best fixed weight for any@5 {best[0]} {best[1]}; "
                  f"gold in the candidates {s['gold_in_candidates']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
