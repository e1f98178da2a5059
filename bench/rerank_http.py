"""The latency an HTTP reranker adds to search_memory, against a loopback rerank server.

The server (started here) scores every document at once by a trivial rule, so the figure is
the protocol's own cost: the request of ``rerank.candidates`` documents, the JSON both ways
and the reorder, not a model's inference (a real cross-encoder adds its own time on top).
Searches with and without the reranker are interleaved on one store (each pair in turn
order, the query embedded once beforehand), and the medians and their difference are
reported.

    python -m bench.rerank_http [--notes 2000] [--queries 200] [--candidates 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench import open_brain
from bench.synthetic import synthetic_notes, synthetic_queries
from brain.embedding.registry import REGISTRY, build_embedder
from brain.memory import RecallFilter


class _Scorer(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        raw = json.dumps({"results": [{"index": i, "relevance_score": float(len(d))}
                                      for i, d in enumerate(body["documents"])]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def run(notes: int, queries: int, candidates: int) -> dict[str, Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scorer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    embedder = build_embedder(REGISTRY["sentence-transformers/all-MiniLM-L6-v2"])
    texts = synthetic_notes(notes)
    asked = synthetic_queries(queries)
    with tempfile.TemporaryDirectory() as home:
        brain = open_brain(Path(home), embedder, rerank={
            "enabled": True, "provider": "http", "candidates": candidates,
            "url": f"http://127.0.0.1:{server.server_port}/v1/rerank"})
        try:
            http_reranker = brain.memory.reranker
            for text in texts:
                brain.memory.add(text, project="bench", autolink=False)
            rf = RecallFilter(project="bench")
            times: dict[str, list[float]] = {"fused": [], "http rerank": []}
            for i in range(queries):
                query = asked[i]
                qvec = embedder.embed_query(query).tolist()  # the same vector for both
                order = ("fused", "http rerank") if i % 2 else ("http rerank", "fused")
                for mode in order:
                    brain.memory.reranker = http_reranker if mode == "http rerank" else None
                    started = time.perf_counter()
                    brain.memory.search(query, top_k=10, rf=rf, query_vector=qvec)
                    times[mode].append((time.perf_counter() - started) * 1000)
            status = http_reranker.status() if http_reranker is not None else {}
        finally:
            brain.close()
            server.shutdown()
    p50 = {mode: round(statistics.median(ms), 2) for mode, ms in times.items()}
    return {"notes": notes, "queries": queries, "candidates": candidates, "p50_ms": p50,
            "added_p50_ms": round(p50["http rerank"] - p50["fused"], 2),
            "failures": status.get("failures")}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.rerank_http")
    p.add_argument("--notes", type=int, default=2000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--candidates", type=int, default=30)
    a = p.parse_args()
    print(json.dumps(run(a.notes, a.queries, a.candidates)))


if __name__ == "__main__":
    main()
