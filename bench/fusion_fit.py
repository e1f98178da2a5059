"""Fit the query-adaptive dense weight (brain/search/adaptive.py) on the LoCoMo dev half, report
it on the test half.

Reads LoCoMo stores a bench run left behind (turn level and, optionally, session level:
``python -m bench --only locomo --locomo-parts systems --no-bulk --no-write`` logs
"... into <path>"), takes each question's dense and BM25 legs exactly as search_memory reads
them (the same filter, the same number of candidates), and ranks them with the product's own
``brain.search.fusion.fuse_legs`` at a grid of dense weights. The rule's parameters are then
chosen by coordinate search to maximise the dev questions' mean of any@1, any@5 and any@10
(levels weighed alike); the test questions never touch the fit. A tie keeps the smaller
coefficient, so a feature that does not help stays at 0.

    python -m bench.fusion_fit TURN_STORE [--session SESSION_STORE] [--write] [--json OUT]

``--write`` writes the fitted values to brain/search/fitted.json, the data file the product
reads (brain/search/fitted.py); the bench writes no code. The figures printed are
the simulation's (the legs ranked in this process); the product's own figures come from
``make bench`` (search_memory through the MCP client, the default row).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

KS = (1, 5, 10)
GRID = np.round(np.arange(0.0, 1.0001, 0.025), 3)
STEPS = (0.2, 0.1, 0.05, 0.02, 0.01)
SWEEPS = 6
FITTED_JSON = Path(__file__).resolve().parent.parent / "brain" / "search" / "fitted.json"


@dataclass
class Level:
    """One store's questions: features [Q, F], the first gold rank at each grid weight
    [Q, G] (len(KS) cutoffs apply; 10 = not in the top 10), and each question's split."""

    name: str
    feats: np.ndarray
    ranks: np.ndarray
    splits: np.ndarray


def collect(store: str, level: str, data: str | None, log: Any = print) -> Level:
    from bench import data_dir, open_brain
    from bench.locomo import load
    from bench.splits import split_of
    from brain.embedding.registry import REGISTRY, build_embedder
    from brain.memory import RecallFilter
    from brain.memory.filters import build_filter
    from brain.notes import point_id
    from brain.search.adaptive import features
    from brain.search.fusion import LEG_FIELDS, fuse_legs
    from config import EmbeddingSettings

    home = Path(store)
    maps = {int(k): v for k, v in json.loads((home / "bench-maps.json").read_text()).items()}
    convs = [c for c in load(data_dir(data) / "locomo10.json") if c.index in maps]
    embedder = build_embedder(REGISTRY["sentence-transformers/all-MiniLM-L6-v2"],
                              backend=EmbeddingSettings().backend)
    brain = open_brain(home, embedder)
    r = brain.settings.retrieval
    n = max(r.candidates, max(KS))
    splits = split_of("locomo")
    feats, ranks, names = [], [], []
    try:
        for conv in convs:
            key_of = {point_id(k): v for k, v in maps[conv.index].items()}
            flt = build_filter(brain.memory, RecallFilter(project=conv.project))
            for q in conv.questions:
                sv = brain.bm25.query(q.text)
                dense = brain.store.query_dense(embedder.embed_query(q.text).tolist(), flt, n,
                                                fields=LEG_FIELDS)
                sparse = brain.store.query_sparse(sv, flt, n, fields=LEG_FIELDS)
                gold = q.gold_turns if level == "turn" else q.gold_sessions
                row = []
                for w in GRID:
                    fused = fuse_legs(dense, sparse, "dbsf", dense_weight=float(w),
                                      rrf_k=r.rrf_k, code_dense_weight=r.code_dense_weight,
                                      neighbour_weight=r.neighbour_weight,
                                      lead_gap=r.keyword_lead)
                    top = [key_of.get(c.id) for c in fused[:max(KS)]]
                    row.append(next((i for i, k in enumerate(top) if k in gold), max(KS)))
                ranks.append(row)
                feats.append(features(dense, sparse, len(sv.indices)))
                names.append(splits.get(conv.sample_id) or "none")
        base = r.dense_weight
    finally:
        brain.close()
    log(f"{level}: {len(ranks)} questions from {home} (base dense_weight {base})")
    return Level(level, np.asarray(feats, float), np.asarray(ranks, int), np.asarray(names))


def save_levels(path: Path, levels: list[Level]) -> None:
    arrays: dict[str, np.ndarray] = {}
    for lv in levels:
        arrays |= {f"{lv.name}.feats": lv.feats, f"{lv.name}.ranks": lv.ranks,
                   f"{lv.name}.splits": lv.splits}
    np.savez(path, **arrays)  # type: ignore[arg-type]


