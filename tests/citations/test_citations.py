"""Citations: notes cite code, and say when that code has changed since (brain/citations).

Real parts throughout: Qdrant Edge in a temp dir, the source indexer syncing a real folder,
the git CLI on a repository built here, the hooks' state file written by the hook's own
functions. Covers each citation source (explicit, detected, hook), fresh after a move,
changed after an edit, gone after a delete or a rename of the symbol, a ``git mv`` followed,
only citing notes touched (counted), tenancy of every staleness report, redaction of cited
text, ranking below an equal fresh note, re-anchoring on update, changed-since.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from brain.app import Brain
from brain.citations import spans
from brain.citations.detect import candidates
from brain.errors import InvalidArgument, NoteNotFound
from brain.hooks import client as hook_client
from brain.hooks import events
from brain.trust.identity import Identity, acting_as
from brain.vector_store import Filter, Match, scroll_all

WORKER = '''"""The job worker."""

import time


def retry_with_backoff(fn, attempts=3):
    for i in range(attempts):
        try:
            return fn()
        except OSError:
            time.sleep(2 ** i)
    raise RuntimeError("gave up")


class Queue:
    def push(self, job):
        self.jobs.append(job)

    def pop(self):
        return self.jobs.pop(0)
'''
HELPERS = "def helper():\n    return 1\n"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _w(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _sync(brain: Brain, name: str = "code") -> dict[str, Any]:
    job = brain.sources.sync(name, wait=True, timeout=60)
    assert job["status"] == "done", job
    return dict(job["result"])


def _committed(repo: Path) -> str:
    """``repo`` as a git repository of one commit; that commit's id."""
    for args in (("init", "-q"), ("add", "."), ("commit", "-qm", "one")):
        _git(repo, *args)
    return _git(repo, "rev-parse", "HEAD").strip()


def _git_source(brain: Brain, repo: Path) -> str:
    """``repo`` committed once and indexed as the source "code"; the commit's id."""
    first = _committed(repo)
    brain.sources.add(str(repo), name="code", project="general", sync=False)
    _sync(brain)
    return first


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    _w(root, "queue/worker.py", WORKER)
    _w(root, "queue/helpers.py", HELPERS)
    _w(root, "web/app.ts", "export function route(req: Req) {\n  return handle(req);\n}\n")
    return root


@pytest.fixture
def src(brain: Brain, repo: Path) -> Path:
    brain.sources.add(str(repo), name="code", project="general", sync=False)
    _sync(brain)
    return repo


def _cites(brain: Brain, zk: str) -> list[dict[str, Any]]:
    return list(brain.memory.get_payload(zk).get("cites") or [])


def _state(brain: Brain, zk: str) -> str:
    return str(brain.memory.get_payload(zk).get("cite_state"))


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                                          "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
                                          "PATH": "/usr/bin:/bin", "HOME": str(root)}).stdout


# ------------------------------------------------------------------------------ spans
def test_symbols_resolve_in_python_and_the_named_patterns() -> None:
    lines = spans.norm(WORKER)
    span = spans.symbol(WORKER, lines, "w.py", "retry_with_backoff")
    assert span is not None and span.lines == (6, 12)
    method = spans.symbol(WORKER, lines, "w.py", "Queue.pop")
    assert method is not None and method.text.strip().startswith("def pop")
    assert spans.symbol(WORKER, lines, "w.py", "missing") is None
    ts = "import x\n\nexport async function route(req) {\n  if (a) { b(); }\n  return 1;\n}\n"
    assert spans.symbol(ts, spans.norm(ts), "a.ts", "route").lines == (3, 6)  # type: ignore[union-attr]
    go = "package q\n\nfunc (w *W) Retry(n int) error {\n\treturn nil\n}\n\ntype W struct {\n\tn int\n}\n"
    assert spans.symbol(go, spans.norm(go), "w.go", "Retry").lines == (3, 5)  # type: ignore[union-attr]
    assert spans.symbol(go, spans.norm(go), "w.go", "W").lines == (7, 9)  # type: ignore[union-attr]
    rs = "pub fn retry() -> u8 {\n    3\n}\nstruct S;\n"
    assert spans.symbol(rs, spans.norm(rs), "l.rs", "retry").lines == (1, 3)  # type: ignore[union-attr]
    assert spans.symbol(rs, spans.norm(rs), "l.rs", "S").lines == (4, 4)  # type: ignore[union-attr]
    rb = "class A\n  def go\n    1\n  end\nend\n"
    assert spans.symbol(rb, spans.norm(rb), "a.rb", "go").lines == (2, 4)  # type: ignore[union-attr]


