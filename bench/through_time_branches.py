"""Branch scope over a scripted git history: ``python -m bench.through_time_branches`` (or
``python -m bench --only through_time_branches``).

A repository is built in a temp dir (bench/citations.py's scripted modules, commit 0 on the
default branch). Then branches are made one after the other, each from the default branch as
it is then, with a commit of its own: two in three are checked out in the main work tree
(their notes cite code: ``cites``), one in three lives in a linked ``git worktree`` where a
hook turn runs (brain/hooks/events.py records the turn's work tree and branch; its notes cite
nothing and are scoped by the hook). Each branch gets facts only true there ("on br_3 the
retry limit is 37 ..."), plus a note citing nothing written in the main work tree without
hooks (project-wide, as always). Two branches later each branch meets its fate: about half
merge into the default branch (``--no-ff`` or fast-forward, some then deleted), a quarter are
deleted unmerged (``branch -D``, their worktree removed), the rest stay open to the end.

After every step, each fact's query is asked on its own branch, on the default branch and
on another open branch, through search_memory's path (``MemoryService.search``, default
filters: the caller's branch as git and the hook turn say). Reported:

- **leaks**: a branch-only fact among the hits on another branch while its branch is open
  (target 0);
- **own branch**: the fact among the hits on its branch (it is not lost there);
- **promotions**: notes of merged branches promoted to project-wide, and found on the
  default branch afterwards (target: all);
- **archives**: notes of branches deleted unmerged, archived (target: all);
- **wrong moves**: notes of still-open branches promoted or archived (target 0);
- **project-wide**: notes citing nothing, from no hook, found on every branch.

Git is asked again after each git command (``BranchGit.state(root, fresh=True)``) rather
than waiting out the 2 s cache, as a real session's next call after that would. The offline
hash embedder is used: what is measured is which notes a branch may see, not ranking.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.citations import _brain, build, git

PROJECT = "bench"
TOP_K = 10


@dataclass
class Branch:
    name: str
    hooked: bool  # in a linked worktree with a hook turn (else checked out in the main tree)
    fate: str  # merge | merge_ff | merge_delete | abandon | open
    worktree: str = ""
    facts: list[tuple[str, str]] = field(default_factory=list)  # (zk_id, query)
    done: bool = False


class History:
    def __init__(self, tmp: Path, rng: random.Random, log: Any) -> None:
        from brain.hooks import client as hook_client
        from brain.hooks import events

        self.tmp, self.rng, self.log = tmp, rng, log
        self.root = tmp / "repo"
        build(self.root, rng, 4, 3)
        self.default = git(self.root, "rev-parse", "--abbrev-ref", "HEAD").strip()
        self.brain = _brain(tmp / "home")
        self.brain.sources.add(str(self.root), name="repo", project=PROJECT, sync=False)
        job = self.brain.sources.sync("repo", wait=True, timeout=600)
        if job["status"] != "done":
            raise RuntimeError(f"sync failed: {job}")
        self.events, self.hook_client = events, hook_client
        owner = hook_client.Owner(tmp / "home", {"user_id": "default", "agent_id": "default"})

        class Args:
            project = PROJECT

        self.ctx = events.Context(tmp / "home", owner, Args())
        self.checked_out = self.default

    # -------------------------------------------------------------- where the agent is
    def _fresh(self, *roots: str) -> None:
        for r in (str(self.root), *roots):
            self.brain.citations.branches.git.state(r, fresh=True)

    def _no_hooks(self) -> None:
        with self.hook_client.state(self.tmp / "home") as st:
            st.pop("turns", None)

    def be_on(self, name: str, branches: dict[str, Branch]) -> None:
        """The agent works on ``name``: in its worktree through a hook turn, or checked out
        in the main work tree with no hooks."""
        b = branches.get(name)
        if b is not None and b.hooked:
            self.events.new_turn({"session_id": "bench", "cwd": b.worktree}, PROJECT, self.ctx)
            self._fresh(b.worktree)
            return
        self._no_hooks()
        if self.checked_out != name:
            git(self.root, "checkout", "-q", name)
            self.checked_out = name
        self._fresh()

    def hits(self, query: str) -> set[str]:
        from brain.memory import RecallFilter

        found = self.brain.memory.search(query, TOP_K, RecallFilter(project=PROJECT),
                                         stamp=False)
        return {h["zk_id"] for h in found}


def _fates(n: int, rng: random.Random) -> list[str]:
    pool = ["merge", "merge_ff", "merge_delete", "merge", "abandon", "abandon", "open", "open"]
    return [pool[i % len(pool)] for i in rng.sample(range(n), n)]


def run(scratch: Path | None = None, quick: bool = False, log: Any = print,
        branches: int | None = None) -> dict[str, Any]:
    n = branches or (12 if quick else 24)
    facts_per_branch = 3
    rng = random.Random(17)
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        h = History(Path(d), rng, log)
        try:
            return _script(h, n, facts_per_branch, rng)
        finally:
            h.brain.close()


def _script(h: History, n: int, per: int, rng: random.Random) -> dict[str, Any]:
    c = {k: 0 for k in ("leak_checks", "leaks", "own_checks", "own_found", "wide_checks",
                        "wide_found", "merged_notes", "promoted", "promoted_found",
                        "abandoned_notes", "archived", "wrong_moves", "scoped_notes",
                        "hook_notes")}
    branches: dict[str, Branch] = {}
    wide: list[tuple[str, str]] = []
    fates = _fates(n, rng)
    m = h.brain.memory

    def ask_all() -> None:
        live = [b for b in branches.values() if not b.done]
        for b in branches.values():
            for zk, q in b.facts:
                if b.done:
                    continue
                views = {b.name, h.default}
                others = [o.name for o in live if o.name != b.name]
                if others:
                    views.add(rng.choice(others))
                for view in sorted(views):
                    h.be_on(view, branches)
                    got = h.hits(q)
                    if view == b.name:
                        c["own_checks"] += 1
                        c["own_found"] += zk in got
                    else:
                        c["leak_checks"] += 1
                        c["leaks"] += zk in got
        for zk, q in wide:
            h.be_on(rng.choice([h.default, *[b.name for b in live]]), branches)
            c["wide_checks"] += 1
            c["wide_found"] += zk in h.hits(q)

    def settle(b: Branch) -> None:
        """The branch's fate; then the default branch is asked its facts."""
        h.be_on(h.default, branches)
        if b.fate.startswith("merge"):
            # a fast-forward only where the default branch has not moved since the fork
            ff = b.fate == "merge_ff" and not git(h.root, "rev-list", f"{b.name}..{h.default}")
            args = ["--ff-only"] if ff else ["--no-ff", "-m", f"merge {b.name}"]
            git(h.root, "merge", "-q", *args, b.name)
            if b.worktree and b.fate == "merge_delete":
                git(h.root, "worktree", "remove", "--force", b.worktree)
            if b.fate == "merge_delete":
                git(h.root, "branch", "-d", b.name)
        elif b.fate == "abandon":
            if b.worktree:
                git(h.root, "worktree", "remove", "--force", b.worktree)
            git(h.root, "branch", "-D", b.name)
        else:
            return
        b.done = True
        h.be_on(h.default, branches)  # the search on the default branch sees the change
        for zk, q in b.facts:
            found = zk in h.hits(q)
            p = m.get_payload(zk, include_forgotten=True)
            if b.fate.startswith("merge"):
                c["merged_notes"] += 1
                c["promoted"] += p.get("branch_state") == "merged"
                c["promoted_found"] += found
            else:
                c["abandoned_notes"] += 1
                c["archived"] += (p.get("branch_state"), p.get("memory_type")) == (
                    "abandoned", "archived")

    for i in range(n):
        name = f"br_{i:02d}"
        b = branches[name] = Branch(name, hooked=i % 3 == 2, fate=fates[i])
        h.be_on(h.default, branches)
        if b.hooked:
            b.worktree = str(h.tmp / f"wt_{name}")
            git(h.root, "worktree", "add", "-q", "-b", name, b.worktree)
            work = Path(b.worktree)
        else:
            git(h.root, "checkout", "-q", "-b", name)
            h.checked_out = name
            work = h.root
        (work / f"pkg/{name}.py").write_text(f"def limit_{i}():\n    return {i + 30}\n")
        git(work, "add", "-A")
        git(work, "commit", "-qm", f"{name}: its own change")
        h.be_on(name, branches)
        for k in range(per):
            setting = f"setting_{i}_{k}"
            text = (f"On {name} the {setting} retry limit is {i * 10 + k} attempts for the "
                    f"job queue {setting} worker")
            cites = [] if b.hooked else [f"pkg/{name}.py::limit_{i}"]
            note = m.add(text, PROJECT, cites=cites, autolink=False).note
            c["scoped_notes"] += "branch" in note
            c["hook_notes"] += b.hooked and "branch" in note
            b.facts.append((note["zk_id"], f"{setting} retry limit attempts job queue worker"))
        h.be_on(h.default, branches)
        zk = m.add(f"Project-wide fact {i}: the build {i} uses cache tier {i}", PROJECT,
                   autolink=False).note["zk_id"]
        wide.append((zk, f"build {i} cache tier {i} project-wide fact"))
        ask_all()
        if i >= 2:
            settle(branches[f"br_{i - 2:02d}"])
    for b in list(branches.values())[-2:]:
        settle(b)
    ask_all()
    for b in branches.values():  # nothing of a branch still open moved
        if b.done:
            continue
        for zk, _ in b.facts:
            p = m.get_payload(zk, include_forgotten=True)
            c["wrong_moves"] += p.get("branch_state") != "open" or p.get("memory_type") != (
                "permanent")
    merged = sum(b.fate.startswith("merge") for b in branches.values())
    abandoned = sum(b.fate == "abandon" for b in branches.values())

    def ratio(a: int, b: int) -> float:
        return round(a / b, 4) if b else 1.0

    return {
        "branches": n, "merged": merged, "abandoned": abandoned,
        "still_open": n - merged - abandoned, "hooked_branches": sum(
            b.hooked for b in branches.values()), "facts_per_branch": per,
        "counts": c, "sweeps": dict(h.brain.citations.branches.counters),
        "leak_rate": ratio(c["leaks"], c["leak_checks"]),
        "own_branch_found": ratio(c["own_found"], c["own_checks"]),
        "promoted_share": ratio(c["promoted"], c["merged_notes"]),
        "promoted_found_share": ratio(c["promoted_found"], c["merged_notes"]),
        "archived_share": ratio(c["archived"], c["abandoned_notes"]),
        "project_wide_found": ratio(c["wide_found"], c["wide_checks"]),
    }


def section(r: dict[str, Any]) -> str:
    """The report's rows (bench/report.py)."""
    c = r["counts"]
    return "\n".join([
        f"Branch scope over a scripted history ({r['branches']} branches, "
        f"{r['hooked_branches']} of them in linked worktrees with hook turns; {r['merged']} "
        f"merged, {r['abandoned']} deleted unmerged, {r['still_open']} open at the end; "
        f"{r['facts_per_branch']} branch-only facts each):",
        "",
        "| leaks to other branches | found on own branch | promoted on merge | found on the "
        "default branch after merge | archived when abandoned | wrong moves | project-wide "
        "found |",
        "|---|---|---|---|---|---|---|",
        f"| {c['leaks']} / {c['leak_checks']} | {r['own_branch_found']} | "
        f"{c['promoted']} / {c['merged_notes']} | {r['promoted_found_share']} | "
        f"{c['archived']} / {c['abandoned_notes']} | {c['wrong_moves']} | "
        f"{r['project_wide_found']} |",
    ])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.through_time_branches",
                                description=__doc__)
    p.add_argument("--quick", action="store_true", help="12 branches instead of 24")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = run(quick=args.quick)
    print(json.dumps(out, indent=2))
    print(section(out))


if __name__ == "__main__":
    main()
