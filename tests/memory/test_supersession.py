"""Supersession (issue 53): explicit and detected, history, release when the newer note is
forgotten, tenancy, no supersession between unrelated notes, and as-of search."""

from __future__ import annotations

from typing import Any

import pytest
from fastmcp.exceptions import ToolError

from brain.app import Brain
from brain.errors import InvalidArgument, NoteNotFound
from brain.memory import RecallFilter
from brain.memory.supersede import judge
from brain.trust.identity import Identity, acting_as


def _ids(hits: list[dict[str, Any]]) -> list[str]:
    return [h["zk_id"] for h in hits]


def _search(b: Brain, query: str, **rf: Any) -> list[str]:
    return _ids(b.memory.search(query, 10, RecallFilter(project="shop", **rf)))


# ------------------------------------------------------------------------------ explicit
def test_add_with_supersedes_hides_the_older_note_and_keeps_it_as_history(brain: Brain) -> None:
    old = brain.memory.add("session cache TTL is 60 s", "shop").note["zk_id"]
    brain.clock.advance(days=3)
    res = brain.memory.add("session cache TTL is 300 s", "shop", supersedes=[old])
    new = res.note["zk_id"]
    assert res.supersession is not None and res.supersession["superseded"] == [old]
    hits = _search(brain, "session cache TTL")
    assert new in hits and old not in hits
    # readable by id, and named as superseded with the time it stopped being true
    gone = brain.memory.get(old)
    assert gone["superseded_by"] == new and gone["valid_to"] == brain.memory.get(new)["created"]
    history = brain.memory.get(new)["history"]
    assert [h["zk_id"] for h in history] == [old]
    assert history[0]["content"] == "session cache TTL is 60 s" and not history[0]["version"]


def test_both_filter_paths_leave_a_superseded_note_out(brain: Brain) -> None:
    from brain.store import recall_key

    old = brain.memory.add("the retention window is 7 days", "shop").note["zk_id"]
    new = brain.memory.add("the retention window is 30 days", "shop",
                           supersedes=[old]).note["zk_id"]
    assert recall_key.complete(brain.meta.data)  # the default search asks the key
    key = brain.memory.get_payload(old)[recall_key.FIELD]
    assert key and all('"old"]' in k for k in key)
    # the full conditions (a store not keyed yet, or a search across models)
    assert _search(brain, "retention window", fingerprint_match=False) == [new]
    assert set(_search(brain, "retention window", fingerprint_match=False,
                       as_of=brain.clock.now().isoformat())) == {new}


def test_forgetting_the_newer_note_brings_the_older_back_and_restore_supersedes_again(
        brain: Brain) -> None:
    old = brain.memory.add("the worker pool has 4 threads", "shop").note["zk_id"]
    new = brain.memory.add("the worker pool has 16 threads", "shop",
                           supersedes=[old]).note["zk_id"]
    brain.memory.forget(new)
    assert old in _search(brain, "worker pool threads")
    back = brain.memory.get(old)
    assert "superseded_by" not in back and "valid_to" not in back
    brain.memory.restore(new)
    hits = _search(brain, "worker pool threads")
    assert new in hits and old not in hits
    assert brain.memory.get(old)["superseded_by"] == new


def test_update_keeps_the_earlier_text_as_a_version_in_history(brain: Brain) -> None:
    zk = brain.memory.add("deploys run from the release branch", "shop").note["zk_id"]
    brain.clock.advance(days=1)
    brain.memory.update(zk, "deploys run from the main branch with a tag", keep_history=True)
    note = brain.memory.get(zk)
    assert note["content"] == "deploys run from the main branch with a tag"
    [past] = note["history"]
    assert past["content"] == "deploys run from the release branch" and past["version"]
    version = brain.memory.get(past["zk_id"])
    assert version["version_of"] == zk and version["superseded_by"] == zk
    assert _search(brain, "deploys release branch") == [zk]  # the version is history only
    # a second update keeps both earlier texts, newest first
    brain.clock.advance(days=1)
    brain.memory.update(zk, "deploys run from main on every merge", keep_history=True)
    texts = [h["content"] for h in brain.memory.get(zk)["history"]]
    assert texts == ["deploys run from the main branch with a tag",
                     "deploys run from the release branch"]
    # forgetting the note does not resurrect its own earlier text
    brain.memory.forget(zk)
    assert _search(brain, "deploys branch") == []


