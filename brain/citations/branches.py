"""Branch scope: a note written on a git branch stays on that branch until it merges.

Where a project is a git work tree, a note that cites code (brain/citations/service.py) or
comes from a hook turn on a branch (brain/hooks/events.py records the turn's branch and work
tree) records where it was written: ``branch``, ``worktree``, ``branch_root`` (the folder git
is asked in), ``branch_head`` and ``branch_base`` (the branch's commit then, and where it forked
from the default branch), ``branch_state`` and ``branch_open`` (1 while scoped: a number, as
booleans do not match reliably on every backend). A note written on the default branch, on a
detached HEAD, or without git is project-wide, as every note was before.

Visibility (:meth:`BranchScope.current`, brain/memory/filters.py ``branch_conditions``): an
open note is shown on its branch only; another branch sees it when it asks (the ``branch``
filter: a name, or ``"*"`` for all).

Promotion (:meth:`BranchScope.sweep`): when git reports a new commit or a moved, created or
deleted branch in a root (checked, at most every STATE_TTL_S, whenever the current branch is
asked for, and when a source sync sees its files change), the open notes are checked: a branch
whose head (the one git shows now, or the last one seen before it was deleted) is reachable
from the default branch and is past the note's fork point has merged, and its notes become
project-wide (``branch_state`` "merged"); a deleted branch that never merged has its notes
archived (``branch_state`` "abandoned"; restore_note brings one back), never deleted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brain.citations.git import GitError, available, run
from brain.memory import hype
from brain.notes import point_id
from brain.vector_store import Filter, Match, Range, scroll_all

if TYPE_CHECKING:
    from brain.citations.turns import TurnFiles
    from brain.memory import MemoryService

log = logging.getLogger(__name__)

STATE_TTL_S = 2.0  # a root's branch facts are reused this long (a burst of calls asks once)
DEFAULT_TTL_S = 60.0  # what git names the default branch is asked again after this long
ALL = "*"  # the branch filter that shows every branch's notes
OPEN, MERGED, ABANDONED = "open", "merged", "abandoned"


@dataclass(frozen=True, slots=True)
class RootState:
    """What git says of one work tree: its top folder, its repository (the git dir its
    worktrees share), the branch checked out ("" when detached), HEAD, the default branch
    ("" when none is known) and every local branch's head."""

    top: str
    repo: str
    branch: str
    head: str
    default: str
    heads: dict[str, str] = field(default_factory=dict)

    def fingerprint(self) -> tuple[Any, ...]:
        return (self.head, tuple(sorted(self.heads.items())))


class BranchGit:
    """Branch facts per work tree through the ``git`` command, cached for STATE_TTL_S."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = available() if enabled is None else enabled
        self._states: dict[str, tuple[float, RootState | None]] = {}
        self._names: dict[str, tuple[float, tuple[str, ...]]] = {}  # root -> default's names
        self._lock = threading.Lock()

    def state(self, root: str, fresh: bool = False) -> RootState | None:
        """``root``'s branch facts, or None (no git, not a work tree, no commit yet)."""
        if not self.enabled or not root:
            return None
        now = time.monotonic()
        with self._lock:
            cached = self._states.get(root)
        if cached is not None and now - cached[0] < STATE_TTL_S and not fresh:
            return cached[1]
        found = self._read(root)
        with self._lock:
            if len(self._states) > 1024:
                self._states.clear()
            self._states[root] = (now, found)
        return found

    def _read(self, root: str) -> RootState | None:
        if not os.path.isdir(root):
            return None
        try:
            top, common, branch = run(root, "rev-parse", "--show-toplevel", "--git-common-dir",
                                      "--abbrev-ref", "HEAD").split("\n")[:3]
            out = run(root, "for-each-ref", "--format=%(objectname) %(refname:short)",
                      "refs/heads")
            heads: dict[str, str] = {}
            for line in out.splitlines():
                commit, _, name = line.partition(" ")
                if name:
                    heads[name] = commit
            branch = "" if branch.strip() == "HEAD" else branch.strip()
            # HEAD is the branch's head; a detached HEAD is asked for (one more process)
            head = heads.get(branch) or run(root, "rev-parse", "--verify", "-q", "HEAD").strip()
        except (GitError, ValueError):
            return None
        repo = os.path.realpath(os.path.join(root, common.strip()))
        return RootState(top.strip(), repo, branch, head, self._default(root, heads), heads)

    def _default(self, root: str, heads: dict[str, str]) -> str:
        """The default branch: origin's HEAD, else init.defaultBranch, main or master, the
        first of them that exists locally (git's two answers kept DEFAULT_TTL_S: they
        rarely change, and each is a process)."""
        now = time.monotonic()
        with self._lock:
            cached = self._names.get(root)
        if cached is None or now - cached[0] >= DEFAULT_TTL_S:
            names: list[str] = []
            for args in (("symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD"),
                         ("config", "--get", "init.defaultBranch")):
                try:
                    name = run(root, *args).strip()
                except GitError:
                    continue
                names.append(name.split("/", 1)[1] if name.startswith("origin/") else name)
            cached = (now, tuple(names))
            with self._lock:
                self._names[root] = cached
        for name in (*cached[1], "main", "master"):
            if name in heads:
                return name
        return ""

    def ancestor(self, root: str, commit: str, of: str) -> bool:
        """Whether ``commit`` is reachable from ``of`` (``git merge-base --is-ancestor``)."""
        try:
            run(root, "merge-base", "--is-ancestor", commit, of)
            return True
        except GitError:
            return False

    def base(self, root: str, head: str, default: str) -> str:
        """Where ``head`` forked from ``default`` (``git merge-base``), or ""."""
        try:
            return run(root, "merge-base", head, default).strip()
        except GitError:
            return ""


