"""[rerank] provider = "http": a rerank server on loopback that the test starts (real HTTP).

The protocol both ways (Jina/Cohere/vLLM/llama.cpp ``{"results": [{index,
relevance_score}]}`` and TEI ``[{index, score}]``), the search reordered by the server's
scores, and failing open: a slow server, a refusing one and every kind of garbage keep the
fused order within the timeout, are counted in brain_stats with their reason, and the key
is sent in the Authorization header only, never logged or shown.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from brain.app import Brain
from brain.errors import ModelUnavailable
from brain.memory import RecallFilter, embed_text
from brain.search import rerank
from config import RerankSettings
from tests.conftest import _seed_store, hash_embedder
from tests.search.test_rerank import NOTES
from tests.timing import HANG_S

KEY = "sk-rerank-secret-4f1e9"
QUERY = "how does the deploy reach the database"
Answer = Callable[[dict[str, Any]], tuple[int, bytes, float]]  # status, body, delay


class RerankServer:
    """Answers each POST with ``answer(body)``; records the bodies and headers it got."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.seen: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                owner.seen.append({"path": self.path, "body": body,
                                   "auth": self.headers.get("authorization")})
                status, raw, delay = owner.answer(body)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:
                    pass  # the client gave up (the slow case)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True  # a held answer must not hold the test run's exit
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def url(self, path: str = "/v1/rerank") -> str:
        return f"http://127.0.0.1:{self.http.server_port}{path}"

    def close(self) -> None:
        self.http.shutdown()


def by_length(body: dict[str, Any]) -> list[float]:
    """A deterministic "cross-encoder": longer documents score higher."""
    return [float(len(d)) for d in body["documents"]]