def test_bad_supersedes_is_refused_and_writes_nothing(brain: Brain) -> None:
    other = brain.memory.add("the api rate limit is 100 per minute", "billing").note["zk_id"]
    before = brain.memory.stats()["notes"]
    with pytest.raises(InvalidArgument, match="own project"):
        brain.memory.add("the api rate limit is 200 per minute", "shop", supersedes=[other])
    with pytest.raises(NoteNotFound):
        brain.memory.add("x is 2", "shop", supersedes=["ZK-00000000"])
    with pytest.raises(InvalidArgument, match="not a note id"):
        brain.memory.add("x is 2", "shop", supersedes=["nope"])
    mine = brain.memory.add("the cache is redis 6", "shop", visibility="private").note["zk_id"]
    with pytest.raises(InvalidArgument, match="same visibility"):
        brain.memory.add("the cache is redis 7", "shop", supersedes=[mine])
    assert brain.memory.stats()["notes"] == before + 1
    assert "superseded_by" not in brain.memory.get(other)
    with pytest.raises(InvalidArgument, match="new_content, supersedes"):
        brain.memory.update(mine, None)


# ------------------------------------------------------------------------------ tenancy
def test_a_superseding_note_never_reaches_another_users_note(brain: Brain) -> None:
    with acting_as(Identity("alice", "a1")):
        a = brain.memory.add("the staging database is postgres 14", "shop").note["zk_id"]
    with acting_as(Identity("bob", "b1")):
        with pytest.raises(NoteNotFound):  # not even by id: bob cannot name it
            brain.memory.add("the staging database is postgres 16", "shop", supersedes=[a])
        b = brain.memory.add("the staging database is postgres 16", "shop").note["zk_id"]
        assert "history" not in brain.memory.get(b)
    with acting_as(Identity("alice", "a1")):
        assert "superseded_by" not in brain.memory.get(a)
        assert a in _search(brain, "staging database postgres")


def test_a_private_note_never_hides_a_shared_one_from_sibling_agents(brain: Brain) -> None:
    with acting_as(Identity("alice", "a1")):
        shared = brain.memory.add("the build uses node 18", "shop").note["zk_id"]
        with pytest.raises(InvalidArgument, match="same visibility"):
            brain.memory.add("the build uses node 20", "shop", visibility="private",
                             supersedes=[shared])
        brain.memory.add("the build uses node 20", "shop", visibility="private")
    with acting_as(Identity("alice", "a2")):  # the sibling still sees the shared note
        assert shared in _search(brain, "build node version")


# ------------------------------------------------------------------------------ detection
def test_the_judge_applies_proposes_and_refuses() -> None:
    def note(text: str, zk: str = "ZK-00000001", **extra: Any) -> dict[str, Any]:
        return {"zk_id": zk, "content": text, **extra}

    applied = judge(note("session cache TTL is now 300 s"), note("session cache TTL is 60 s"),
                    0.9)
    assert applied is not None and applied.confidence == "applied"
    assert "60" in applied.why and "300" in applied.why
    weak = judge(note("we now keep the session cache TTL at 300 s for logged in users"),
                 note("session cache TTL is 60 s"), 0.72)
    assert weak is None or weak.confidence == "proposed"
    # another subject's fact: a name and a number both changed
    assert judge(note("the mailer retry limit is 3"), note("the indexer retry limit is 5"),
                 0.9) is None
    assert judge(note("the cache TTL is 60 s"), note("the cache TTL is 60 s"), 0.99) is None
    assert judge(note("the cache TTL is 300 s"), note("the cache TTL is 60 s"), 0.5) is None
    cite = [{"path": "app/cache.py", "symbol": "TTL"}]
    by_code = judge(note("cache expiry moved to 300 s", cites=cite),
                    note("cache expiry is 60 s", cites=cite), 0.71)
    assert by_code is not None and by_code.confidence == "applied"