class BranchScope:
    """Which branch a caller is on, which notes a branch sees, and promotion on merge."""

    def __init__(self, memory: MemoryService, roots: Callable[[str], list[str]],
                 turns: TurnFiles | None = None, git: BranchGit | None = None,
                 turn_ttl_s: float = 1800.0) -> None:
        self.memory = memory
        self.roots = roots  # project -> the git roots to ask (the caller's sources of it)
        self.turns = turns
        self.git = git or BranchGit()
        self.turn_ttl_s = turn_ttl_s
        self.counters = {"promoted": 0, "archived": 0, "sweeps": 0}
        self._seen: dict[str, tuple[Any, ...]] = {}  # root -> fingerprint last swept at
        self._tips: dict[tuple[str, str], str] = {}  # (repository, branch) -> last head seen
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ where the caller is
    def where(self, project: str) -> tuple[str, RootState] | None:
        """The caller's work tree in ``project`` and git's facts of it: the newest hook turn's
        work tree (the agent's own checkout), else the first git root among its sources."""
        candidates = []
        turn = self._turn(project)
        if turn is not None and turn.get("worktree"):
            candidates.append(str(turn["worktree"]))
        candidates += self.roots(project)
        for root in candidates:
            st = self.git.state(root)
            if st is not None:
                self.observe(project, root, st)
                return root, st
        return None

    def current(self, project: str) -> str | None:
        """The caller's branch in ``project``; None without git (no branch rule applies)."""
        found = self.where(project)
        return found[1].branch if found is not None else None

    def _turn(self, project: str) -> dict[str, Any] | None:
        if self.turns is None or not project:
            return None
        return self.turns.turn(project, self.memory.identity.user_id, self.turn_ttl_s)

    # ------------------------------------------------------------------ write time
    def stamp(self, payload: dict[str, Any], cited_roots: Sequence[str]) -> None:
        """Record the branch a new note is written on, when it cites code (``cited_roots``:
        the roots of the sources it cites) or comes from a hook turn on a branch. A note
        written on the default branch (or without git) stays project-wide."""
        project = str(payload.get("project") or "")
        turn = self._turn(project)
        roots = [str(turn["worktree"])] if turn is not None and turn.get("worktree") else []
        if not roots and not cited_roots:
            return  # cites nothing, no hook turn: project-wide, as always
        for root in (*roots, *cited_roots):
            st = self.git.state(root)
            if st is None:
                continue
            if not st.branch or not st.default or st.branch == st.default:
                return
            payload.update(branch=st.branch, worktree=st.top, branch_root=root,
                           branch_head=st.head,
                           branch_base=self.git.base(root, st.head, st.default),
                           branch_state=OPEN, branch_open=1)
            with self._lock:
                self._tips[(st.repo, st.branch)] = st.head
                # The next observation sweeps even if git looks as it did at the last one
                # (a branch made and deleted in between would otherwise go unseen).
                self._seen.clear()
            return

    # ------------------------------------------------------------------ promotion
    def observe(self, project: str, root: str, st: RootState | None = None) -> dict[str, int]:
        """Sweep ``project``'s open notes when ``root`` shows a new commit or a moved, new
        or deleted branch since the last sweep (or was never swept in this process)."""
        st = st or self.git.state(root)
        if st is None:
            return {"promoted": 0, "archived": 0}
        with self._lock:
            for name, head in st.heads.items():
                self._tips[(st.repo, name)] = head
            if self._seen.get(root) == st.fingerprint():
                return {"promoted": 0, "archived": 0}
            self._seen[root] = st.fingerprint()
        return self.sweep(project)

    def sweep(self, project: str | None = None) -> dict[str, int]:
        """Promote the open notes of merged branches, archive those of deleted unmerged ones
        (every user's: a merge is a fact of the repository, and promotion shows a note to no
        one its tenancy hides it from). Returns how many of each."""
        m = self.memory
        must: list[Any] = [Match("kind", "note"), Range("branch_open", gte=1)]
        if project:
            must.append(Match("project", project))
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for pt in scroll_all(m.store, Filter(must=tuple(must))):
            p = pt.payload
            key = (str(p.get("project") or ""), str(p.get("branch_root") or ""),
                   str(p.get("branch") or ""))
            groups.setdefault(key, []).append(p)
        done = {"promoted": 0, "archived": 0}
        for (proj, root, branch), notes in groups.items():
            verdict = self._verdict(proj, root, branch, notes)
            if verdict is None:
                continue
            for p in notes:
                ok = verdict.get(str(p["zk_id"]))
                if ok is None:
                    continue
                if ok:
                    self._promote(p)
                    done["promoted"] += 1
                else:
                    self._archive(p)
                    done["archived"] += 1
        with self._lock:
            self.counters["sweeps"] += 1
            self.counters["promoted"] += done["promoted"]
            self.counters["archived"] += done["archived"]
        return done

    def _verdict(self, project: str, root: str, branch: str,
                 notes: list[dict[str, Any]]) -> dict[str, bool] | None:
        """Per note: True (merged), False (deleted unmerged); absent: still open. None when
        no git root of the note answers."""
        st = None
        for r in (root, *self.roots(project)):  # asked afresh: sweeps are rare, and a
            st = self.git.state(r, fresh=True)  # removed worktree must not answer from cache
            if st is not None:
                root = r
                break
        if st is None or not st.default or branch == st.default:
            return None
        alive = st.heads.get(branch)
        deleted = alive is None
        if alive is not None:
            tip = alive
            with self._lock:
                self._tips[(st.repo, branch)] = tip
        else:
            with self._lock:
                seen = self._tips.get((st.repo, branch))
            # never seen alive by this process: the newest note's head
            tip = seen or str(max(notes, key=lambda p: float(p.get("created_ts") or 0)).get(
                "branch_head") or "")
        reached = bool(tip) and self.git.ancestor(root, tip, st.default)
        out: dict[str, bool] = {}
        for p in notes:
            merged = reached and tip != str(p.get("branch_base") or "")
            if merged:
                out[str(p["zk_id"])] = True
            elif deleted:
                out[str(p["zk_id"])] = False
        return out

    def _promote(self, p: dict[str, Any]) -> None:
        self.memory.store.set_payload([point_id(str(p["zk_id"]))],
                                      {"branch_open": 0, "branch_state": MERGED})

    def _archive(self, p: dict[str, Any]) -> None:
        now = self.memory._now()[0]
        fields: dict[str, Any] = {"branch_open": 0, "branch_state": ABANDONED}
        if p.get("memory_type") != "archived":
            fields.update(memory_type="archived", archived_from=p.get("memory_type"),
                          archived_at=now)
        self.memory.store.set_payload([point_id(str(p["zk_id"]))], fields)
        hype.drop(self.memory.store, [str(p["zk_id"])])


def roots_of(sources: Iterable[Any], project: str) -> list[str]:
    """The roots of the sources of ``project`` (the order they come in)."""
    return [str(r.root) for r in sources if r.project == project]
