"""The memory service on Qdrant Edge with the offline embedder."""

from __future__ import annotations

import pytest

from brain.app import Brain
from brain.errors import Conflict, ContentTooLarge, InvalidArgument, NoteNotFound
from brain.memory import RecallFilter
from brain.notes import ZK_ID_RE


def test_add_returns_enriched_note(brain: Brain) -> None:
    res = brain.memory.add(
        "Redis runs on port 6379 in the dev compose file; staging uses 6380.",
        project="shop", note_kind="decision",
    )
    n = res.note
    assert ZK_ID_RE.match(n["zk_id"])
    assert n["title"] == "Redis runs on port 6379 in the dev compose file; staging uses 6380"
    assert len(n["title"]) <= 80
    assert 5 <= len(n["keywords"]) <= 10
    assert 2 <= len(n["tags"]) <= 5
    assert n["enriched_by"] == "heuristic"
    assert (n["memory_type"], n["note_kind"], n["project"]) == ("permanent", "decision", "shop")


def test_a_template_s_headings_are_not_the_note_s_keywords(brain: Brain) -> None:
    """A session summary's "Key files:" heading tagged it security, and its "- (none)"
    placeholders made "none" a keyword; the note's own words still tag it."""
    res = brain.memory.add("Session summary (shop): fix CI on 3.10\n\nCompleted:\n- pinned "
                           "typing_extensions\n\nBlockers:\n- (none)\n\nKey files:\n- (none)",
                           project="shop", note_kind="session_summary")
    n = res.note
    assert "security" not in n["tags"] and "none" not in n["keywords"]
    assert "typing_extensions" in n["keywords"] and "devops" in n["tags"]  # "CI"
    leaked = brain.memory.add("Rotate the API key: it leaked in the CI logs.", project="shop")
    assert "security" in leaked.note["tags"]


def test_long_first_sentence_title_is_cut_at_a_word(brain: Brain) -> None:
    words = "configure the reverse proxy so that websocket upgrades pass through " * 4
    n = brain.memory.add(words).note
    assert len(n["title"]) <= 81 and n["title"].endswith("…")


def test_search_finds_and_stamps_access(brain: Brain) -> None:
    a = brain.memory.add("Postgres connection pool exhausted under load", project="api").note
    brain.memory.add("Frontend uses Vite with React", project="api")
    hits = brain.memory.search("postgres pool exhausted", 1, RecallFilter(project="api"))
    assert [h["zk_id"] for h in hits] == [a["zk_id"]]
    assert {"zk_id", "title", "content", "score", "project", "memory_type", "note_kind", "tags",
            "links"} <= hits[0].keys()
    brain.memory.search("postgres pool exhausted", 1, RecallFilter(project="api"))
    p = brain.memory.get_payload(a["zk_id"])
    assert p["access_count"] == 2 and p["last_accessed"]


def test_project_filter_and_fleeting_excluded_by_default(brain: Brain) -> None:
    brain.memory.add("kafka consumer lag alert threshold", project="a")
    fleeting = brain.memory.add("kafka consumer lag quick capture", project="b",
                                memory_type="fleeting").note
    hits = brain.memory.search("kafka consumer lag", 10, RecallFilter(project="b"))
    assert hits == []
    hits = brain.memory.search("kafka consumer lag", 10,
                               RecallFilter(project="b", include_fleeting=True))
    assert [h["zk_id"] for h in hits] == [fleeting["zk_id"]]


def test_contextual_notes_left_out_unless_asked(brain: Brain) -> None:
    brain.memory.add("session summary: migrated the auth service", note_kind="session_summary")
    assert brain.memory.search("migrated auth service", 5) == []
    rf = RecallFilter(include_contextual=True)
    assert len(brain.memory.search("migrated auth service", 5, rf)) == 1


def test_permanent_notes_link_both_ways(brain: Brain) -> None:
    brain.settings  # noqa: B018 - fixture sanity
    a = brain.memory.add("nginx reverse proxy config for websocket upgrade headers").note
    b = brain.memory.add("nginx reverse proxy websocket upgrade headers missing broke chat").note
    assert a["zk_id"] in [link["zk_id"] for link in b["links"]]
    pa = brain.memory.get_payload(a["zk_id"])
    assert b["zk_id"] in pa["links"]
    rel = brain.memory.related(a["zk_id"], 1)
    assert [r["zk_id"] for r in rel["related"]] == [b["zk_id"]]
    assert brain.graph.stats()["edges"] == 2


