"""One retrieval policy for search_memory, search_files and fs_search (issue 17): the same
function ranks all three, a clearly best match is never hidden by a fixed threshold,
fs_search returns one row per file, and search_files states a clamped limit."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import brain.search.policy as policy_mod
from brain.app import Brain
from brain.memory import RecallFilter
from brain.search.fusion import Candidate
from brain.search.policy import floor

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = "When the payment queue backs up, drain it with the replay worker and page the on-call."
QUERY = "what to do when payments pile up"
OTHERS = {
    "garden.md": "The community garden waters tomatoes twice a week in July and August.",
    "frontend.md": "Frontend builds use Vite; the dev server listens on port 5173.",
    "holidays.md": "Staff may carry over five unused vacation days into the next year.",
}
SEARCHES = ("brain/memory/read.py", "brain/files/service.py", "brain/sources/search.py")


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text + "\n", encoding="utf-8")
    return path


@pytest.fixture
def rank_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of the policy's fusion (brain.search.fusion.hybrid as rank calls it), by
    which search made it."""
    calls: list[str] = []
    inner = policy_mod.hybrid

    def spy(*args: Any, **kw: Any) -> list[Candidate]:
        calls.append(kw["method"])
        return inner(*args, **kw)

    monkeypatch.setattr(policy_mod, "hybrid", spy)
    return calls


@pytest.mark.model
def test_the_runbook_paraphrase_is_found_by_search_files_and_fs_search(
    real_brain: Brain, tmp_path: Path, rank_calls: list[str]
) -> None:
    docs = tmp_path / "docs"
    paths = [_write(docs, "runbook.md", RUNBOOK)]
    paths += [_write(docs, name, text) for name, text in OTHERS.items()]
    for path in paths:
        done = real_brain.files.wait(real_brain.files.ingest(path)["id"], 60)
        assert done["status"] == "ready", done
    hits = real_brain.files.search(QUERY, limit=3)
    assert hits and hits[0]["file"] == "runbook.md"
    # the old fixed cosine threshold (0.5) would have hidden it
    assert hits[0]["similarity"] is not None and hits[0]["similarity"] < 0.5
    assert len(rank_calls) == 1

    real_brain.sources.add(str(docs), name="docs", trigger="manual")
    assert real_brain.sources.wait_idle(60)
    rows = real_brain.sources.search(QUERY, "semantic", limit=10)["results"]
    assert rows[0]["path"] == "runbook.md"
    assert len(rank_calls) == 2

    real_brain.memory.add(RUNBOOK, project="ops")
    found = real_brain.memory.search(QUERY, top_k=3, rf=RecallFilter(project="ops"))
    assert found and found[0]["content"].startswith("When the payment queue")
    # the three searches went through the one policy, with the same fusion
    assert len(rank_calls) == 3 and len(set(rank_calls)) == 1


@pytest.mark.model
def test_fs_search_returns_one_row_per_file(real_brain: Brain, tmp_path: Path) -> None:
    src = tmp_path / "src"
    # long enough for several chunks: the file's own point and its chunks all match
    _write(src, "payments.md", "\n\n".join([RUNBOOK] * 3 + [
        f"Section {i}: the payment replay worker retries failed charges." for i in range(60)
    ]))
    for name, text in OTHERS.items():
        _write(src, name, text)
    real_brain.sources.add(str(src), name="src", trigger="manual")
    assert real_brain.sources.wait_idle(60)
    rows = real_brain.sources.search("payment replay worker", "semantic", limit=10)["results"]
    paths = [r["path"] for r in rows]
    assert paths[0] == "payments.md"
    assert len(paths) == len(set(paths)), paths  # never the file point and its chunk 0