def test_detection_finds_paths_lines_and_symbols_but_not_urls() -> None:
    found = candidates("The retry lives in `queue/worker.py::retry_with_backoff`, see also "
                       "queue/helpers.py:1-2 and web/app.ts; docs at https://x.io/a/b.py, "
                       "mail a@b.py, version 1.5, e.g. nothing")
    texts = [r.text() for r in found]
    assert texts == ["queue/worker.py::retry_with_backoff", "queue/helpers.py:1-2", "web/app.ts"]


# ------------------------------------------------------------------------------ sources
def test_explicit_citation_is_anchored_with_its_span(brain: Brain, src: Path) -> None:
    note = brain.memory.add("Retries back off exponentially, max 3 attempts", "general",
                            cites=["queue/worker.py::retry_with_backoff"]).note
    assert note["citations"] == {"state": "fresh", "fresh": 1}
    (c,) = _cites(brain, note["zk_id"])
    assert (c["origin"], c["kind"], c["lines"], c["path"]) == ("explicit", "symbol", [6, 12],
                                                              "queue/worker.py")
    assert "def retry_with_backoff" in c["excerpt"]


def test_an_explicit_citation_that_does_not_resolve_writes_nothing(brain: Brain,
                                                                   src: Path) -> None:
    before = brain.store.count(Filter(must=(Match("kind", "note"),)))
    for bad in (["queue/nope.py"], ["queue/worker.py::nope"], ["../etc/passwd"], ["a.py:0"],
                ["x"] * 17):
        with pytest.raises(InvalidArgument):
            brain.memory.add("some note", "general", cites=bad)
    assert brain.store.count(Filter(must=(Match("kind", "note"),))) == before


def test_citations_are_detected_in_the_text(brain: Brain, src: Path) -> None:
    note = brain.memory.add("Queue.pop in `queue/worker.py::Queue.pop` takes the oldest job; "
                            "queue/helpers.py:1-2 has the helper; other/missing.py is not "
                            "in any source", "general").note
    refs = {(c["origin"], c["kind"], c["path"]) for c in _cites(brain, note["zk_id"])}
    assert refs == {("detected", "symbol", "queue/worker.py"),
                    ("detected", "lines", "queue/helpers.py")}


def test_files_of_the_hook_turn_are_cited(brain: Brain, src: Path, home: Path) -> None:
    owner = hook_client.Owner(home, {"user_id": "default", "agent_id": "default"})

    class Args:
        project = "general"

    ctx = events.Context(home, owner, Args())
    base = {"session_id": "s1", "cwd": str(src)}
    events.new_turn(base, "general", ctx)
    events.post_tool({**base, "tool_name": "Read",
                      "tool_input": {"file_path": str(src / "queue/helpers.py")}}, "general", ctx)
    events.post_tool({**base, "tool_name": "Edit",
                      "tool_input": {"file_path": "web/app.ts"}}, "general", ctx)
    note = brain.memory.add("Routing goes through one handler", "general").note
    cites = _cites(brain, note["zk_id"])
    assert {(c["origin"], c["kind"], c["path"]) for c in cites} == {
        ("hook", "file", "queue/helpers.py"), ("hook", "file", "web/app.ts")}
    # Another user's note in that project does not take this user's turn.
    with acting_as(Identity("bob", "b1")):
        other = brain.memory.add("Bob's unrelated note", "general").note
    assert "citations" not in other
    # A new turn starts empty.
    events.new_turn(base, "general", ctx)
    assert "citations" not in brain.memory.add("Later note", "general").note


