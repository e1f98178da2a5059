"""Relevant or nothing (issue 52): can one floor abstain on both LoCoMo and the coding notes?

The calibrated floor (brain/search/relevance.py: best cosine + 0.1 x keyword coverage, fitted
on LoCoMo) answers ``none`` on 0.85 of LoCoMo questions asked of another conversation, but
on the coding-notes set it hides a third of the answerable queries, whose templated,
keyword-like wording sits at cosines LoCoMo's unanswerable questions reach. This bench asks
whether any rule over the evidence a search can have without a cross-encoder does both:

- ``sim``: the best dense cosine of the candidates;
- ``covl``: the largest share of the query's BM25 terms one of the first three hits holds;
- ``missf``: the share of the query's terms that no note in scope holds at all (one
  single-term sparse probe per term, what the store can answer cheaply);
- ``covp`` / ``nmatch``: the share (count) of the terms that do exist in scope that the best
  of the first three hits holds;
- ``specmiss``: terms missing from the scope that the embedding model's WordPiece vocabulary
  splits into several pieces (rare, specific words: ``asyncsession``, ``opentelemetry``),
  a model-free prior on a term's specificity;
- ``wcov`` / ``holdr``: the lead hits' coverage with each term weighed by its rarity in scope
  (the score of its single-term probe's best hit, BM25's IDF on the store's own counts), and
  whether they hold the rarest term that exists;
- ``both1`` / ``bothr``: whether the lead hit was found by both legs, and the best sum of a
  lead hit's dense and keyword ranks;
- ``smean`` / ``smin`` / ``sfrac``: soft term coverage (:func:`_soft_cover`): per content word
  of the query, the best cosine between its embedding and a word of a lead hit (1 for a word
  the hit holds), so a paraphrase ("repaired" for "fixed") counts; the mean, the worst word
  and the share at >= 0.6, best of the first three hits.

Rules are fitted jointly on the dev halves of both sets (a grid over three families: the
calibrated floor; the floor or a lexical rescue; and a veto on a missing specific term),
under the constraint the issue sets (at most 0.008 of the answerable queries of either set
lose their top-5 gold), maximising the smaller of the two abstention rates; the best rules
are reported on the test halves. A fourth, learned family (:func:`learned`) scores each search
by a logistic fit over all the evidence on the dev halves. Stores are bulk-loaded (brain.memory.bulk), the product's
default onnx backend, every search the product's own ``_retrieve``.

    .venv/bin/python -m bench.relevance_fit [--rows rows.json] [--json out.json]

``--rows``: reuse (or write, when missing) the per-query evidence, so a new rule family can
be tried in seconds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import data_dir, open_brain
from bench.abstention import load_conversations

Row = dict[str, Any]
Rule = Callable[[Row], bool]
MAX_LOSS = 0.008  # the "any@5 drop <= 0.01", with a margin for the test half


def _evidence(m: Any, query: str, flt: Any, qv: Any, sparse: Any, keys: dict[str, str],
              gold: set[str] | None) -> Row:
    from brain.embedding.bm25 import BM25Encoder
    from brain.memory.core import embed_text
    from brain.memory.read import _retrieve
    from brain.vector_store import SparseVector

    enc = BM25Encoder()
    cands = _retrieve(m, qv, query, flt, 10, absolute=False)
    terms = list(sparse.indices)
    docs = [set(enc.document(embed_text(c.payload)).indices) for c in cands]
    probes = [m.store.query_sparse(SparseVector((t,), (1.0,)), flt, 1) for t in terms]
    present = [bool(p) for p in probes]
    rank = None
    if gold is not None:
        rank = next((r for r, c in enumerate(cands) if keys.get(c.payload["zk_id"]) in gold),
                    None)
    words = _words(query)
    soft = [_soft_cover(m, words, _words(embed_text(c.payload))) for c in cands[:3]]
    return {"q": query, "n_terms": len(terms), "rank": rank, "present": present,
            "words": words, "soft": soft,
            "sims": [c.similarity for c in cands],
            "bm25": [c.bm25 for c in cands], "legs": [dict(c.ranks) for c in cands],
            "idf": [p[0].score if p else 0.0 for p in probes],
            "term_in": [[t in d for t in terms] for d in docs]}


_WORD_VECS: dict[str, Any] = {}


def _words(text: str, limit: int = 300) -> list[str]:
    """The content words of a text (brain/memory/enrich.py's), each once, in order."""
    from brain.memory.enrich import content_words

    return list(dict.fromkeys(content_words(text[:20_000])))[:limit]


def _soft_cover(m: Any, query_words: list[str], doc_words: list[str]) -> list[float]:
    """Per query word, the best cosine between its embedding and a word of the document's (a
    word the document holds scores 1): soft term coverage, the paraphrase a query makes of
    the words its answer uses."""
    import numpy as np

    if not query_words or not doc_words:
        return [0.0] * len(query_words)
    new = [w for w in {*query_words, *doc_words} if w not in _WORD_VECS]
    if new:
        vecs = np.asarray(m.embedder.embed_documents(new), dtype=np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-9
        _WORD_VECS.update(zip(new, vecs, strict=True))
    q = np.stack([_WORD_VECS[w] for w in query_words])
    d = np.stack([_WORD_VECS[w] for w in doc_words])
    return [round(float(v), 4) for v in (q @ d.T).max(axis=1)]


def _pieces(rows: list[Row]) -> None:
    """Each query term's word and how many WordPiece tokens the model splits it into."""
    from tokenizers import Tokenizer

    from brain.embedding.bm25 import BM25Encoder
    from brain.embedding.registry import DEFAULT_MODEL, bundled_model_path

    folder = bundled_model_path(DEFAULT_MODEL)
    if folder is None:
        raise SystemExit(f"relevance_fit: {DEFAULT_MODEL} is not installed (make install)")
    tok = Tokenizer.from_file(str(next(folder.rglob("tokenizer.json"))))
    tok.no_padding()
    tok.no_truncation()
    enc = BM25Encoder()
    for r in rows:
        words: dict[int, str] = {}
        for w in re.findall(r"[A-Za-z0-9_.\-']+", r["q"]):
            for piece in [w, *re.split(r"[._\-']", w)]:
                for i in enc.query(piece).indices if piece else ():
                    words.setdefault(i, piece.lower())
        found = [words.get(i, "") for i in enc.query(r["q"]).indices]
        r["pieces"] = [len(tok.encode(w, add_special_tokens=False).ids) if w else 1
                       for w in found]


def collect(data: Path, log: Any = print) -> list[Row]:
    from bench.coding_notes import load as load_notes
    from bench.locomo import load
    from bench.splits import split_of
    from brain.embedding.credential import query_vector
    from brain.embedding.registry import DEFAULT_MODEL, REGISTRY, build_embedder
    from brain.memory import RecallFilter
    from brain.memory.bulk import BulkNote, bulk_add

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        brain = open_brain(Path(tmp), build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx"))
        try:
            m = brain.memory
            convs = load(data / "locomo10.json")
            splits = split_of("locomo")
            keys = load_conversations(m, convs)
            log("relevance_fit: LoCoMo loaded")
            for i, conv in enumerate(convs):
                other = convs[(i + 1) % len(convs)]
                for q in conv.questions:
                    qv = query_vector(m.embedder, q.text)
                    sparse = m.bm25.query(q.text)
                    for target, own in ((conv, True), (other, False)):
                        flt = m.build_filter(RecallFilter(project=target.project))
                        r = _evidence(m, q.text, flt, qv, sparse, keys[target.index],
                                      set(q.gold_turns) if own else None)
                        r.update(set="locomo", split=splits.get(conv.sample_id),
                                 answerable=own)
                        rows.append(r)
            notes = load_notes()
            halves = split_of("coding_notes")
            stored = [n for n in notes["notes"] if not n["held_out"]]
            res = bulk_add(m, [BulkNote(n["content"], project=notes["project"],
                                        note_kind=n.get("note_kind", n["kind"]), tags=n["tags"])
                               for n in stored])
            zk = dict(zip(res.zk_ids, [n["id"] for n in stored], strict=True))
            log("relevance_fit: coding notes loaded")
            for q in notes["queries"]:
                flt = m.build_filter(RecallFilter(
                    project=notes["project"],
                    include_contextual=bool((q.get("filters") or {}).get("include_contextual"))))
                r = _evidence(m, q["query"], flt, query_vector(m.embedder, q["query"]),
                              m.bm25.query(q["query"]), zk, set(q["gold"]) if q["gold"] else None)
                r.update(set="coding", split=halves.get(q["topic"]), answerable=bool(q["gold"]),
                         why=q.get("unanswerable"))
                rows.append(r)
        finally:
            brain.close()
    _pieces(rows)
    return rows


def derive(rows: list[Row]) -> None:
    for r in rows:
        sims = [s for s in r["sims"] if s is not None]
        r["sim"] = max(sims) if sims else 0.0
        n = r["n_terms"]
        r["covl"] = max((sum(t) / n for t in r["term_in"][:3]), default=0.0) if n else 0.0
        pres = r["present"]
        r["missf"] = sum(not p for p in pres) / n if n else 0.0
        npres = sum(pres)
        matched = [sum(1 for t, p in zip(ti, pres, strict=True) if t and p)
                   for ti in r["term_in"][:3]]
        r["nmatch"] = max(matched, default=0)
        r["covp"] = r["nmatch"] / npres if npres else 0.0
        r["specmiss"] = sum(1 for p, k in zip(pres, r["pieces"], strict=True) if not p and k >= 2)
        if "idf" not in r:  # rows written before the probes' scores were kept
            continue
        ordered = sorted(sims, reverse=True) + [0.0, 0.0]
        r["gap12"] = ordered[0] - ordered[1]
        idf, mass = r["idf"], sum(r["idf"]) or 1.0
        held = [sum(w for t, w in zip(ti, idf, strict=True) if t) / mass
                for ti in r["term_in"][:3]]
        r["wcov"] = max(held, default=0.0)
        r["wcov1"] = held[0] if held else 0.0
        here = [j for j, p in enumerate(pres) if p]
        rarest = max(here, key=lambda j: idf[j]) if here else None
        r["holdr"] = float(rarest is not None and any(ti[rarest] for ti in r["term_in"][:3]))
        legs = r["legs"]
        soft = [s for s in r.get("soft", [])[:3] if s]
        r["smean"] = max((sum(s) / len(s) for s in soft), default=0.0)
        r["smin"] = max((min(s) for s in soft), default=0.0)
        r["sfrac"] = max((sum(v >= 0.6 for v in s) / len(s) for s in soft), default=0.0)
        r["both1"] = float(bool(legs) and "dense" in legs[0] and "bm25" in legs[0])
        r["bothr"] = min([min(lg.get("dense", 99) + lg.get("bm25", 99), 20)
                          for lg in legs[:3]], default=20)


def evaluate(rows: list[Row], rule: Rule, split: str | None) -> dict[str, dict[str, float]]:
    """Per set: any@5 with the floor off, what the rule costs it, and the share of the
    unanswerable queries it answers ``none`` on."""
    out = {}
    for name in ("locomo", "coding"):
        sel = [r for r in rows if r["set"] == name and (split is None or r["split"] == split)]
        asked = [r for r in sel if r["answerable"]]
        other = [r for r in sel if not r["answerable"]]
        found = [r for r in asked if r["rank"] is not None and r["rank"] < 5]
        out[name] = {
            "any@5 off": round(len(found) / len(asked), 4),
            "any@5 lost": round(sum(not rule(r) for r in found) / len(asked), 4),
            "none on unanswerable": round(sum(not rule(r) for r in other) / len(other), 4),
        }
    return out


def _family(t: float, w: float, veto: float, mf: float, t2: float, cp: float,
            nm: int) -> Rule:
    def rule(r: Row) -> bool:
        if r["specmiss"] and r["sim"] < veto:
            return False
        return (r["sim"] + w * r["covl"] >= t
                or (r["missf"] <= mf and r["sim"] >= t2 and r["covp"] >= cp
                    and r["nmatch"] >= nm))
    return rule


GRID: dict[str, tuple[float, ...]] = {
    "t": (0.44, 0.46, 0.48, 0.49, 0.5, 0.52),
    "w": (0.0, 0.1, 0.2),
    "veto": (0.5, 0.55, 0.6, 0.65, 0.7, -9.0),  # -9: no veto
    "mf": (0.25, 0.34, 0.5, 1.01),  # 1.01 with cp 9: no rescue
    "t2": (0.0, 0.2, 0.3),
    "cp": (0.5, 0.67, 0.75, 1.0, 9.0),
    "nm": (1, 2),
}


def fit(rows: list[Row], top: int = 5) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for values in itertools.product(*GRID.values()):
        params: dict[str, Any] = dict(zip(GRID, values, strict=True))
        dev = evaluate(rows, _family(**params), "dev")
        if max(d["any@5 lost"] for d in dev.values()) > MAX_LOSS:
            continue
        score = min(d["none on unanswerable"] for d in dev.values())
        found.append({"params": params, "min none (dev)": score, "dev": dev})
    found.sort(key=lambda f: -f["min none (dev)"])
    for f in found[:top]:
        f["test"] = evaluate(rows, _family(**f["params"]), "test")
    return found[:top]


# The learned family: a logistic score over the evidence, one weight each, fitted on the dev
# halves; the threshold is the strictest that keeps the loss bound on dev. The class weights
# (the coding set's rows against LoCoMo's; the answerable queries whose gold is in the top 5,
# the only ones a floor can cost) are chosen on dev too.
FEATURES = ("sim", "gap12", "covl", "covp", "missf", "nmatch", "wcov", "wcov1", "both1",
            "bothr", "holdr")
SOFT = ("smean", "smin", "sfrac")  # soft term coverage (:func:`_soft_cover`)
CLASS_WEIGHTS = tuple(itertools.product((1.0, 3.0, 10.0), (1.0, 5.0, 20.0)))


def _logistic(x: Any, y: Any, w: Any, ridge: float = 1e-2) -> Any:
    import numpy as np

    b = np.zeros(x.shape[1])
    for _ in range(60):  # Newton's method; converges in well under 60 steps on these rows
        p = 1 / (1 + np.exp(-np.clip(x @ b, -30, 30)))
        grad = x.T @ (w * (p - y)) + ridge * b
        hess = (x.T * (w * p * (1 - p))) @ x + ridge * np.eye(len(b))
        b -= np.linalg.solve(hess, grad)
    return b


def _at_least(threshold: float) -> Rule:
    return lambda r: bool(r["_score"] >= threshold)


def _oracle(rows: list[Row]) -> dict[str, Any]:
    """The same score's best on the test halves with its threshold chosen on them too (the
    most abstention any threshold gives within the issue's 0.01 bound): an upper bound, not
    a result. Below 0.8, no threshold on this score can meet the issue."""
    import numpy as np

    best: dict[str, Any] = {}
    for t in np.linspace(-15, 15, 3001):
        ev = evaluate(rows, _at_least(float(t)), "test")
        if max(d["any@5 lost"] for d in ev.values()) <= 0.01:
            best = {"threshold": round(float(t), 2), **ev}  # the strictest that keeps the bound
    return best


def learned(rows: list[Row], features: tuple[str, ...] = FEATURES) -> dict[str, Any]:
    import numpy as np

    feats = [(*(r[f] for f in features), r["sim"] * r["wcov"]) for r in rows]
    x = np.asarray(feats, dtype=float)
    dev = np.array([r["split"] == "dev" for r in rows])
    x = (x - x[dev].mean(0)) / (x[dev].std(0) + 1e-9)
    x = np.hstack([x, np.ones((len(x), 1))])
    y = np.array([r["answerable"] for r in rows], dtype=float)
    found = [r["answerable"] and r["rank"] is not None and r["rank"] < 5 for r in rows]
    best: dict[str, Any] = {}
    for coding_w, found_w in CLASS_WEIGHTS:
        w = np.array([(coding_w if r["set"] == "coding" else 1.0) * (found_w if f else 1.0)
                      for r, f in zip(rows, found, strict=True)])
        b = _logistic(x[dev], y[dev], w[dev])
        score = x @ b
        for r, s in zip(rows, score, strict=True):
            r["_score"] = float(s)
        ok = [t for t in np.linspace(-15, 15, 3001)
              if max(d["any@5 lost"] for d in evaluate(
                  rows, _at_least(float(t)), "dev").values()) <= MAX_LOSS]
        if not ok:
            continue
        t = float(max(ok))
        dev_fit = evaluate(rows, _at_least(t), "dev")
        smallest = min(d["none on unanswerable"] for d in dev_fit.values())
        if not best or smallest > best["min none (dev)"]:
            best = {"class weights (coding, found)": [coding_w, found_w],
                    "weights": dict(zip([*features, "sim*wcov", "bias"],
                                        [round(float(v), 3) for v in b], strict=True)),
                    "threshold": round(t, 2), "min none (dev)": smallest, "dev": dev_fit,
                    "test": evaluate(rows, _at_least(t), "test"),
                    "test, threshold chosen on test": _oracle(rows)}
    for r in rows:
        r.pop("_score", None)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="folder of locomo10.json (default ../shared/bench)")
    ap.add_argument("--rows", help="per-query evidence: read when it exists, else written")
    ap.add_argument("--json", help="write the report here too")
    args = ap.parse_args()
    if args.rows and Path(args.rows).exists():
        rows = json.loads(Path(args.rows).read_text(encoding="utf-8"))
    else:
        rows = collect(data_dir(args.data))
        if args.rows:
            Path(args.rows).write_text(json.dumps(rows), encoding="utf-8")
    derive(rows)
    calibrated = _family(0.49, 0.10, -9.0, 1.01, 0.0, 9.0, 1)  # brain/search/relevance.py
    calibrated_kw = lambda r: calibrated(r) or r["covl"] >= 0.8  # noqa: E731 - its keyword arm
    report = {
        "calibrated floor": {h: evaluate(rows, calibrated_kw, h) for h in ("dev", "test")},
        "best joint fits": fit(rows),
    }
    if all("idf" in r for r in rows):
        report["learned (logistic over the evidence)"] = learned(rows)
    if all("soft" in r for r in rows):
        report["learned, with soft term coverage"] = learned(rows, FEATURES + SOFT)
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
