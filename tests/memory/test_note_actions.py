"""The note actions the web explorer offers, on the service: pin, set tags; and which legs
found a hit (``matched``). Bad input is a typed error that changes nothing; another user's
note is refused as if it did not exist."""

from __future__ import annotations

import pytest

from brain.errors import InvalidArgument, NoteNotFound
from brain.memory import RecallFilter
from brain.search.fusion import Candidate, matched_by
from brain.trust.identity import Identity, acting_as


def test_pin_and_unpin(brain) -> None:  # noqa: ANN001
    zk = brain.memory.add("pin me: the deploy checklist", "shop").note["zk_id"]
    assert brain.memory.pin(zk, True)["pinned"] is True
    assert brain.memory.get(zk)["pinned"] is True
    assert brain.memory.pin(zk, False)["pinned"] is False
    with pytest.raises(InvalidArgument):
        brain.memory.pin(zk, "yes")  # type: ignore[arg-type]
    assert brain.memory.get(zk)["pinned"] is False


def test_set_tags_checks_redacts_and_reindexes(brain) -> None:  # noqa: ANN001
    zk = brain.memory.add("the flaky integration suite", "shop", tags=["ci"]).note["zk_id"]
    out = brain.memory.set_tags(zk, ["flaky", "tests", "flaky"])
    assert out["tags"] == ["flaky", "tests"]
    hits = brain.memory.search("flaky", 5, RecallFilter(project="shop"), stamp=False)
    assert hits[0]["zk_id"] == zk  # the keyword vector follows the new tags
    with pytest.raises(InvalidArgument):
        brain.memory.set_tags(zk, ["x" * 65])
    with pytest.raises(InvalidArgument):
        brain.memory.set_tags(zk, [f"t{i}" for i in range(33)])
    assert brain.memory.get(zk)["tags"] == ["flaky", "tests"]  # the refusals changed nothing
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    assert secret not in brain.memory.set_tags(zk, [secret])["tags"]


def test_actions_on_another_users_note_are_refused(brain) -> None:  # noqa: ANN001
    with acting_as(Identity("alice", "a1")):
        zk = brain.memory.add("alice's note", "shop").note["zk_id"]
    with acting_as(Identity("bob", "b1")):
        with pytest.raises(NoteNotFound):
            brain.memory.pin(zk, True)
        with pytest.raises(NoteNotFound):
            brain.memory.set_tags(zk, ["bob"])
    with acting_as(Identity("alice", "a1")):
        p = brain.memory.get_payload(zk)
    assert not p.get("pinned") and "bob" not in p["tags"]


def test_a_forgotten_note_takes_no_tags(brain) -> None:  # noqa: ANN001
    zk = brain.memory.add("to be forgotten", "shop").note["zk_id"]
    brain.memory.forget(zk)
    with pytest.raises(NoteNotFound):
        brain.memory.set_tags(zk, ["late"])


def test_matched_names_the_legs_that_found_a_hit() -> None:
    assert matched_by(Candidate("a", {}, ranks={"dense": 0, "bm25": 3})) == "both"
    assert matched_by(Candidate("a", {}, ranks={"dense": 0})) == "dense"
    assert matched_by(Candidate("a", {}, ranks={"bm25": 1})) == "keyword"


def test_search_hits_carry_matched(brain) -> None:  # noqa: ANN001
    brain.memory.add("zebra crossing timing at the north gate", "shop")
    hits = brain.memory.search("zebra crossing", 5, RecallFilter(project="shop"), stamp=False)
    assert hits and hits[0]["matched"] in ("both", "keyword", "dense")