def test_a_symbol_that_moves_stays_fresh_and_an_edited_body_is_changed(brain: Brain,
                                                                       src: Path) -> None:
    zk = brain.memory.add("Retries: see queue/worker.py::retry_with_backoff",
                          "general").note["zk_id"]
    ranged = brain.memory.add("The push: queue/worker.py:16-17", "general").note["zk_id"]
    _w(src, "queue/worker.py", "# a header comment\n# and another\n\n" + WORKER)
    _sync(brain)
    (c,) = _cites(brain, zk)
    assert c["state"] == "fresh"
    (row,) = brain.citations.verify(zk)["citations"]
    assert (row["state"], row["now"]["lines"]) == ("fresh", [9, 15])
    (r,) = _cites(brain, ranged)
    assert (r["state"], r["lines"]) == ("fresh", [19, 20])  # the range followed its text
    _w(src, "queue/worker.py", WORKER.replace("attempts=3", "attempts=5"))
    _sync(brain)
    assert _state(brain, zk) == "changed"
    note = brain.memory.get(zk)
    assert note["citations"] == {"state": "changed", "fresh": 0,
                                 "changed": ["queue/worker.py::retry_with_backoff"]}


def test_a_deleted_file_or_a_renamed_symbol_is_gone(brain: Brain, src: Path) -> None:
    fn = brain.memory.add("See queue/worker.py::retry_with_backoff", "general").note["zk_id"]
    helper = brain.memory.add("See queue/helpers.py::helper", "general").note["zk_id"]
    _w(src, "queue/worker.py", WORKER.replace("def retry_with_backoff", "def retry_later"))
    (src / "queue/helpers.py").unlink()
    _sync(brain)
    assert _state(brain, fn) == "gone"
    assert _state(brain, helper) == "gone"
    assert brain.memory.get(helper)["citations"]["gone"] == ["queue/helpers.py::helper"]


@needs_git
def test_a_git_mv_is_followed(brain: Brain, repo: Path) -> None:
    _git_source(brain, repo)
    zk = brain.memory.add("See queue/worker.py::retry_with_backoff", "general").note["zk_id"]
    (c,) = _cites(brain, zk)
    assert c["commit"] == _git(repo, "rev-parse", "HEAD").strip()
    assert c["blob"] == _git(repo, "rev-parse", "HEAD:queue/worker.py").strip()
    _git(repo, "mv", "queue/worker.py", "queue/jobs.py")
    _sync(brain)
    (c,) = _cites(brain, zk)
    assert (c["state"], c["path"], c["moved_from"]) == ("fresh", "queue/jobs.py",
                                                       "queue/worker.py")
    # The path -> notes index follows: an edit of the new path reaches the note.
    _w(repo, "queue/jobs.py", WORKER.replace("2 ** i", "3 ** i"))
    _sync(brain)
    assert _state(brain, zk) == "changed"


@needs_git
def test_changed_since_names_the_notes_citing_changed_code(brain: Brain, repo: Path) -> None:
    first = _git_source(brain, repo)
    worker = brain.memory.add("See queue/worker.py::Queue", "general").note["zk_id"]
    brain.memory.add("See web/app.ts::route", "general")
    _w(repo, "queue/worker.py", WORKER + "\n# tail\n")
    _git(repo, "commit", "-qam", "two")
    found = brain.citations.changed_since(first)
    assert [n["zk_id"] for n in found["notes"]] == [worker]
    assert found["notes"][0]["changed_paths"] == ["queue/worker.py"]
    pre = brain.mistakes.preflight_check("anything at all", "general", changed_since="HEAD~1")
    assert [n["zk_id"] for n in pre["changed_notes"]] == [worker]
    assert pre["changed_repositories"] == 1
    for bad in ("--output=/tmp/x", "a..b", "nosuchref"):
        with pytest.raises(InvalidArgument):
            brain.citations.changed_since(bad)
    # A checkout of the first commit brings the code back: the sync finds it fresh again.
    assert _state(brain, worker) == "fresh"  # only a tail was added: Queue is unchanged
    _w(repo, "queue/worker.py", WORKER.replace("self.jobs.pop(0)", "self.jobs.pop()"))
    _git(repo, "commit", "-qam", "three")
    _sync(brain)
    assert _state(brain, worker) == "changed"
    _git(repo, "checkout", "-q", first)
    _sync(brain)
    assert _state(brain, worker) == "fresh"