def test_the_judge_reads_the_claim_not_its_wording() -> None:
    """How agents write a change: a kind label, the old value in an aside or in "from X to
    Y". Each missed before (the old value counted as one of the newer note's, the label as
    a changed word); a lookalike of another subject still is no supersession."""
    old = {"zk_id": "ZK-00000001", "content": "Decision: the orders service uses PostgreSQL 14."}
    for text in ("The orders service now uses PostgreSQL 16.",
                 "Decision: the orders service moved to PostgreSQL 16 (14 is end of life)."):
        verdict = judge({"content": text}, old, 0.85)
        assert verdict is not None and verdict.confidence == "applied", text
        assert "14 -> 16" in verdict.why
    queue = {"zk_id": "ZK-00000002", "content": "The email queue name is jobs."}
    moved = judge({"content": "We changed the email queue name from jobs to tasks."}, queue, 0.8)
    assert moved is not None and "jobs -> tasks" in moved.why
    ttl = {"zk_id": "ZK-00000003", "content": "The session cache TTL is 300 seconds."}
    moved = judge({"content": "We changed the session cache TTL from 300 seconds to 900 "
                              "seconds."}, ttl, 0.9)
    assert moved is not None and moved.confidence == "applied"
    # "from X to Y" of another subject's value names nothing the older note holds
    assert judge({"content": "The mailer retry limit went from 2 to 3."},
                 {"zk_id": "ZK-00000004", "content": "The indexer retry limit is 5."},
                 0.9) is None


def test_a_changed_setting_is_detected_at_write_time(real_brain: Brain) -> None:
    b = real_brain
    old = b.memory.add("The session cache TTL is 60 seconds.", "shop").note["zk_id"]
    res = b.memory.add("The session cache TTL is 300 seconds.", "shop")
    new = res.note["zk_id"]
    assert res.supersession is not None
    assert res.supersession["superseded"] == [old]
    assert res.supersession["detected"][0]["confidence"] == "applied"
    assert _search(b, "what is the session cache TTL")[0] == new
    assert old not in _search(b, "what is the session cache TTL")
    assert [h["zk_id"] for h in b.memory.get(new)["history"]] == [old]


def test_unrelated_and_other_subject_notes_are_never_superseded(real_brain: Brain) -> None:
    b = real_brain
    seeded = [
        "The mailer retry limit is 3 attempts.",
        "The indexer retry limit is 5 attempts.",
        "Payments go through Stripe with idempotency keys.",
        "The session cache TTL is 60 seconds.",
        "Use ruff for linting and mypy for types.",
        "The session cache lives in Redis.",
        "The login page rate limit is 10 requests per minute.",
        "The search page rate limit is 50 requests per minute.",
    ]
    results = [b.memory.add(t, "shop") for t in seeded]
    assert all(r.supersession is None or not r.supersession["superseded"] for r in results)
    assert all("superseded_by" not in b.memory.get(r.note["zk_id"]) for r in results)


