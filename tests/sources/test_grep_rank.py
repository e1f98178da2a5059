"""grep results in a useful order (issue 52): the file that defines a symbol first, whole
words before parts of longer names, product before tests, vendored and generated files last;
and the cut said out loud."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from brain.sources import grep_rank


@dataclass(frozen=True)
class _Hit:
    path: str
    line: int
    text: str


@pytest.mark.parametrize("line", [
    "class RetryPolicy:", "class RetryPolicy(Base):", "def RetryPolicy(x):",
    "    async def RetryPolicy(self):", "export class RetryPolicy {",
    "export function RetryPolicy() {", "const RetryPolicy = () => 1", "func RetryPolicy() {",
    "func (s *Server) RetryPolicy() error {", "pub fn RetryPolicy() {", "pub struct RetryPolicy {",
    "type RetryPolicy struct {", "interface RetryPolicy {", "RetryPolicy = make_policy()",
    "RetryPolicy: Final = 3", "#define RetryPolicy 3",
])
def test_a_definition_line_is_recognised(line: str) -> None:
    ranker = grep_rank.Ranker("RetryPolicy", fixed=True, case_insensitive=False)
    assert ranker.key(_Hit("a.py", 1, line))[1] == 0


@pytest.mark.parametrize("line", [
    "policy = RetryPolicy()", "from x import RetryPolicy", "return RetryPolicy(3)",
    "RetryPolicy == other", "# RetryPolicy is the default", "class RetryPolicyError:",
    "def RetryPolicyFactory():",
])
def test_a_use_is_not_a_definition(line: str) -> None:
    ranker = grep_rank.Ranker("RetryPolicy", fixed=True, case_insensitive=False)
    assert ranker.key(_Hit("a.py", 1, line))[1] == 1


@pytest.mark.parametrize(("path", "cls"), [
    ("brain/app.py", 0), ("bench/peer.py", 0), ("src/lib.rs", 0),
    ("tests/test_app.py", 1), ("pkg/app_test.go", 1), ("web/app.spec.ts", 1),
    ("node_modules/x/index.js", 2), ("webui/static/vendor/cytoscape.min.js", 2),
    ("api/thing_pb2.py", 2), ("package-lock.json", 2), ("dist/bundle.js", 2),
])
def test_path_classes(path: str, cls: int) -> None:
    assert grep_rank.path_class(path) == cls


def test_definition_first_then_product_then_tests_then_vendored() -> None:
    hits = [
        _Hit("bench/a.py", 3, "p = RetryPolicy()"),
        _Hit("vendor/lib.min.js", 1, "var RetryPolicy=1"),
        _Hit("tests/test_policy.py", 9, "assert RetryPolicy()"),
        _Hit("bench/b.py", 1, "RetryPolicyFactory()"),
        _Hit("src/policy.py", 40, "class RetryPolicy:"),
        _Hit("src/use.py", 2, "RetryPolicy(3)"),
    ]
    ranked = [h.path for h in grep_rank.rank(hits, "RetryPolicy", fixed=True,
                                             case_insensitive=False)]
    assert ranked == ["src/policy.py", "bench/a.py", "src/use.py", "bench/b.py",
                      "tests/test_policy.py", "vendor/lib.min.js"]


def test_a_regex_query_keeps_path_order_within_a_class() -> None:
    hits = [_Hit("z.py", 1, "foo1"), _Hit("a.py", 2, "foo2"), _Hit("vendor/x.js", 1, "foo3")]
    ranked = grep_rank.rank(hits, r"foo\d", fixed=False, case_insensitive=False)
    assert grep_rank.symbol_of(r"foo\d", fixed=False) is None
    assert [h.path for h in ranked] == ["a.py", "z.py", "vendor/x.js"]


def _w(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


async def test_fs_search_grep_puts_the_definition_first_and_reports_the_cut(
    client: Any, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    for i in range(30):  # many users of the symbol, in files that sort before its definition
        _w(root, f"bench/a{i:02}.py", f"from src.policy import RetryPolicy\nRetryPolicy({i})\n")
    _w(root, "static/vendor/lib.min.js", "var RetryPolicy=1;\n")
    _w(root, "src/policy.py", "import os\n\n\nclass RetryPolicy:\n    pass\n")
    await client.call_tool("add_source", {"path": str(root), "name": "proj", "trigger": "manual"})
    await client.call_tool("sync_source", {"source": "proj", "wait": True})
    page = (await client.call_tool(
        "fs_search", {"query": "RetryPolicy", "search_mode": "grep", "limit": 5})).data
    first = page["results"][0]
    assert (first["path"], first["line_start"]) == ("src/policy.py", 4)
    assert page["count"] == 5 and page["truncated"] is True
    assert page["matched"] == 62 and page["matched_all"] is True  # 30 files x 2 lines + 2
    everything = (await client.call_tool(
        "fs_search", {"query": "RetryPolicy", "search_mode": "grep", "limit": 100})).data
    assert everything["truncated"] is False and everything["count"] == 62
    assert everything["results"][-1]["path"] == "static/vendor/lib.min.js"
