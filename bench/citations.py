"""Citations over a replayed git history: ``python -m bench.citations`` (or
``python -m bench --only citations``).

1. **Flags.** A repository is built in a temp dir from scripted commits: Python modules of
   functions (commit 0). A note cites each function at commit 0. Later commits
   replay what happens to code: lines moved (a header grows, functions swap places, a new
   function goes in front), bodies edited, functions renamed, files deleted, files renamed
   with ``git mv`` (some also edited, some rewritten so far that git's rename detection,
   50% similarity, does not pair them: the citation then finds its symbol in the one file
   git reports added, or reads ``gone``, a miss the figures would include). After each commit the source is synced (the indexer's
   callback re-checks the citing notes) and every note's state is compared with the truth
   the script keeps from its own diffs: ``gone`` once the function was renamed or its file
   deleted, else ``changed`` once its body was edited, else ``fresh``. Precision and recall
   of the stale flag (changed or gone), and of ``gone`` alone, over every (commit, note).
2. **Cost.** 10,000 notes cite 500 files (20 notes a file); one file is edited and
   ``CitationService.files_changed`` (what the indexer calls) re-checks it: p50 and p95
   over the runs. The notes citing no changed file are counted untouched. Then the same
   with 20 files, so that 500 notes cite the file that changes (a hot file).

The offline hash embedder is used: nothing here ranks by meaning.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@x", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env={**GIT_ENV, "HOME": str(root)}, timeout=60).stdout


# ------------------------------------------------------------------------------ the repository
@dataclass
class Fn:
    name: str
    body: list[str]
    truth: str = "fresh"


@dataclass
class Module:
    path: str
    header: list[str] = field(default_factory=lambda: ['"""A module."""', ""])
    fns: list[Fn] = field(default_factory=list)
    deleted: bool = False

    def text(self) -> str:
        out = list(self.header)
        for fn in self.fns:
            out += ["", "", *fn_lines(fn)]
        return "\n".join(out) + "\n"


def fn_lines(fn: Fn) -> list[str]:
    return [f"def {fn.name}(x, y=1):", *(f"    {ln}" for ln in fn.body)]


def body(rng: random.Random, n: int) -> list[str]:
    ops = ["x = x + {k}", "y = y * {k}", "if x > {k}:\n        x -= {k}", "x = abs(x - {k})",
           "y = min(y, {k})"]
    lines: list[str] = []
    for _ in range(n):
        lines += rng.choice(ops).format(k=rng.randint(1, 99)).split("\n    ")
    return [*lines, "return x + y"]


def build(root: Path, rng: random.Random, files: int, per_file: int) -> list[Module]:
    mods = []
    for i in range(files):
        m = Module(f"pkg/mod_{i:03d}.py")
        m.fns = [Fn(f"fn_{i}_{k}", body(rng, rng.randint(2, 6))) for k in range(per_file)]
        mods.append(m)
    write(root, mods)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "commit 0")
    return mods


def write(root: Path, mods: list[Module]) -> None:
    for m in mods:
        p = root / m.path
        if m.deleted:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(m.text())


def step(root: Path, mods: list[Module], rng: random.Random, n: int) -> dict[str, int]:
    """One commit of ``n`` operations on the live modules; the truth is kept on each Fn."""
    done: dict[str, int] = {}
    live = [m for m in mods if not m.deleted]
    for _ in range(n):
        m = rng.choice(live)
        if m.deleted or not m.fns:
            continue
        op = rng.choice(("header", "swap", "insert", "edit", "edit", "rename_fn", "delete",
                         "git_mv", "git_mv_edit", "header", "swap", "edit", "git_mv_rewrite"))
        if op == "header":  # every function moves down, none changes
            m.header = [*m.header[:-1], f"# note {rng.randint(0, 9999)}", ""]
        elif op == "swap" and len(m.fns) > 1:
            a, b = rng.sample(range(len(m.fns)), 2)
            m.fns[a], m.fns[b] = m.fns[b], m.fns[a]
        elif op == "insert":
            m.fns.insert(0, Fn(f"new_{rng.randint(0, 10**9)}", body(rng, 2), truth="new"))
        elif op in ("edit", "git_mv_edit"):
            fn = rng.choice(m.fns)
            fn.body = [*fn.body[:-1], f"x = x ^ {rng.randint(100, 999)}", fn.body[-1]]
            if fn.truth == "fresh":
                fn.truth = "changed"
        elif op == "git_mv_rewrite":  # moved and mostly rewritten: git may not see a rename
            for fn in m.fns:
                fn.body = body(rng, rng.randint(2, 6))
                if fn.truth == "fresh":
                    fn.truth = "changed"
        elif op == "rename_fn":
            fn = rng.choice(m.fns)
            fn.name = f"{fn.name}_renamed"
            if fn.truth != "new":
                fn.truth = "gone"
        elif op == "delete" and len(live) > 3:
            os.remove(root / m.path)
            m.deleted = True
            for fn in m.fns:
                fn.truth = "gone" if fn.truth != "new" else "new"
            live.remove(m)
        if op.startswith("git_mv") and not m.deleted:
            new = f"pkg/moved_{rng.randint(0, 10**9)}.py"
            write(root, [m])  # the edit (if any) lands with the move
            git(root, "mv", m.path, new)
            m.path = new
        done[op] = done.get(op, 0) + 1
    write(root, mods)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "step")
    return done


# ------------------------------------------------------------------------------ measurement
def _brain(home: Path) -> Any:
    from brain.app import Brain
    from brain.embedding.registry import REGISTRY, HashEmbedder
    from config import load_settings

    settings = load_settings(home=home, paths={"allowed_roots": [str(home.parent)]})
    settings.embedding.model = "offline/hash-384"
    return Brain(settings, embedder=HashEmbedder(REGISTRY["offline/hash-384"])).open()


def _sync(brain: Any) -> None:
    job = brain.sources.sync("repo", wait=True, timeout=600)
    if job["status"] != "done":
        raise RuntimeError(f"sync failed: {job}")


def flags(tmp: Path, files: int, per_file: int, commits: int, ops: int,
          seed: int, log: Any = print) -> dict[str, Any]:
    rng = random.Random(seed)
    root = tmp / "repo"
    mods = build(root, rng, files, per_file)
    brain = _brain(tmp / "home")
    try:
        brain.sources.add(str(root), name="repo", project="bench", sync=False)
        _sync(brain)
        notes: list[tuple[str, Fn]] = []
        for m in mods:
            for fn in m.fns:
                zk = brain.memory.add(f"{fn.name} adds and scales its inputs", "bench",
                                      cites=[f"{m.path}::{fn.name}"], autolink=False).note
                notes.append((zk["zk_id"], fn))
        log(f"citations: {len(notes)} notes cite functions at commit 0")
        counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "gone_tp": 0, "gone_fp": 0, "gone_fn": 0,
                  "exact": 0, "total": 0}
        ops_done: dict[str, int] = {}
        for c in range(1, commits + 1):
            for k, v in step(root, mods, rng, ops).items():
                ops_done[k] = ops_done.get(k, 0) + v
            _sync(brain)
            for zk, fn in notes:
                got = brain.memory.get_payload(zk).get("cite_state")
                truth = fn.truth
                stale_t, stale_g = truth != "fresh", got != "fresh"
                counts["tp"] += stale_t and stale_g
                counts["fp"] += stale_g and not stale_t
                counts["fn"] += stale_t and not stale_g
                counts["tn"] += not stale_t and not stale_g
                counts["gone_tp"] += truth == "gone" and got == "gone"
                counts["gone_fp"] += truth != "gone" and got == "gone"
                counts["gone_fn"] += truth == "gone" and got != "gone"
                counts["exact"] += truth == got
                counts["total"] += 1
            log(f"citations: commit {c}: {counts}")
        truth_final = {s: sum(fn.truth == s for _, fn in notes) for s in ("fresh", "changed",
                                                                          "gone")}
    finally:
        brain.close()

    def ratio(a: int, b: int) -> float:
        return round(a / b, 4) if b else 1.0

    return {
        "files": files, "functions_cited": len(notes), "commits": commits,
        "operations": ops_done, "truth_at_end": truth_final, "counts": counts,
        "stale_precision": ratio(counts["tp"], counts["tp"] + counts["fp"]),
        "stale_recall": ratio(counts["tp"], counts["tp"] + counts["fn"]),
        "gone_precision": ratio(counts["gone_tp"], counts["gone_tp"] + counts["gone_fp"]),
        "gone_recall": ratio(counts["gone_tp"], counts["gone_tp"] + counts["gone_fn"]),
        "state_accuracy": ratio(counts["exact"], counts["total"]),
    }


def cost(tmp: Path, notes: int, files: int, runs: int, seed: int,
         log: Any = print) -> dict[str, Any]:
    from brain.citation import Ref, key_of, note_state
    from brain.citations import anchor
    from brain.memory.bulk import BulkNote, bulk_add

    rng = random.Random(seed)
    root = tmp / f"scale_{files}"
    per_file = 10
    mods = []
    for i in range(files):
        m = Module(f"src/m{i:04d}.py")
        m.fns = [Fn(f"f{i}_{k}", body(rng, 3)) for k in range(per_file)]
        mods.append(m)
    write(root, mods)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    brain = _brain(tmp / f"home_scale_{files}")
    try:
        rec = brain.sources.add(str(root), name="repo", project="bench", sync=False)["source"]
        _sync(brain)
        now = "2026-12-01T00:00:00+00:00"
        cites: dict[tuple[int, int], dict[str, Any]] = {}
        for i, m in enumerate(mods):
            for k, fn in enumerate(m.fns):
                c = anchor.anchor(str(root), m.path, Ref(m.path, fn.name), "explicit",
                                  brain.citations.repos, now, lambda t: t)
                assert c is not None
                cites[(i, k)] = {**c, "src": rec["id"]}
        items = []
        for n in range(notes):
            i, k = n % files, (n // files) % per_file
            c = cites[(i, k)]
            items.append(BulkNote(f"note {n} on {mods[i].fns[k].name}", project="bench",
                                  extra={"cites": [c], "cite_keys": [key_of(rec["id"], c["path"])],
                                         "cite_state": note_state([c])}))
        t = time.perf_counter()
        bulk_add(brain.memory, items, batch=1024)
        log(f"citations cost: {notes} notes over {files} files in "
            f"{time.perf_counter() - t:.1f} s")
        brain.store.optimize()
        target = mods[0]
        original = target.fns[0].body
        times: list[float] = []
        checked: list[int] = []
        before = dict(brain.citations.counters)
        for r in range(runs):
            target.fns[0].body = original if r % 2 else [*original[:-1], "x = -x", original[-1]]
            write(root, [target])
            t = time.perf_counter()
            checked.append(brain.citations.files_changed(rec["id"], {target.path}))
            times.append((time.perf_counter() - t) * 1000)
        after = brain.citations.counters
        ms = sorted(times)
        return {
            "notes": notes, "files": files, "notes_per_file": notes // files, "runs": runs,
            "recheck_ms_p50": round(statistics.median(ms), 2),
            "recheck_ms_p95": round(ms[int(0.95 * (len(ms) - 1))], 2),
            "notes_checked_per_run": sorted(set(checked)),
            "notes_updated": after["notes_updated"] - before["notes_updated"],
            "notes_untouched_per_run": notes - max(checked),
        }
    finally:
        brain.close()


def run(scratch: Path | None = None, quick: bool = False, log: Any = print) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        tmp = Path(d)
        out = {"flags": flags(tmp, 20 if quick else 40, 8, 6 if quick else 12, 12, seed=7,
                              log=log)}
        n = 2000 if quick else 10_000
        out["cost"] = cost(tmp, n, n // 20, 20 if quick else 40, seed=11, log=log)
        # A hot file: 500 of the notes cite the one that changes (each edit moves its size
        # and mtime, recorded on every citing note, so all 500 are written).
        out["cost_hot_file"] = cost(tmp, n, n // 500, 10 if quick else 20, seed=13, log=log)
        return out


def section(r: dict[str, Any]) -> str:
    """The report's rows (bench/report.py)."""
    f, c, hot = r["flags"], r["cost"], r.get("cost_hot_file")
    return "\n".join([
        f"Stale flags over a replayed history ({f['files']} files, {f['functions_cited']} cited "
        f"functions, {f['commits']} commits; {f['counts']['total']} (commit, note) checks):",
        "",
        "| stale precision | stale recall | gone precision | gone recall | exact state |",
        "|---|---|---|---|---|",
        f"| {f['stale_precision']} | {f['stale_recall']} | {f['gone_precision']} | "
        f"{f['gone_recall']} | {f['state_accuracy']} |",
        "",
        f"Re-check of one changed file at {c['notes']:,} notes ({c['notes_per_file']} citing "
        f"it): p50 {c['recheck_ms_p50']} ms, p95 {c['recheck_ms_p95']} ms; "
        f"{c['notes_untouched_per_run']:,} notes untouched per re-check.",
        *([f"A hot file ({hot['notes_per_file']} of {hot['notes']:,} notes cite it): p50 "
           f"{hot['recheck_ms_p50']} ms, p95 {hot['recheck_ms_p95']} ms."] if hot else []),
    ])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.citations", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a smaller history and 2,000 notes")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(json.dumps(run(quick=args.quick), indent=2))


if __name__ == "__main__":
    main()