def test_the_three_searches_import_one_ranking_and_no_other_fusion() -> None:
    for rel in SEARCHES:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        imported = {(n.module, a.name) for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) for a in n.names}
        assert ("brain.search.policy", "rank") in imported, rel
        fusion = {name for mod, name in imported if mod == "brain.search.fusion"}
        assert not fusion & {"hybrid", "fuse"}, (rel, fusion)
        called = {n.func.id for n in ast.walk(tree)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "rank" in called, rel


def test_relative_floor_never_hides_the_best_match() -> None:
    cands = [Candidate("a", {}, 0.2), Candidate("b", {}, 0.15), Candidate("c", {}, 0.05)]
    assert [c.id for c in floor(cands, 0.0)] == ["a", "b", "c"]
    assert [c.id for c in floor(cands, 0.5)] == ["a", "b"]
    assert [c.id for c in floor(cands, 1.0)] == ["a"]  # the best always stays
    assert floor([], 0.9) == []


async def test_search_files_clamps_a_large_limit_and_says_so(client: Any) -> None:
    out = (await client.call_tool("search_files", {"query": "anything", "limit": 500})).data
    assert out["count"] == 0 and out["limit"] == 30
    assert "500" in out["note"] and "30" in out["note"]
    small = (await client.call_tool("search_files", {"query": "anything", "limit": 5})).data
    assert "note" not in small


def test_a_note_next_to_a_strong_match_rises_with_the_neighbour_lever() -> None:
    from brain.notes import point_id
    from brain.search.fusion import with_neighbours

    def cand(zk: str, score: float, prev: str | None = None) -> Candidate:
        c = Candidate(point_id(zk), {"thread_prev": prev} if prev else {}, score)
        c.ranks["dense"] = 0
        return c

    question = cand("ZK-0000AAAA", 0.9)  # "what did you paint?"
    answer = cand("ZK-0000BBBB", 0.5, prev="ZK-0000AAAA")  # "a sunset", after it
    other = cand("ZK-0000CCCC", 0.6)
    ranked = with_neighbours([question, other, answer], 0.3)
    assert [c.id for c in ranked][:2] == [question.id, answer.id]
    assert answer.score == pytest.approx(0.5 + 0.3 * 0.9)
    assert question.score == pytest.approx(0.9 + 0.3 * 0.5)
    assert other.score == 0.6  # no neighbours recorded: unchanged


def test_a_decisive_keyword_match_ranks_first_and_only_first_place_moves() -> None:
    from brain.search.fusion import fuse, keyword_lead
    from brain.vector_store import Hit

    # "b" is a little good in both legs; "k" is BM25's decisive first hit with a middling
    # cosine. dbsf at 0.45 puts "b" first; the keyword lead puts "k" there, the rest in order.
    dense = [Hit("b", 0.62, {}), Hit("a", 0.60, {}), Hit("z", 0.58, {}), Hit("k", 0.35, {})]
    sparse = [Hit("k", 9.0, {}), Hit("b", 8.0, {}), Hit("a", 1.0, {}), Hit("y", 0.5, {})]
    fused = fuse(dense, sparse, "dbsf", 0.45)
    assert fused[0].id == "b"
    order = [c.id for c in fused]
    led = keyword_lead(list(fused), sparse, 0.05, 0.45)
    assert [c.id for c in led] == ["k", *(i for i in order if i != "k")]
    assert led[0].score > led[1].score  # still sorted: floors and bands read it as the best
    # Not decisive (9.0 vs 8.9 is a 1% lead), or the fusion trusts meaning more (code
    # candidates at the code weight), or the lever off: the fused order stands.
    close = [Hit("k", 9.0, {}), Hit("b", 8.9, {})]
    assert keyword_lead(fuse(dense, close, "dbsf", 0.45), close, 0.05, 0.45)[0].id == "b"
    assert keyword_lead(list(fuse(dense, sparse, "dbsf", 0.45)), sparse, 0.05, 0.8)[0].id == "b"
    assert keyword_lead(list(fuse(dense, sparse, "dbsf", 0.45)), sparse, 0.0, 0.45)[0].id == "b"


def test_the_keyword_lead_is_on_in_the_policy_all_three_searches_share() -> None:
    """The default policy (config.py -> app.py -> rank) carries the lever; hybrid applies it
    after fusion, so search_memory, search_files and fs_search all get it."""
    import inspect

    from brain.search.fusion import fuse_legs, hybrid
    from config import RetrievalSettings

    assert RetrievalSettings().keyword_lead == 0.05
    assert "keyword_lead(" in inspect.getsource(fuse_legs)
    assert "fuse_legs(" in inspect.getsource(hybrid)
    assert "lead_gap=policy.keyword_lead" in inspect.getsource(policy_mod.rank)
    assert "adaptive=policy.adaptive" in inspect.getsource(policy_mod.rank)