@needs_git
def test_changed_since_shows_the_citations_as_the_code_is_now(brain: Brain, repo: Path) -> None:
    """Between two syncs (no server running, a weekly script's `brain notes changed-since`)
    the listed note's citations said "fresh", the last sync's state, for code just edited."""
    _git_source(brain, repo)
    zk = brain.memory.add("See queue/worker.py::Queue", "general").note["zk_id"]
    _w(repo, "queue/worker.py", WORKER.replace("self.jobs.pop(0)", "self.jobs.pop()"))
    _git(repo, "commit", "-qam", "two")
    found = brain.citations.changed_since("HEAD~1")
    assert [n["zk_id"] for n in found["notes"]] == [zk]
    assert found["notes"][0]["citations"]["state"] == "changed", found["notes"][0]


def test_notes_citing_unchanged_files_are_never_touched(brain: Brain, src: Path) -> None:
    helpers = [brain.memory.add(f"Helper note {i}: queue/helpers.py::helper",
                                "general").note["zk_id"] for i in range(3)]
    workers = [brain.memory.add(f"Worker note {i}: queue/worker.py::Queue.push",
                                "general").note["zk_id"] for i in range(2)]
    plain = [brain.memory.add(f"A note citing nothing {i}", "general").note["zk_id"]
             for i in range(3)]
    before = {z: brain.memory.get_payload(z) for z in helpers + plain}
    counted = dict(brain.citations.counters)
    _w(src, "queue/worker.py", WORKER.replace("self.jobs.append(job)", "self.jobs += [job]"))
    _sync(brain)
    assert brain.citations.counters["notes_checked"] - counted["notes_checked"] == 2
    assert brain.citations.counters["notes_updated"] - counted["notes_updated"] == 2
    assert all(_state(brain, z) == "changed" for z in workers)
    for z in helpers + plain:
        assert brain.memory.get_payload(z) == before[z]


def test_an_unindexed_edit_shows_at_read_time(brain: Brain, src: Path) -> None:
    zk = brain.memory.add("Retry lives in queue/worker.py::retry_with_backoff",
                          "general").note["zk_id"]
    _w(src, "queue/worker.py", WORKER.replace("RuntimeError", "TimeoutError"))
    # No sync: the search itself sees the file moved on disk and checks it again.
    hits = brain.memory.search("retry lives in worker", 5)
    assert hits[0]["zk_id"] == zk and hits[0]["citations"]["state"] == "changed"


def test_a_changed_note_ranks_below_an_equal_fresh_one(brain: Brain, src: Path) -> None:
    text = "Job handling is in the queue module"
    changed = brain.memory.add(text, "general", cites=["queue/worker.py::Queue.push"],
                               autolink=False).note["zk_id"]
    fresh = brain.memory.add(text, "general", cites=["queue/worker.py::Queue.pop"],
                             autolink=False).note["zk_id"]
    order = [h["zk_id"] for h in brain.memory.search(text, 2)]
    assert set(order) == {changed, fresh}
    _w(src, "queue/worker.py", WORKER.replace("self.jobs.append(job)", "self.jobs += [job]"))
    _sync(brain)
    hits = brain.memory.search(text, 2)
    assert [h["zk_id"] for h in hits] == [fresh, changed]  # never dropped, only lower
    assert hits[0]["score"] > hits[1]["score"]


def test_update_memory_reanchors(brain: Brain, src: Path) -> None:
    zk = brain.memory.add("Retry max is 3: queue/worker.py::retry_with_backoff",
                          "general").note["zk_id"]
    _w(src, "queue/worker.py", WORKER.replace("attempts=3", "attempts=5"))
    _sync(brain)
    assert brain.citations.verify(zk)["citations"][0]["state"] == "changed"
    brain.memory.update(zk, "Retry max is 5: queue/worker.py::retry_with_backoff")
    (c,) = _cites(brain, zk)
    assert c["state"] == "fresh" and "attempts=5" in c["excerpt"]


def test_verify_shows_then_and_now(brain: Brain, src: Path) -> None:
    zk = brain.memory.add("See queue/worker.py::Queue.pop", "general").note["zk_id"]
    _w(src, "queue/worker.py", WORKER.replace("self.jobs.pop(0)", "self.jobs.pop()"))
    out = brain.citations.verify(zk)
    (row,) = out["citations"]
    assert out["state"] == "changed" and row["state"] == "changed"
    assert "pop(0)" in row["then"]["excerpt"] and "pop()" in row["now"]["excerpt"]
    assert row["then"]["hash"] != row["now"]["hash"]


