"""Server-side speed of the web explorer on a big store: ``python -m bench.ui [--notes N]``.

A fresh brain (Qdrant Edge, all-MiniLM-L6-v2, background workers running) gets ``--notes``
synthetic notes (bench/synthetic.py, 20 projects) through the product's bulk path
(brain.memory.bulk.bulk_add). Embedding 100,000 notes takes ~10 min on two cores, so the model embeds
``--distinct`` of them and every other note takes one of those vectors with a little noise
(sigma 0.02, normalised): the index holds 100k distinct vectors of the model's space, and the
text (what BM25 ranks) is each note's own. ``--sample`` notes each get five links to random
others through MemoryService.link (bulk imports skip auto-linking), so their note pages
have links in and out. The bench waits until the index worker has brought the store to
rest, then times the explorer's app (webui.site.create_app over the live Brain, logged in
through a one-time link) in process through httpx's ASGI transport, so the figures are the
server's: middleware, service calls in a worker thread under the caller identity,
templates. Timed: the search page (notes, files and documents; every project), the search
page for notes only, the note page, and the project graph JSON. BENCHMARKS.md, "Web explorer".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote_plus

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PROJECTS = 20
SEARCH_TARGET_MS, NOTE_TARGET_MS = 300.0, 150.0


def _vectors(embedder: Any, texts: list[str], distinct: int, seed: int = 0) -> Any:
    import numpy as np

    from brain.embedding.registry import embed_passages

    base = np.asarray(embed_passages(embedder, texts[:distinct], pool=True), dtype="float32")
    rng = np.random.default_rng(seed)

    def row(i: int) -> list[float]:
        if i < distinct:
            return base[i].tolist()
        v = base[i % distinct] + np.asarray(rng.normal(0.0, 0.02, base.shape[1]), "float32")
        return (v / np.linalg.norm(v)).tolist()

    return row


def _wait_at_rest(brain: Any, limit_s: float, log: Any) -> float:
    im = brain.index_maintenance
    runs0 = im.runs + (1 if im.running else 0)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        state = brain.store.index_state()
        if not im.running and ((state.unindexed is not None
                                and state.unindexed < im.config.min_unindexed)
                               or im.runs > runs0):
            break
        time.sleep(0.5)
    else:
        log(f"ui: the store did not come to rest within {limit_s:.0f} s")
    return round(time.perf_counter() - t0, 1)


async def _time(client: Any, urls: list[str], must: str) -> list[float]:
    out = []
    for url in urls:
        t = time.perf_counter()
        res = await client.get(url)
        out.append((time.perf_counter() - t) * 1000)
        assert res.status_code == 200 and must in res.text, (url, res.status_code,
                                                            res.text[:300])
    return out


async def measure(args: argparse.Namespace, log: Any) -> dict[str, Any]:
    import httpx

    from bench import open_brain, percentiles
    from bench.synthetic import synthetic_notes, synthetic_queries
    from brain.embedding.registry import REGISTRY, build_embedder
    from brain.memory.bulk import BulkNote, bulk_add
    from brain.trust.identity import Identity
    from webui.auth import Logins
    from webui.site import create_app

    embedder = build_embedder(REGISTRY["sentence-transformers/all-MiniLM-L6-v2"])
    embedder.embed_query("warm up")
    row: dict[str, Any] = {"notes": args.notes, "distinct_vectors": args.distinct}
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp:
        brain = open_brain(Path(tmp) / "home", embedder)
        try:
            texts = synthetic_notes(args.notes)
            t = time.perf_counter()
            vec = _vectors(embedder, texts, args.distinct)
            row["embed_s"] = round(time.perf_counter() - t, 1)
            t = time.perf_counter()
            kinds = ("general", "decision", "pattern", "research", "fix")
            ids = bulk_add(brain.memory, (
                BulkNote(x, project=f"proj-{i % PROJECTS}", note_kind=kinds[i % len(kinds)],
                         vector=vec(i)) for i, x in enumerate(texts)), batch=512).zk_ids
            row["bulk_import_s"] = round(time.perf_counter() - t, 1)
            log(f"ui: {args.notes:,} notes imported in {row['bulk_import_s']} s")
            rnd = random.Random(7)
            sample = rnd.sample(ids, args.sample)
            t = time.perf_counter()
            for zk in sample:
                for other in rnd.sample(ids, 5):
                    if other != zk:
                        brain.memory.link(zk, other, "related")
            row["link_s"] = round(time.perf_counter() - t, 1)
            row["index_wait_s"] = _wait_at_rest(brain, 420.0, log)
            row["index_at_rest"] = brain.stats().get("index")
            log(f"ui: at rest after {row['index_wait_s']} s")
            settings = brain.settings
            logins = Logins(settings.home, Identity(settings.identity.user_id,
                                                    settings.identity.agent_id))
            app = create_app(SimpleNamespace(brain=brain), logins)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                                         timeout=60) as c:
                res = await c.get(f"/login?token={logins.issue_link()}")
                assert res.status_code == 303
                qs = synthetic_queries(args.queries)
                await c.get("/search?q=warm+up")
                search = [f"/search?q={quote_plus(q)}" for q in qs]
                notes_only = [f"/search?q={quote_plus(q)}&scope=notes" for q in qs]
                pages = [f"/note/{zk}" for zk in sample]
                row["search_page_ms"] = percentiles(await _time(c, search, 'id="note-hits"'))
                row["search_notes_page_ms"] = percentiles(
                    await _time(c, notes_only, 'id="note-hits"'))
                # every timed note has links (made above): its page must list them
                row["note_page_ms"] = percentiles(await _time(c, pages, 'class="link-out"'))
                graph = [f"/api/graph?project=proj-{i % PROJECTS}" for i in range(10)]
                row["project_graph_json_ms"] = percentiles(await _time(c, graph, "nodes"))
            q_emb = []
            for q in qs:
                t = time.perf_counter()
                embedder.embed_query(q)
                q_emb.append((time.perf_counter() - t) * 1000)
            row["query_embedding_ms"] = percentiles(q_emb)
        finally:
            brain.close()
    row["targets"] = {"search_page_p50_ms": SEARCH_TARGET_MS, "note_page_p50_ms": NOTE_TARGET_MS}
    row["met"] = {"search": row["search_page_ms"]["p50"] < SEARCH_TARGET_MS,
                  "note": row["note_page_ms"]["p50"] < NOTE_TARGET_MS}
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ui", description=__doc__)
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument("--distinct", type=int, default=4096,
                        help="notes embedded by the model; the others reuse a noisy copy")
    parser.add_argument("--sample", type=int, default=200, help="note pages timed")
    parser.add_argument("--queries", type=int, default=100, help="search pages timed")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here too")
    args = parser.parse_args(argv)
    row = asyncio.run(measure(args, lambda m: print(m, flush=True)))
    text = json.dumps(row, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
