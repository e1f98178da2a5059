"""Tenancy: no search crosses projects unless asked; private notes stay with their agent.

Several users, agents and projects write shared and private notes from one vocabulary (so
foreign notes are always good candidates), then 1,000 random searches (search_memory and
deep_search, random caller, project and flags) must return zero foreign hits. Positive
controls show the flags do widen the scope when asked, so the zero is not vacuous.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest

from brain.app import Brain
from brain.memory import RecallFilter
from brain.trust.identity import Identity, acting_as

USERS = {"ann": ("ann-laptop", "ann-ci"), "bob": ("bob-desk", "bob-ci")}
PROJECTS = ("alpha", "beta", "gamma", "general")  # "general" is the default project
WORDS = (
    "cache", "retry", "index", "schema", "deploy", "socket", "token", "parser", "queue",
    "latency", "migration", "watcher", "logging", "timeout", "vector", "graph",
)  # fmt: skip
N_SEARCHES = 1000


@dataclass(frozen=True)
class Owner:
    user: str
    agent: str
    project: str
    visibility: str


def _text(rng: random.Random, n: int = 4) -> str:
    return " ".join(rng.sample(WORDS, n))


@pytest.fixture
def seeded(brain: Brain) -> tuple[Brain, dict[str, Owner]]:
    rng = random.Random(7)
    owners: dict[str, Owner] = {}
    for user, agents in USERS.items():
        for agent in agents:
            with acting_as(Identity(user, agent)):
                for project in PROJECTS:
                    for visibility in ("shared", "private", "shared", "private"):
                        res = brain.memory.add(
                            f"{_text(rng)} note of {agent} in {project}",
                            project,
                            visibility=visibility,
                            tags=[rng.choice(("red", "blue"))],
                        )
                        owners[res.note["zk_id"]] = Owner(user, agent, project, visibility)
    return brain, owners


def _foreign(hit: dict[str, Any], owner: Owner, me: Identity, rf: RecallFilter) -> str | None:
    """Why ``hit`` must not have been returned to ``me`` under ``rf``, or None if it may."""
    if owner.user != me.user_id:
        return "another user's note"
    if not rf.all_projects and owner.project != (rf.project or "general"):
        return "another project's note"
    if not rf.include_siblings and owner.visibility == "private" and owner.agent != me.agent_id:
        return "a sibling agent's private note"
    if hit.get("agent_id") != owner.agent or hit.get("project") != owner.project:
        return "payload does not match what was written"
    return None


def test_zero_foreign_hits_across_1000_random_searches(
    seeded: tuple[Brain, dict[str, Owner]],
) -> None:
    brain, owners = seeded
    rng = random.Random(11)
    callers = [Identity(u, a) for u, agents in USERS.items() for a in agents]
    foreign: list[str] = []
    with_hits = widened_projects = widened_siblings = deep_runs = 0
    for i in range(N_SEARCHES):
        me = rng.choice(callers)
        rf = RecallFilter(
            project=rng.choice((*PROJECTS, None)),
            include_siblings=rng.random() < 0.25,
            all_projects=rng.random() < 0.2,
            tags=(rng.choice(("red", "blue")),) if rng.random() < 0.2 else (),
        )
        query = _text(rng, rng.randint(1, 3))
        with acting_as(me):
            if i % 5 == 0:
                deep_runs += 1
                hits = brain.agentic.deep_search(query, rf, hops=rng.randint(0, 2), top_k=10)[
                    "results"
                ]
            else:
                hits = brain.memory.search(query, rng.randint(1, 20), rf, stamp=rng.random() < 0.1)
        with_hits += bool(hits)
        for hit in hits:
            owner = owners[hit["zk_id"]]
            why = _foreign(hit, owner, me, rf)
            if why:
                foreign.append(f"search {i} by {me} ({rf}) got {hit['zk_id']}: {why}")
            if owner.project != (rf.project or "general"):
                widened_projects += 1
            if owner.visibility == "private" and owner.agent != me.agent_id:
                widened_siblings += 1
    assert foreign == []
    assert deep_runs == N_SEARCHES // 5
    # Not vacuous: searches find things, and the opt-in flags do reach across when asked.
    assert with_hits > 0.9 * N_SEARCHES
    assert widened_projects > 0 and widened_siblings > 0


def test_siblings_and_projects_only_when_asked(seeded: tuple[Brain, dict[str, Owner]]) -> None:
    brain, owners = seeded
    me = Identity("ann", "ann-laptop")
    mine_private = {
        z for z, o in owners.items() if o.agent == "ann-ci" and o.visibility == "private"
    }

    def ids(rf: RecallFilter) -> set[str]:
        with acting_as(me):
            return {h["zk_id"] for h in brain.memory.search(" ".join(WORDS), 100, rf)}

    plain = ids(RecallFilter(project="alpha"))
    assert plain and not plain & mine_private
    assert {owners[z].project for z in plain} == {"alpha"}
    siblings = ids(RecallFilter(project="alpha", include_siblings=True))
    assert siblings & mine_private
    everywhere = ids(RecallFilter(all_projects=True))
    assert {owners[z].project for z in everywhere} == set(PROJECTS)
    assert {owners[z].user for z in everywhere | siblings} == {"ann"}


def test_links_never_reach_a_foreign_private_note(brain: Brain) -> None:
    with acting_as(Identity("bob", "bob-ci")):
        secret = brain.memory.add("cache retry index schema deploy", "alpha", visibility="private")
    with acting_as(Identity("ann", "ann-laptop")):
        mine = brain.memory.add("cache retry index schema deploy", "alpha")
        related = brain.memory.related(mine.note["zk_id"])["related"]
    leaked = {x["zk_id"] for x in mine.linked} | {x["zk_id"] for x in related}
    assert secret.note["zk_id"] not in leaked