def test_cited_text_is_redacted(brain: Brain, src: Path) -> None:
    secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    _w(src, "conf/settings.py", f'def token():\n    return "{secret}"\n')
    _sync(brain)
    zk = brain.memory.add("The token comes from conf/settings.py::token",
                          "general").note["zk_id"]
    assert secret not in repr(brain.memory.get_payload(zk))
    _w(src, "conf/settings.py", f'def token():\n    return "{secret}"  # still\n')
    out = brain.citations.verify(zk)
    assert out["citations"][0]["state"] == "changed"
    assert secret not in repr(out) and "REDACTED" in out["citations"][0]["now"]["excerpt"]


def test_staleness_reports_never_name_another_users_notes(brain: Brain, repo: Path,
                                                          tmp_path: Path) -> None:
    alice, bob = Identity("alice", "a1"), Identity("bob", "b1")
    with acting_as(alice):
        brain.sources.add(str(repo), name="code", project="general", sync=False)
        _sync(brain)
        zk = brain.memory.add("alice's secret plan: queue/worker.py::Queue",
                              "general").note["zk_id"]
    with acting_as(bob):
        # bob cannot cite alice's source, nor learn her note through any report.
        with pytest.raises(InvalidArgument):
            brain.memory.add("bob's note", "general", cites=["queue/worker.py"])
        assert "citations" not in brain.memory.add("bob on queue/worker.py", "general").note
        with pytest.raises(NoteNotFound):
            brain.citations.verify(zk)
    if shutil.which("git"):
        _committed(repo)
        _w(repo, "queue/worker.py", WORKER + "# more\n")
        with acting_as(alice):
            assert [n["zk_id"] for n in brain.citations.changed_since("HEAD")["notes"]] == [zk]
        with acting_as(bob):
            # bob has a git source of his own over the same folder name: still nothing of hers
            bobs = tmp_path / "bobs"
            _w(bobs, "queue/worker.py", WORKER)
            _git(bobs, "init", "-q")
            _git(bobs, "add", ".")
            _git(bobs, "commit", "-qm", "b")
            brain.sources.add(str(bobs), name="bobs", project="general", sync=False)
            found = brain.citations.changed_since("HEAD")
            assert found["notes"] == [] and zk not in repr(found)
            pre = brain.mistakes.preflight_check("secret plan", "general", changed_since="HEAD")
            assert zk not in repr(pre)


def test_citations_survive_in_the_store_alone(brain: Brain, src: Path) -> None:
    """The path -> notes index is the store's ``cite_keys`` payload index: nothing else."""
    zk = brain.memory.add("See queue/helpers.py::helper", "general").note["zk_id"]
    sid = brain.sources.get("code").id
    flt = Filter(must=(Match("kind", "note"), Match("cite_keys", f"{sid}:queue/helpers.py")))
    assert [p.payload["zk_id"] for p in scroll_all(brain.store, flt)] == [zk]
    assert "cite_keys" in brain.store.payload_indexes()  # type: ignore[attr-defined]


@needs_git
def test_cli_notes_changed_since(settings: Any, repo: Path, monkeypatch: pytest.MonkeyPatch,
                                 cli_json: Any) -> None:
    from tests.conftest import hash_embedder

    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    settings.embedding.model = "offline/hash-384"
    _committed(repo)
    with Brain(settings, embedder=hash_embedder()) as b:
        b.sources.add(str(repo), name="code", project="general", sync=False)
        _sync(b)
        zk = b.memory.add("See queue/helpers.py::helper", "general").note["zk_id"]
        b.memory.add("See web/app.ts::route", "general")
    _w(repo, "queue/helpers.py", HELPERS.replace("1", "2"))
    _git(repo, "commit", "-qam", "two")
    rc, out = cli_json("notes", "changed-since", "HEAD~1", "--to", "HEAD")
    assert rc == 0 and [n["zk_id"] for n in out["notes"]] == [zk]
    assert out["notes"][0]["changed_paths"] == ["queue/helpers.py"]


def test_a_shared_note_never_carries_a_private_sources_code(brain: Brain, repo: Path,
                                                           tmp_path: Path) -> None:
    private = tmp_path / "mine"
    _w(private, "secret/plan.py", "def plan():\n    return 'private plan'\n")
    brain.sources.add(str(private), name="mine", project="general", sync=False,
                      visibility="private")
    brain.sources.add(str(repo), name="code", project="general", sync=False)
    with pytest.raises(InvalidArgument):
        brain.memory.add("shared note", "general", cites=["secret/plan.py::plan"])
    assert "citations" not in brain.memory.add("see secret/plan.py", "general").note
    own = brain.memory.add("my private note: secret/plan.py::plan", "general",
                           visibility="private").note
    assert own["citations"]["fresh"] == 1