def test_a_weak_detection_is_a_proposal_until_confirmed(real_brain: Brain,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from brain.memory import supersede

    b = real_brain
    old = b.memory.add("The session cache TTL is 60 seconds.", "shop").note["zk_id"]
    # make this pair weak evidence: only the proposal band holds
    monkeypatch.setattr(supersede, "APPLY_SIMILARITY", 1.01)
    monkeypatch.setattr(supersede, "APPLY_OVERLAP", 1.01)
    res = b.memory.add("The session cache TTL is 300 seconds.", "shop")
    new = res.note["zk_id"]
    assert res.supersession is not None and res.supersession["superseded"] == []
    assert res.supersession["detected"][0] == {**res.supersession["detected"][0],
                                               "zk_id": old, "confidence": "proposed"}
    assert b.memory.get(new)["proposed_supersedes"] == [old]
    assert old in _search(b, "session cache TTL")  # a proposal hides nothing
    # the agent forgets the older note: that confirms the proposal, the note is history
    out = b.memory.forget(old)
    assert out["superseded_by"] == new and not out.get("forgotten")
    assert old not in _search(b, "session cache TTL")
    note = b.memory.get(new)
    assert "proposed_supersedes" not in note and [h["zk_id"] for h in note["history"]] == [old]
    # forgetting it again forgets it
    assert b.memory.forget(old)["forgotten"] is True
    assert "history" not in b.memory.get(new)


def test_the_service_confirms_a_proposal_by_id(real_brain: Brain,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from brain.memory import supersede

    b = real_brain
    old = b.memory.add("The upload size limit is 10 MB.", "shop").note["zk_id"]
    monkeypatch.setattr(supersede, "APPLY_SIMILARITY", 1.01)
    monkeypatch.setattr(supersede, "APPLY_OVERLAP", 1.01)
    new = b.memory.add("The upload size limit is 50 MB.", "shop").note["zk_id"]
    assert b.memory.get(new)["proposed_supersedes"] == [old]
    b.memory.update(new, None, supersedes=[old])
    assert old not in _search(b, "upload size limit")
    assert "proposed_supersedes" not in b.memory.get(new)


def test_rejecting_a_proposal_keeps_both(real_brain: Brain,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from brain.memory import supersede

    b = real_brain
    old = b.memory.add("The worker pool size is 4 threads.", "shop").note["zk_id"]
    monkeypatch.setattr(supersede, "APPLY_SIMILARITY", 1.01)
    monkeypatch.setattr(supersede, "APPLY_OVERLAP", 1.01)
    new = b.memory.add("The worker pool size is 16 threads.", "shop").note["zk_id"]
    assert b.memory.get(new)["proposed_supersedes"] == [old]
    b.memory.update(new, None, supersedes=[])
    assert "proposed_supersedes" not in b.memory.get(new)
    assert {old, new} <= set(_search(b, "worker pool threads"))


# ------------------------------------------------------------------------------ as of
def test_as_of_returns_what_the_brain_believed_then(brain: Brain) -> None:
    t0 = brain.clock.now()
    old = brain.memory.add("the upload size limit is 10 MB", "shop").note["zk_id"]
    brain.clock.advance(days=10)
    t1 = brain.clock.now().isoformat()
    brain.clock.advance(days=10)
    new = brain.memory.add("the upload size limit is 50 MB", "shop",
                           supersedes=[old]).note["zk_id"]
    brain.clock.advance(days=1)
    q = "upload size limit"
    assert _search(brain, q, as_of=t1) == [old]  # the newer note was not written yet
    assert _search(brain, q) == [new]
    assert _search(brain, q, as_of=brain.clock.now().isoformat()) == [new]
    assert _search(brain, q, as_of=t0.replace(year=t0.year - 1).isoformat()) == []
    assert _search(brain, q, as_of=t1[:10]) == [old]  # a bare date: its midnight, UTC


def test_as_of_before_an_update_shows_the_earlier_text(brain: Brain) -> None:
    zk = brain.memory.add("uploads are scanned by clamav", "shop").note["zk_id"]
    brain.clock.advance(days=2)
    t = brain.clock.now().isoformat()
    brain.clock.advance(days=2)
    brain.memory.update(zk, "uploads are scanned by clamav and yara", keep_history=True)
    then = brain.memory.search("uploads scanned", 10, RecallFilter(project="shop", as_of=t))
    assert [h["content"] for h in then] == ["uploads are scanned by clamav"]
    now = brain.memory.search("uploads scanned", 10, RecallFilter(project="shop"))
    assert [h["content"] for h in now] == ["uploads are scanned by clamav and yara"]


def test_as_of_a_commit_of_the_projects_repository(brain: Brain, tmp_path: Any) -> None:
    import os
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("LIMIT = 10\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(tmp_path),
           "GIT_AUTHOR_DATE": "2026-01-05T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-05T00:00:00Z"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "first"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, env=env,
                         capture_output=True, text=True).stdout.strip()
    src = brain.sources.add(str(repo), name="repo", project="shop", sync=False)
    brain.sources.sync(src["source"]["id"], wait=True, timeout=60)
    old = brain.memory.add("the export limit is 10 rows", "shop").note["zk_id"]  # Jan 1
    brain.clock.advance(days=10)
    new = brain.memory.add("the export limit is 500 rows", "shop",
                           supersedes=[old]).note["zk_id"]
    assert _search(brain, "export limit", as_of=sha) == [old]  # committed on Jan 5
    assert _search(brain, "export limit", as_of=sha[:8]) == [old]
    assert _search(brain, "export limit") == [new]
    with pytest.raises(InvalidArgument, match="neither a date nor a commit"):
        _search(brain, "export limit", as_of="0" * 40)


def test_a_bad_as_of_is_refused(brain: Brain) -> None:
    with pytest.raises(InvalidArgument, match="neither a date nor a commit"):
        brain.memory.search("x", 5, RecallFilter(as_of="last tuesday"))
    with pytest.raises(InvalidArgument, match="future"):
        brain.memory.search("x", 5, RecallFilter(as_of="2999-01-01"))


# ------------------------------------------------------------------------------ the tools
async def test_the_tools_supersede_confirm_and_search_as_of(brain: Brain, client: Any) -> None:
    async def call(name: str, **args: Any) -> Any:
        return (await client.call_tool(name, args)).data

    old = (await call("add_memory", content="the queue is named jobs", project="shop")
           )["note"]["zk_id"]
    t = brain.clock.now().isoformat()
    brain.clock.advance(days=1)
    out = await call("add_memory", content="the queue is named tasks", project="shop",
                     supersedes=[old])
    new = out["note"]["zk_id"]
    assert out["supersession"]["superseded"] == [old]
    note = (await call("get_note", zk_id=new))["note"]
    assert note["history"][0]["zk_id"] == old
    hits = await call("search_memory", query="queue name", project="shop", top_k=5)
    assert old not in _ids(hits["results"])
    then = await call("search_memory", query="queue name", project="shop", top_k=5,
                      filters={"as_of": t})
    assert _ids(then["results"]) == [old]
    with pytest.raises(ToolError, match="INVALID_ARGUMENT"):
        await client.call_tool("search_memory", {"query": "q", "filters": {"as_of": "soon"}})
    upd = await call("update_memory", zk_id=new, new_content="the queue is named work")
    assert upd["note"]["content"] == "the queue is named work"


def test_the_session_context_lists_only_the_current_decision(brain: Brain) -> None:
    old = brain.memory.add("we deploy with helm charts", "shop", note_kind="decision")
    new = brain.memory.add("we deploy with kustomize overlays", "shop", note_kind="decision",
                           supersedes=[old.note["zk_id"]])
    shown = [r["zk_id"] for r in brain.sessions.get_session_context("shop")["recent_decisions"]]
    assert shown == [new.note["zk_id"]]


# ------------------------------------------------------------------------------ the explorer
def test_the_note_page_shows_the_history_and_the_superseded_badge(brain: Brain) -> None:
    from types import SimpleNamespace

    from starlette.testclient import TestClient

    from webui.auth import Logins
    from webui.site import create_app

    old = brain.memory.add("the image format is png", "shop").note["zk_id"]
    new = brain.memory.add("the image format is webp", "shop", supersedes=[old]).note["zk_id"]
    assert brain.memory.stats()["superseded"] == 1
    logins = Logins(brain.home, Identity(brain.settings.identity.user_id,
                                         brain.settings.identity.agent_id))
    c = TestClient(create_app(SimpleNamespace(brain=brain), logins),
                   base_url="http://127.0.0.1:8766")
    assert c.get(f"/login?token={logins.issue_link()}", follow_redirects=False).status_code == 303
    page = c.get(f"/note/{new}").text
    assert 'id="note-history"' in page and "the image format is png" in page
    assert f'href="/note/{old}"' in page
    older = c.get(f"/note/{old}").text
    assert 'id="superseded"' in older and f'href="/note/{new}"' in older