def load_levels(path: Path) -> list[Level]:
    with np.load(path) as z:
        names = dict.fromkeys(k.split(".")[0] for k in z.files)
        return [Level(n, z[f"{n}.feats"], z[f"{n}.ranks"], z[f"{n}.splits"]) for n in names]


def _scores(lv: Level, weights: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """any@k of the questions under ``mask``, each at its own weight (snapped to the grid)."""
    idx = np.clip(np.rint(weights / 0.025).astype(int), 0, len(GRID) - 1)
    r = lv.ranks[np.arange(len(idx)), idx][mask]
    return np.array([(r < k).mean() for k in KS]) if len(r) else np.zeros(len(KS))


def _weights(lv: Level, base: float, p: dict[str, Any]) -> np.ndarray:
    z = (lv.feats - np.asarray(p["mean"])) / np.asarray(p["scale"])
    return np.clip(base + p["shift"] + z @ np.asarray(p["coef"]), p["low"], p["high"])


def objective(levels: list[Level], base: float, p: dict[str, Any], split: str) -> float:
    return float(np.mean([_scores(lv, _weights(lv, base, p), lv.splits == split).mean()
                          for lv in levels]))


def fit(levels: list[Level], base: float) -> dict[str, Any]:
    from brain.search.adaptive import FEATURES

    dev = np.concatenate([lv.feats[lv.splits == "dev"] for lv in levels])
    scale = dev.std(axis=0)
    p: dict[str, Any] = {"features": list(FEATURES), "shift": 0.0,
                         "mean": dev.mean(axis=0).round(6).tolist(),
                         "scale": np.where(scale > 1e-9, scale, 1.0).round(6).tolist(),
                         "coef": [0.0] * len(FEATURES), "low": 0.05, "high": 0.95}
    best = objective(levels, base, p, "dev")
    for step in STEPS:
        for _ in range(SWEEPS):
            moved = False
            for j in range(len(FEATURES) + 1):
                for sign in (1, -1):
                    q = {**p, "coef": list(p["coef"])}
                    if j == 0:
                        q["shift"] = round(p["shift"] + sign * step, 4)
                    else:
                        q["coef"][j - 1] = round(p["coef"][j - 1] + sign * step, 4)
                    val = objective(levels, base, q, "dev")
                    if val > best + 1e-9:
                        best, p, moved = val, q, True
            if not moved:
                break
    return p


def report(levels: list[Level], base: float, p: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for lv in levels:
        for split in ("dev", "test"):
            mask = lv.splits == split
            fixed = _scores(lv, np.full(len(lv.ranks), base), mask)
            adapt = _scores(lv, _weights(lv, base, p), mask)
            oracle = [(lv.ranks[mask] < k).any(axis=1).mean() for k in KS]
            out[f"{lv.name} {split}"] = {
                "n": int(mask.sum()), "fixed": fixed.round(4).tolist(),
                "adaptive": adapt.round(4).tolist(), "oracle": np.round(oracle, 4).tolist()}
    return out


def write_fitted(p: dict[str, Any], path: Path | None = None) -> Path:
    """Write the fit as JSON (atomically) where the product reads it; returns the file."""
    target = path or FITTED_JSON
    staged = target.with_name(target.name + ".tmp")
    staged.write_text(json.dumps(p, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(staged, target)
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fusion_fit", description=__doc__)
    ap.add_argument("turn", help="a LoCoMo turn-level store home")
    ap.add_argument("--session", default=None, help="a LoCoMo session-level store home")
    ap.add_argument("--data", default=None)
    ap.add_argument("--write", action="store_true", help="write brain/search/fitted.json")
    ap.add_argument("--json", default=None)
    ap.add_argument("--levels", default=None,
                    help="keep the collected legs' figures in this .npz and reuse them when it "
                         "exists (refitting then takes seconds; delete it after a store change)")
    ap.add_argument("--fit-on", default=None, choices=("turn", "session"),
                    help="fit on one level's dev half only (default: both levels alike)")
    args = ap.parse_args(argv)
    from config import RetrievalSettings

    base = RetrievalSettings().dense_weight
    cache = Path(args.levels) if args.levels else None
    if cache is not None and cache.is_file():
        levels = load_levels(cache)
    else:
        levels = [collect(args.turn, "turn", args.data)]
        if args.session:
            levels.append(collect(args.session, "session", args.data))
        if cache is not None:
            save_levels(cache, levels)
    p = fit([lv for lv in levels if args.fit_on in (None, lv.name)], base)
    figures = report(levels, base, p)
    for name, row in figures.items():
        print(f"{name} (n = {row['n']}): any@1/5/10 fixed {row['fixed']}  adaptive "
              f"{row['adaptive']}  oracle {row['oracle']}", flush=True)
    print("fitted:", json.dumps(p), flush=True)
    if args.write:
        print(f"wrote {write_fitted(p)}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"fitted": p, "figures": figures}, indent=2)
                                   + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