def test_the_watcher_re_checks_an_auto_source(brain: Brain, repo: Path) -> None:
    import time

    brain.sources.add(str(repo), name="code", project="general", trigger="auto")
    assert brain.sources.wait_idle(30)
    zk = brain.memory.add("See queue/helpers.py::helper", "general").note["zk_id"]
    _w(repo, "queue/helpers.py", HELPERS.replace("return 1", "return 2"))
    # get_payload reads the store only (get_note would check the file itself).
    deadline = time.monotonic() + 30
    while _state(brain, zk) != "changed" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _state(brain, zk) == "changed"


@needs_git
def test_a_symbol_moved_to_a_new_file_is_followed_when_git_shows_one_home(
        brain: Brain, repo: Path) -> None:
    _git_source(brain, repo)
    zk = brain.memory.add("See queue/helpers.py::helper", "general").note["zk_id"]
    _w(repo, "queue/helpers.py", "def other():\n    return 0\n")
    _w(repo, "queue/util.py", "import os\n\n\n" + HELPERS)  # extracted, unchanged
    _git(repo, "add", "-A")
    _sync(brain)
    (c,) = _cites(brain, zk)
    assert (c["state"], c["path"], c["moved_from"]) == ("fresh", "queue/util.py",
                                                       "queue/helpers.py")
    # Two new homes: no guess, the citation is gone.
    zk2 = brain.memory.add("See queue/util.py::helper", "general").note["zk_id"]
    (repo / "queue/util.py").unlink()
    _w(repo, "a/one.py", HELPERS)
    _w(repo, "b/two.py", HELPERS)
    _git(repo, "add", "-A")
    _sync(brain)
    assert _state(brain, zk2) == "gone"


def test_handoff_key_files_and_a_resolution_cite_code(brain: Brain, src: Path) -> None:
    out = brain.sessions.close_session("general", "fix the retries",
                                       key_files=["queue/worker.py: where retries live",
                                                  "not a path at all", "docs/none.md"])
    cites = _cites(brain, out["session_summary"]["zk_id"])
    assert [(c["origin"], c["path"]) for c in cites] == [("explicit", "queue/worker.py")]
    failure = brain.mistakes.record_failure("OSError in the worker", "general", "w:OSError")
    fix = brain.mistakes.record_resolution(failure["note"]["zk_id"], "Retry on OSError",
                                           cites=["queue/worker.py::retry_with_backoff"])
    assert fix["fix"]["citations"] == {"state": "fresh", "fresh": 1}
    with pytest.raises(InvalidArgument):
        brain.mistakes.record_resolution(failure["note"]["zk_id"], "x", cites=["nope.py"])


def test_files_the_source_excludes_are_never_cited(brain: Brain, src: Path) -> None:
    _w(src, ".env", "API_KEY=abc\n")
    _w(src, "node_modules/lib/index.js", "function f() {}\n")
    for path in (".env", "node_modules/lib/index.js::f"):
        with pytest.raises(InvalidArgument):
            brain.memory.add("a note", "general", cites=[path])
    assert "citations" not in brain.memory.add("see node_modules/lib/index.js", "general").note


@needs_git
def test_the_bench_replays_a_small_history(tmp_path: Path) -> None:
    from bench.citations import flags

    out = flags(tmp_path / "bench", files=4, per_file=3, commits=3, ops=4, seed=3,
                log=lambda _m: None)
    assert out["counts"]["total"] == 12 * 3 and out["counts"]["tp"] > 0  # some went stale
    assert out["stale_precision"] >= 0.95 and out["stale_recall"] >= 0.95


def test_hostile_citations_are_typed_errors(brain: Brain, src: Path) -> None:
    for bad in (["\x00"], ["queue/worker.py\x00"], ["a\nb.py"], [""], ["x" * 600], "a.py",
                [7]):
        with pytest.raises(InvalidArgument):
            brain.memory.add("a note", "general", cites=bad)  # type: ignore[arg-type]