def jina(body: dict[str, Any]) -> tuple[int, bytes, float]:
    scores = by_length(body)
    results = sorted(({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
                     key=lambda r: -r["relevance_score"])
    return 200, json.dumps({"results": results}).encode(), 0.0


def tei(body: dict[str, Any]) -> tuple[int, bytes, float]:
    assert body["texts"] == body["documents"]
    return 200, json.dumps([{"index": i, "score": s}
                            for i, s in enumerate(by_length(body))]).encode(), 0.0


@pytest.fixture
def open_brain(settings: Any, clock: Any, _empty_shard: Any) -> Iterator[Callable[..., Brain]]:
    opened: list[Brain] = []

    def make(url: str, **extra: Any) -> Brain:
        settings.embedding.model = "offline/hash-384"
        settings.rerank = RerankSettings(enabled=True, provider="http", url=url, api_key=KEY,
                                         model="bge-reranker", **extra)
        _seed_store(settings, _empty_shard)
        b = Brain(settings, embedder=hash_embedder(), clock=clock).open()
        opened.append(b)
        for text in NOTES:
            b.memory.add(text, project="p")
        return b

    yield make
    for b in opened:
        b.close()


def _search(b: Brain) -> list[dict[str, Any]]:
    return b.memory.search(QUERY, top_k=5, rf=RecallFilter(project="p"))


def _fused(b: Brain) -> list[str]:
    reranker, b.memory.reranker = b.memory.reranker, None
    try:
        return [h["zk_id"] for h in _search(b)]
    finally:
        b.memory.reranker = reranker


@pytest.mark.parametrize(("answer", "path"), [(jina, "/v1/rerank"), (tei, "/rerank")])
def test_the_server_s_scores_order_the_hits(open_brain: Any, answer: Answer, path: str) -> None:
    server = RerankServer(answer)
    try:
        b = open_brain(server.url(path))
        hits = _search(b)
        got = server.seen[-1]
        assert got["path"] == path and got["auth"] == f"Bearer {KEY}"
        assert got["body"]["query"] == QUERY and got["body"]["model"] == "bge-reranker"
        assert len(got["body"]["documents"]) == len(NOTES)  # candidates: min(30, the notes)
        # The expected order, from the same "model" applied by hand to the fused candidates.
        texts = {embed_text(h): h["zk_id"] for h in b.memory.search(
            QUERY, top_k=len(NOTES), rf=RecallFilter(project="p"))}
        expected = [texts[t] for t in sorted(texts, key=len, reverse=True)][:5]
        assert [h["zk_id"] for h in hits] == expected
        assert [h["rerank_score"] for h in hits] == sorted(
            (h["rerank_score"] for h in hits), reverse=True)
        assert [h["zk_id"] for h in hits] != _fused(b)[:5]  # the server did reorder
        status = b.stats()["rerank"]
        assert status["provider"] == "http" and status["failures"] == 0 and status["calls"] >= 1
    finally:
        server.close()


GARBAGE: dict[str, Answer] = {
    "not json": lambda body: (200, b"<html>oops</html>", 0.0),
    "HTTP 500": lambda body: (500, b'{"error": "boom"}', 0.0),
    "too few scores": lambda body: (200, json.dumps(
        {"results": [{"index": 0, "relevance_score": 1.0}]}).encode(), 0.0),
    "index out of range": lambda body: (200, json.dumps({"results": [
        {"index": i + 100, "relevance_score": 1.0} for i in range(len(body["documents"]))]}
    ).encode(), 0.0),
    "repeated index": lambda body: (200, json.dumps({"results": [
        {"index": 0, "relevance_score": 1.0} for _ in body["documents"]]}).encode(), 0.0),
    "score is text": lambda body: (200, json.dumps({"results": [
        {"index": i, "relevance_score": "high"} for i in range(len(body["documents"]))]}
    ).encode(), 0.0),
    "score is NaN": lambda body: (200, json.dumps({"results": [
        {"index": i, "relevance_score": float("nan")} for i in range(len(body["documents"]))]}
    ).encode(), 0.0),
    "a string": lambda body: (200, b'"fine"', 0.0),
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_keeps_the_fused_order_and_is_counted(
    open_brain: Any, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = RerankServer(GARBAGE[kind])
    try:
        b = open_brain(server.url())
        with caplog.at_level(logging.WARNING, logger="brain.search.rerank"):
            hits = _search(b)
            _search(b)  # the same reason again is counted, not logged again
        assert [h["zk_id"] for h in hits] == _fused(b)
        assert all("rerank_score" not in h for h in hits)
        status = b.stats()["rerank"]
        assert status["failures"] == 2 and status["last_error"], status
        warned = [r for r in caplog.records if "fused order is kept" in r.getMessage()]
        assert len(warned) == 1
        assert KEY not in caplog.text and KEY not in json.dumps(b.stats())
    finally:
        server.close()


def test_a_slow_server_costs_at_most_the_timeout(open_brain: Any) -> None:
    server = RerankServer(lambda body: (*jina(body)[:2], 2 * HANG_S))
    try:
        b = open_brain(server.url(), timeout_s=0.5)
        started = time.monotonic()
        hits = _search(b)
        took = time.monotonic() - started
        assert took < HANG_S, took  # cut at the 0.5 s limit, never the server's minute
        assert [h["zk_id"] for h in hits] == _fused(b)
        assert "within 0.5s" in b.stats()["rerank"]["last_error"]
    finally:
        server.close()


def test_an_unreachable_server_keeps_the_fused_order(open_brain: Any) -> None:
    server = RerankServer(jina)
    url = server.url()
    server.close()  # nothing listens there now
    b = open_brain(url)
    assert [h["zk_id"] for h in _search(b)] == _fused(b)
    status = b.stats()["rerank"]
    assert status["failures"] == 1 and KEY not in json.dumps(status)


def test_the_key_is_never_shown_and_a_url_without_http_is_refused() -> None:
    r = rerank.HttpReranker("http://user:pw@127.0.0.1:9/v1/rerank?key=abc", api_key=KEY)
    shown = json.dumps(r.status())
    assert KEY not in shown and "pw" not in shown and "abc" not in shown
    assert KEY not in json.dumps(RerankSettings(api_key=KEY).model_dump(mode="json"))
    with pytest.raises(ModelUnavailable, match="BRAIN__RERANK__URL"):
        rerank.load(RerankSettings(enabled=True, provider="http"))
    with pytest.raises(ModelUnavailable, match="not an http"):
        rerank.load(RerankSettings(enabled=True, provider="http", url="file:///etc/passwd"))


def test_every_search_is_reranked_by_the_one_policy(open_brain: Any, tmp_path: Any) -> None:
    """search_files and fs_search (semantic) go through the same reranker as the notes."""
    server = RerankServer(jina)
    try:
        b = open_brain(server.url())
        words = "the deploy reaches the database"
        docs = tmp_path / "docs"
        docs.mkdir()
        folder = tmp_path / "proj"
        folder.mkdir()
        for i in range(4):
            text = f"{words} step {i}. " + "More detail about it. " * (i * 3 + 1)
            (docs / f"d{i}.md").write_text(text)
            (folder / f"f{i}.md").write_text(text)
        for i in range(4):
            rec = b.files.ingest(str(docs / f"d{i}.md"), "p", "shared")
            assert b.files.wait(rec["id"], 60)["status"] == "ready"
        b.sources.add(str(folder), name="proj", project="p", sync=False)
        assert b.sources.sync("proj", wait=True, timeout=60)["status"] == "done"
        before = len(server.seen)
        passages = b.files.search(QUERY, 10, None, None)
        rows = b.sources.search(QUERY, "semantic", project="p", limit=10)["results"]
        assert len(server.seen) == before + 2  # one rerank request per search
        for hits in (passages, rows):
            assert len(hits) == 4 and all("rerank_score" in h for h in hits)
            assert [h["rerank_score"] for h in hits] == sorted(
                (h["rerank_score"] for h in hits), reverse=True)
        # the "model" scores by length: the longest file comes first
        assert rows[0]["path"] == "f3.md" and passages[0]["file"] == "d3.md"
        b.memory.reranker = None  # the same switch turns it off for every search
        assert all("rerank_score" not in h for h in b.files.search(QUERY, 10, None, None))
    finally:
        server.close()