def test_fleeting_notes_are_not_linked(brain: Brain) -> None:
    brain.memory.add("grpc deadline exceeded on the payments client")
    f = brain.memory.add("grpc deadline exceeded on the payments client again",
                         memory_type="fleeting").note
    assert f["links"] == []


def test_update_reembeds_and_keeps_links(brain: Brain) -> None:
    a = brain.memory.add("celery worker memory leak in image resize task").note
    b = brain.memory.add("celery worker memory leak fixed by max tasks per child").note
    upd = brain.memory.update(a["zk_id"], "celery image resize leak: pillow buffers kept alive")
    assert upd.note["content"].startswith("celery image resize leak")
    assert b["zk_id"] in [link["zk_id"] for link in upd.note["links"]]
    hits = brain.memory.search("pillow buffers kept alive", 1)
    assert hits[0]["zk_id"] == a["zk_id"]


def test_distill_promotes_and_links(brain: Brain) -> None:
    brain.memory.add("terraform state lock stuck after ci cancel")
    f = brain.memory.add("terraform state lock stuck after ci cancel: force-unlock",
                         memory_type="fleeting").note
    res = brain.memory.distill(f["zk_id"])
    assert res.note["memory_type"] == "permanent"
    assert res.linked
    with pytest.raises(Conflict):
        brain.memory.distill(f["zk_id"])


def test_forget_hides_everywhere_and_restore_brings_back(brain: Brain) -> None:
    a = brain.memory.add("docker buildx cache mount for pip wheels").note
    b = brain.memory.add("docker buildx cache mount speeds pip wheels builds").note
    brain.memory.forget(a["zk_id"])
    assert all(h["zk_id"] != a["zk_id"] for h in brain.memory.search("buildx cache pip", 5))
    assert all(r["zk_id"] != a["zk_id"] for r in brain.memory.related(b["zk_id"])["related"])
    with pytest.raises(NoteNotFound):
        brain.memory.get_payload(a["zk_id"])
    out = brain.memory.restore(a["zk_id"])
    assert out["restored_from"] == "forgotten"
    assert any(h["zk_id"] == a["zk_id"] for h in brain.memory.search("buildx cache pip", 5))


def test_archived_never_returned_and_restorable(brain: Brain) -> None:
    a = brain.memory.add("legacy jenkins pipeline notes").note
    brain.memory.archive(a["zk_id"])
    assert brain.memory.search("legacy jenkins pipeline", 5) == []
    assert brain.memory.restore(a["zk_id"])["memory_type"] == "permanent"
    with pytest.raises(Conflict):
        brain.memory.restore(a["zk_id"])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"content": ""}, InvalidArgument),
        ({"content": "   "}, InvalidArgument),
        ({"content": "x" * 60_000}, ContentTooLarge),
        ({"content": "ok", "memory_type": "archived"}, InvalidArgument),
        ({"content": "ok", "note_kind": "research-ish"}, InvalidArgument),
        ({"content": "ok", "project": "x" * 200}, InvalidArgument),
        ({"content": "ok", "tags": "not-a-list"}, InvalidArgument),
    ],
)
def test_bad_input_is_rejected_and_writes_nothing(brain: Brain, kwargs: dict, error: type) -> None:
    before = brain.store.count()
    with pytest.raises(error) as err:
        brain.memory.add(**kwargs)
    assert err.value.code and err.value.message
    assert brain.store.count() == before


def test_top_k_bounds_and_unknown_id(brain: Brain) -> None:
    with pytest.raises(InvalidArgument):
        brain.memory.search("x", 0)
    with pytest.raises(InvalidArgument):
        brain.memory.search("x", 101)
    with pytest.raises(NoteNotFound):
        brain.memory.update("ZK-DEADBEEF", "new")
    with pytest.raises(InvalidArgument):
        brain.memory.update("not-an-id!", "new")


def test_secrets_are_redacted_before_storing(brain: Brain) -> None:
    res = brain.memory.add("deploy with AWS key AKIAIOSFODNN7EXAMPLE and token "
                           "ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    assert "AKIAIOSFODNN7EXAMPLE" not in res.note["content"]
    assert set(res.redacted) >= {"aws_access_key", "github_token"}


def test_stats_counts(brain: Brain) -> None:
    brain.memory.add("one permanent", note_kind="decision")
    brain.memory.add("one fleeting", memory_type="fleeting")
    st = brain.stats()
    assert st["by_memory_type"] == {"fleeting": 1, "permanent": 1, "archived": 0}
    assert st["by_note_kind"]["decision"] == 1
    assert st["backend"] == "qdrant-edge"
    assert st["model"]["active"] == "offline/hash-384"
