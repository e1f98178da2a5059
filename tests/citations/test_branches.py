"""Branch scope: a note written on a git branch is seen there only, until the branch merges
(then project-wide) or is deleted unmerged (then archived). brain/citations/branches.py.

Real parts throughout: Qdrant Edge in a temp dir, a real git repository (and a linked
worktree) built here with the git command, real merges and branch deletions, the source
indexer over the repository, the hooks' own functions writing their state file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from starlette.testclient import TestClient

from brain.app import Brain
from brain.clock import ManualClock
from brain.errors import InvalidArgument
from brain.hooks import client as hook_client
from brain.hooks import events
from brain.memory import RecallFilter
from brain.trust.identity import Identity, acting_as
from brain.vector_store import Filter
from brain.vector_store.edge import EdgeStore
from brain.vector_store.edge_convert import SHADOW
from webui.auth import Logins
from webui.site import create_app

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

WORKER = "def retry(fn, attempts=3):\n    return fn()\n"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                                          "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
                                          "PATH": "/usr/bin:/bin", "HOME": str(root)}).stdout


def _commit(root: Path, rel: str, text: str, msg: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    _git(root, "add", ".")
    _git(root, "commit", "-qm", msg)


@pytest.fixture
def repo(brain: Brain, tmp_path: Path) -> Path:
    root = tmp_path / "code"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _commit(root, "queue/worker.py", WORKER, "start")
    brain.sources.add(str(root), name="code", project="general", sync=False)
    job = brain.sources.sync("code", wait=True, timeout=60)
    assert job["status"] == "done", job
    return root


def _on(brain: Brain, root: Path) -> None:
    """After a checkout, merge or branch deletion: git is asked again now (not after the
    state's short cache), as the next call after STATE_TTL_S would."""
    brain.citations.branches.git.state(str(root), fresh=True)


def _ids(brain: Brain, query: str, branch: str = "") -> set[str]:
    hits = brain.memory.search(query, 10, RecallFilter(project="general", branch=branch,
                                                       include_fleeting=True))
    return {h["zk_id"] for h in hits}


def _payload(brain: Brain, zk: str) -> dict[str, Any]:
    return dict(brain.memory.get_payload(zk, include_forgotten=True))


def test_a_note_citing_code_on_a_branch_is_seen_on_that_branch_only(brain: Brain,
                                                                     repo: Path) -> None:
    _git(repo, "checkout", "-qb", "feat")
    _on(brain, repo)
    scoped = brain.memory.add("On feat the worker retries with a tenant_id column",
                              "general", cites=["queue/worker.py::retry"]).note
    plain = brain.memory.add("The worker retries with a tenant_id column, project-wide",
                             "general").note
    assert scoped["branch"] == {"name": "feat", "state": "open"}
    assert "branch" not in plain  # cites nothing, no hook turn: project-wide as before
    p = _payload(brain, scoped["zk_id"])
    assert p["worktree"] == str(repo) and p["branch_open"] == 1
    assert p["branch_base"] == _git(repo, "rev-parse", "main").strip()
    assert _ids(brain, "worker retries tenant_id") == {scoped["zk_id"], plain["zk_id"]}

    _git(repo, "checkout", "-q", "main")
    _on(brain, repo)
    assert _ids(brain, "worker retries tenant_id") == {plain["zk_id"]}
    assert scoped["zk_id"] in _ids(brain, "worker retries tenant_id", branch="*")
    assert scoped["zk_id"] in _ids(brain, "worker retries tenant_id", branch="feat")
    assert scoped["zk_id"] not in _ids(brain, "worker retries tenant_id", branch="other")
    # get_note still reads it by id, and says where it lives; a branch with no commit of its
    # own has not merged, however reachable its head is.
    assert brain.memory.get(scoped["zk_id"])["branch"] == {"name": "feat", "state": "open"}
    # A note written on the default branch is project-wide even when it cites code.
    main_note = brain.memory.add("Main retries too", "general",
                                 cites=["queue/worker.py"]).note
    assert "branch" not in main_note


def test_get_related_does_not_step_onto_another_branch(brain: Brain, repo: Path) -> None:
    """A link from a project-wide note to a branch note does not show it off its branch."""
    _git(repo, "checkout", "-qb", "feat")
    _on(brain, repo)
    scoped = brain.memory.add("On feat the worker retries with a tenant_id column",
                              "general", cites=["queue/worker.py::retry"]).note["zk_id"]
    plain = brain.memory.add("Retries are configured per queue", "general").note["zk_id"]
    brain.memory.link(plain, scoped, "related")
    assert scoped in {n["zk_id"] for n in brain.memory.related(plain)["related"]}
    _git(repo, "checkout", "-q", "main")
    _on(brain, repo)
    assert scoped not in {n["zk_id"] for n in brain.memory.related(plain, 2)["related"]}


def test_a_real_git_merge_promotes_the_branch_notes_to_the_project(brain: Brain,
                                                                  repo: Path) -> None:
    _git(repo, "checkout", "-qb", "feat")
    _commit(repo, "queue/worker.py", WORKER.replace("3", "5"), "five attempts")
    _on(brain, repo)
    zk = brain.memory.add("The worker now makes five attempts", "general",
                          cites=["queue/worker.py::retry"]).note["zk_id"]
    _git(repo, "checkout", "-q", "main")
    _on(brain, repo)
    assert zk not in _ids(brain, "worker five attempts")
    assert _payload(brain, zk)["branch_state"] == "open"

    _git(repo, "merge", "-q", "--no-ff", "-m", "merge feat", "feat")
    _on(brain, repo)
    assert zk in _ids(brain, "worker five attempts")  # the search saw the new commit
    p = _payload(brain, zk)
    assert (p["branch_state"], p["branch_open"], p["branch"]) == ("merged", 0, "feat")
    # Deleting the merged branch afterwards archives nothing.
    _git(repo, "branch", "-d", "feat")
    _on(brain, repo)
    assert brain.citations.branches.sweep("general") == {"promoted": 0, "archived": 0}
    assert _payload(brain, zk)["memory_type"] == "permanent"


def test_a_branch_merged_then_deleted_before_the_brain_looked_is_promoted(
        brain: Brain, repo: Path) -> None:
    _git(repo, "checkout", "-qb", "fast")
    _commit(repo, "queue/worker.py", WORKER + "# fast\n", "fast")
    _on(brain, repo)
    zk = brain.memory.add("Fast path for the worker", "general",
                          cites=["queue/worker.py"]).note["zk_id"]
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--ff-only", "fast")  # a fast-forward: no merge commit
    _git(repo, "branch", "-d", "fast")
    _on(brain, repo)
    brain.citations.branches._tips.clear()  # a restarted brain never saw the branch's head
    assert brain.citations.branches.sweep("general") == {"promoted": 1, "archived": 0}
    assert _payload(brain, zk)["branch_state"] == "merged"


def test_an_unmerged_deleted_branch_has_its_notes_archived_never_deleted(brain: Brain,
                                                                        repo: Path) -> None:
    _git(repo, "checkout", "-qb", "spike")
    _commit(repo, "queue/worker.py", WORKER + "# spike\n", "spike")
    _on(brain, repo)
    zk = brain.memory.add("The spike caches jobs in the worker", "general",
                          cites=["queue/worker.py"]).note["zk_id"]
    _git(repo, "checkout", "-q", "main")
    _on(brain, repo)
    assert _payload(brain, zk)["memory_type"] == "permanent"  # the branch still exists
    _git(repo, "branch", "-D", "spike")
    _on(brain, repo)
    assert zk not in _ids(brain, "spike caches jobs", branch="*")
    p = _payload(brain, zk)
    assert (p["memory_type"], p["branch_state"], p["branch_open"]) == ("archived", "abandoned", 0)
    assert brain.citations.branches.counters["archived"] == 1
    restored = brain.memory.restore(zk)  # archived, not deleted: it comes back
    assert restored["restored_from"] == "archived"


def test_the_hooks_on_a_branch_in_a_linked_worktree_scope_their_notes(
        brain: Brain, repo: Path, home: Path, tmp_path: Path, clock: ManualClock) -> None:
    wt = tmp_path / "wt-feat"
    _git(repo, "worktree", "add", "-q", "-b", "feat", str(wt))
    assert events.branch_of(str(wt)) == "feat"  # read from the worktree's .git file
    owner = hook_client.Owner(home, {"user_id": "default", "agent_id": "default"})

    class Args:
        project = "general"

    ctx = events.Context(home, owner, Args())
    base = {"session_id": "s1", "cwd": str(wt / "queue")}
    events.new_turn(base, "general", ctx)
    with hook_client.state(home) as st:
        turn = st["turns"]["s1"]
    assert (turn["branch"], turn["worktree"]) == ("feat", str(wt))
    # A failed command mid-turn: the hook spools its record_failure (no owner here); the
    # failure is written as the drain would write it, on the turn's branch.
    events.post_tool({**base, "tool_name": "Bash", "tool_input": {"command": "pytest -q"},
                      "tool_response": {"exit_code": 1, "stderr": "ImportError: tenant_id"}},
                     "general", ctx)
    failure = brain.mistakes.record_failure("pytest fails: ImportError tenant_id", "general",
                                            "pytest:ImportError:tenant_id")
    zk = failure["note"]["zk_id"]
    p = _payload(brain, zk)
    assert (p["branch"], p["worktree"], p["branch_state"]) == ("feat", str(wt), "open")
    assert brain.citations.branches.current("general") == "feat"  # the hook turn's checkout
    assert zk in _ids(brain, "pytest ImportError tenant_id")
    assert zk not in _ids(brain, "pytest ImportError tenant_id", branch="main")
    # open_session on the branch lists its notes first, before newer project-wide ones;
    # main's view leaves them out.
    branch_decision = brain.memory.add("Decision: feat adds tenant_id to jobs", "general",
                                       note_kind="decision").note["zk_id"]
    clock.advance(seconds=60)
    events.new_turn({"session_id": "s1", "cwd": str(repo)}, "general", ctx)  # on main
    wide = brain.memory.add("Decision: project-wide logging goes to stderr", "general",
                            note_kind="decision").note
    assert "branch" not in wide
    events.new_turn(base, "general", ctx)  # back in the feat worktree
    opened = brain.sessions.open_session("general")["context"]
    assert [r["zk_id"] for r in opened["recent_decisions"]] == [branch_decision, wide["zk_id"]]
    events.new_turn({"session_id": "s1", "cwd": str(repo)}, "general", ctx)  # on main
    opened = brain.sessions.open_session("general")["context"]
    shown = {r["zk_id"] for r in opened["recent_decisions"] + opened["recent_mistakes"]}
    assert shown == {wide["zk_id"]}


def test_branch_scope_never_widens_tenancy(brain: Brain, repo: Path) -> None:
    alice, bob = Identity("alice", "a1"), Identity("bob", "b1")
    _git(repo, "checkout", "-qb", "feat")
    _commit(repo, "queue/worker.py", WORKER + "# feat\n", "feat")
    _on(brain, repo)
    with acting_as(alice):
        brain.sources.add(str(repo), name="alices", project="general", visibility="private",
                          sync=False)
        zk = brain.memory.add("alice's private branch plan for the worker", "general",
                              cites=["queue/worker.py"], visibility="private").note["zk_id"]
        assert _payload(brain, zk)["branch"] == "feat"
    with acting_as(bob):
        brain.sources.add(str(repo), name="bobs", project="general", sync=False)
        assert zk not in _ids(brain, "private branch plan worker", branch="*")
        _git(repo, "checkout", "-q", "main")
        _git(repo, "merge", "-q", "--no-ff", "-m", "m", "feat")
        _on(brain, repo)
        # bob's search sees the merge and promotes alice's note: to her project, not to him
        assert zk not in _ids(brain, "private branch plan worker", branch="*")
    assert _payload(brain, zk)["branch_state"] == "merged"
    with acting_as(alice):
        assert zk in _ids(brain, "private branch plan worker")


def test_a_bad_branch_filter_is_refused_and_changes_nothing(brain: Brain, repo: Path) -> None:
    _git(repo, "checkout", "-qb", "feat")
    _on(brain, repo)
    zk = brain.memory.add("x on feat", "general", cites=["queue/worker.py"]).note["zk_id"]
    for bad in ("a b", "-x", "x" * 201):
        with pytest.raises(InvalidArgument) as err:
            _ids(brain, "x on feat", branch=bad)
        assert err.value.details["field"] == "branch" and "branch name" in str(err.value)
    assert _payload(brain, zk)["branch_state"] == "open"


def test_without_git_every_note_stays_project_wide(brain: Brain, tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "queue").mkdir(parents=True)
    (root / "queue" / "worker.py").write_text(WORKER)
    brain.sources.add(str(root), name="plain", project="general", sync=False)
    assert brain.sources.sync("plain", wait=True, timeout=60)["status"] == "done"
    note = brain.memory.add("plain worker note", "general", cites=["queue/worker.py"]).note
    assert "branch" not in note and brain.citations.branches.current("general") is None
    assert note["zk_id"] in _ids(brain, "plain worker note")


async def test_search_memory_takes_the_branch_filter(brain: Brain, repo: Path,
                                                     client: Client) -> None:
    _git(repo, "checkout", "-qb", "feat")
    _on(brain, repo)
    zk = brain.memory.add("feat moves the queue to redis streams", "general",
                          cites=["queue/worker.py"]).note["zk_id"]
    _git(repo, "checkout", "-q", "main")
    _on(brain, repo)

    async def ids(filters: dict[str, Any]) -> set[str]:
        res = await client.call_tool("search_memory", {
            "query": "queue redis streams", "top_k": 10, "filters": filters})
        return {h["zk_id"] for h in (res.structured_content or {}).get("results", [])}

    assert zk not in await ids({})
    assert zk in await ids({"branch": "*"})
    assert zk in await ids({"branch": "feat"})
    with pytest.raises(ToolError, match=r"\[INVALID_ARGUMENT\].*branch name"):
        await ids({"branch": "no such branch"})
    got = await client.call_tool("get_note", {"zk_id": zk})
    assert (got.structured_content or {})["note"]["branch"] == {"name": "feat", "state": "open"}


def test_the_explorer_note_page_shows_the_branch(brain: Brain, repo: Path) -> None:
    _git(repo, "checkout", "-qb", "feat")
    _on(brain, repo)
    zk = brain.memory.add("feat note for the explorer", "general",
                          cites=["queue/worker.py"]).note["zk_id"]
    logins = Logins(brain.home, Identity(brain.settings.identity.user_id,
                                         brain.settings.identity.agent_id))
    c = TestClient(create_app(SimpleNamespace(brain=brain), logins),
                   base_url="http://127.0.0.1:8766")
    assert c.get(f"/login?token={logins.issue_link()}", follow_redirects=False).status_code == 303
    assert "branch feat (open)" in c.get(f"/note/{zk}").text
    plain = brain.memory.add("a note citing nothing", "general").note["zk_id"]
    assert 'id="branch"' not in c.get(f"/note/{plain}").text


def _fields(cond: Any) -> set[str]:
    """The payload fields a filter (or condition) reads."""
    if isinstance(cond, Filter):
        return {f for part in (*cond.must, *cond.must_not, *cond.should) for f in _fields(part)}
    key = getattr(cond, "key", None)
    return {key} if key is not None else set()


async def test_every_filter_the_tools_make_reads_indexed_fields_only(
        brain: Brain, repo: Path, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A condition on a field without a payload index is checked point by point against the
    stored payloads: the branch rule's must_not on ``branch_open`` / ``branch``, fs_search's
    path privacy, a fix's look-up by ``links`` each cost ~25 ms at 3,000 notes and 45-85 ms at
    7,000 (bench/filter_indexes.py). Every query the tools make here, on a branch of a git
    project with a source indexed, reads indexed fields only."""
    seen: list[set[str]] = []
    for name in ("query_dense", "query_sparse", "scroll", "count"):
        real = getattr(EdgeStore, name)

        def spy(self: EdgeStore, *args: Any, _real: Any = real, **kw: Any) -> Any:
            for a in (*args, *kw.values()):
                if isinstance(a, Filter):
                    seen.append(_fields(a))
            return _real(self, *args, **kw)
        monkeypatch.setattr(EdgeStore, name, spy)
    _git(repo, "checkout", "-qb", "feat")
    _on(brain, repo)
    await client.call_tool("add_memory", {"content": "feat moves the queue to redis streams",
                                          "project": "general",
                                          "cites": ["queue/worker.py"]})
    await client.call_tool("add_memory", {"content": "the queue keeps its retry count",
                                          "project": "general"})
    failed = await client.call_tool("record_failure", {
        "content": "moving the queue to redis streams lost messages", "project": "general",
        "failure_signature": "queue:redis:lost"})
    await client.call_tool("record_resolution", {
        "failure_zk_id": failed.structured_content["note"]["zk_id"], "project": "general",
        "fix_content": "ack each message after the handler returns"})
    for filters in ({}, {"branch": "*"}, {"branch": "main"}):
        await client.call_tool("search_memory", {"query": "queue redis streams",
                                                 "project": "general", "filters": filters})
    await client.call_tool("deep_search", {"query": "queue redis streams",
                                           "project": "general"})
    await client.call_tool("preflight_check", {"task": "move the queue to redis streams",
                                               "project": "general"})
    await client.call_tool("search_memory", {"query": "queue redis streams",
                                             "project": "general",
                                             "filters": {"as_of": "2026-01-01T00:00:00Z"}})
    await client.call_tool("brain_stats", {})
    for args in ({}, {"folder": "queue"}, {"search_mode": "filter"}):
        await client.call_tool("fs_search", {"query": "retry worker", **args})
    await client.call_tool("search_files", {"query": "retry worker"})
    indexed = {n.removeprefix(SHADOW) for n in brain.memory.store.payload_indexes()}
    read = set().union(*seen)
    # the branch rule, a fix's look-up, fs_search's path privacy and folder, ready documents
    assert {"branch", "branch_open", "links", "path_private", "dirs", "file_status",
            "valid_to_ts", "valid_from_ts"} <= read
    assert read <= indexed, f"filtered on fields with no payload index: {read - indexed}"
