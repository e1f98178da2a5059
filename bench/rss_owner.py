"""Where a server's resident memory goes, by owner, on a store of N synthetic notes::

    python -m bench.rss_owner --scales 10000,100000 [--json OUT] [--stores DIR]

For each scale a store of N synthetic notes (bench/synthetic.py) is built once, as the speed
bench builds one (``bulk_add`` on a Brain with default settings, with the cached vectors of
bench/vector_cache.py when the cache holds N, or those it holds cycled with noise when it holds
at least ``CYCLE_FROM``; then the index worker's runs until the store is at rest), and kept under ``--stores`` (default ~/.cache/opencode-brain/bench/rss-store-N).
Each measurement then runs on a fresh copy of it, in fresh processes:

- ``owners``: one process that loads each owner in turn and reads its RSS (VmRSS, RssAnon,
  RssFile from /proc/self/status) after each: the interpreter; the server's imports
  (``import mcp_server``: what a ``python mcp_server.py`` imports before it opens anything,
  with the heavy modules that came in); the embedding model (the default backend, loaded
  and warmed by one query); the Edge shard's open with its payload indexes (measured inside
  ``Brain.open`` by wrapping ``EdgeStore.open``), the link graph (``LinkGraph.load``), the
  rest of ``Brain.open`` (services, threads, the meta); then 100 search_memory calls and 20
  add_memory calls through the in-process MCP client (fastmcp over ``create_server``), the
  process at rest, and then after 256 notes embedded in batches of 64 (an import's, a sync's
  or an upload's write path). The file-backed part of each step is split by mapping (vectors,
  HNSW links, payloads, WAL, ...) from /proc/self/smaps. At the end: the Python heap
  (pymalloc's allocated bytes, the object count) and what glibc's ``malloc_trim(0)`` gives
  back (free heap the allocator held).
- ``shard``: three short processes that load the raw Edge shard (``EdgeShard.load``, no
  product code) after the imports: on the store as built, on a copy with every payload index
  dropped (the difference is what the payload indexes hold), and on a copy with them
  recreated with Qdrant's ``on_disk`` index parameter (not the product's configuration).
- ``stdio``: the server users run, ``python mcp_server.py`` over stdio with default settings
  on the store (``BRAIN__HOME``), given 100 search_memory and 20 add_memory calls by a
  JSON-RPC client, then its RSS at rest read from /proc/PID (and whether it mapped torch).

Every figure is MB (2^20 bytes). Synthetic notes are bulk-added, which links none, so the
link graph of these stores is empty; a real brain's graph is measured by ``brain_stats``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import copy_store

ROOT = Path(__file__).resolve().parents[1]
SEARCHES = 100
ADDS = 20
BATCH_NOTES = 256
CYCLE_FROM = 20_000  # cached vectors a store of more notes may reuse (see _vectors)
PROJECTS = 20
BUILD_VERSION = 1  # bump when the store a scale builds changes
HEAVY = ("torch", "sentence_transformers", "transformers", "onnxruntime", "tokenizers",
         "qdrant_client", "qdrant_edge", "networkx", "numpy", "scipy", "sklearn", "pandas",
         "huggingface_hub", "safetensors", "git", "webui", "httpx", "uvicorn", "starlette",
         "fastmcp", "mcp", "pydantic", "rich", "openai", "watchdog", "grpc")


# --------------------------------------------------------------------------- reading /proc
def status(pid: int | str = "self") -> dict[str, float]:
    """VmRSS, RssAnon, RssFile, RssShmem, VmHWM of a process, MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
            out[key] = round(int(rest.split()[0]) / 1024, 1)
    return out


def rollup(pid: int | str = "self") -> dict[str, float]:
    """/proc/PID/smaps_rollup's Rss, Pss, Anonymous, Private_Dirty, MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text(encoding="ascii").splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss", "Anonymous", "Private_Dirty", "Shared_Clean"):
            out[key] = round(int(rest.split()[0]) / 1024, 1)
    return out


# The store's files by what they hold (Qdrant's segment layout; the first match wins).
_STORE_PARTS = (
    ("wal", re.compile(r"/wal/")),
    ("hnsw links", re.compile(r"/vector_index[^/]*/|links|graph\.bin|hnsw")),
    ("quantized vectors", re.compile(r"quantiz")),
    ("dense vectors", re.compile(r"/vector_storage[^/]*/.*(matrix|chunk|vectors)|matrix\.dat")),
    ("sparse vectors", re.compile(r"sparse|inverted")),
    ("payload indexes", re.compile(r"/payload_index/|field_index|\.idx$")),
    ("payloads", re.compile(r"/payload_storage/|payload")),
    ("id tracker", re.compile(r"id_tracker|mutable_id|id_mapper|version")),
)


def _kind_of(name: str, store: str | None) -> str:
    if name.startswith("["):
        return "anon" if name in ("[heap]", "[anon]") else "other"
    if store and name.startswith(store):
        rel = name[len(store):]
        for part, pat in _STORE_PARTS:
            if pat.search(rel):
                return f"store: {part}"
        return "store: other"
    if ".so" in name or "/lib" in name:
        for pkg in ("onnxruntime", "qdrant_edge", "torch", "tokenizers", "numpy", "pydantic_core",
                    "libpython", "libc.", "libstdc++"):
            if pkg in name:
                return f"lib: {pkg.rstrip('.')}"
        return "lib: other"
    if name.endswith(".onnx"):
        return "onnx model file"
    return "file: other"


def smaps_by_kind(pid: int | str = "self", store: Path | None = None) -> dict[str, float]:
    """Resident MB of the process's mappings grouped by what they map (anon = heap and
    anonymous mappings; store files by part; shared libraries by package)."""
    by: dict[str, int] = {}
    name = "[anon]"
    root = str(store) if store else None
    for line in Path(f"/proc/{pid}/smaps").read_text(encoding="utf-8").splitlines():
        head = line.split(None, 5)
        if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
            name = head[5].strip() if len(head) == 6 else "[anon]"
        elif line.startswith("Rss:"):
            kb = int(line.split()[1])
            if kb:
                kind = _kind_of(name, root)
                by[kind] = by.get(kind, 0) + kb
    return {k: round(v / 1024, 1) for k, v in sorted(by.items(), key=lambda kv: -kv[1])}


def maps_libs(pid: int | str) -> list[str]:
    """Which of the heavy native libraries a process has mapped (torch, onnxruntime, ...)."""
    text = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8")
    names = ("libtorch", "onnxruntime", "qdrant_edge", "tokenizers", "libgomp")
    return [n for n in names if n in text]


def pymalloc_bytes() -> int | None:
    """Bytes in pymalloc's allocated blocks (sys._debugmallocstats, written to stderr)."""
    fn = getattr(sys, "_debugmallocstats", None)
    if fn is None:
        return None
    with tempfile.TemporaryFile(mode="w+") as tmp:
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read()
    m = re.search(r"# bytes in allocated blocks\s*=\s*([\d,]+)", text)
    return int(m.group(1).replace(",", "")) if m else None


def malloc_trim() -> bool:
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except OSError:
        return False


# --------------------------------------------------------------------------- the steps
class Steps:
    """RSS after each step of one process, with the file-backed part split by mapping."""

    def __init__(self, store: Path | None) -> None:
        self.store = store
        self.rows: list[dict[str, Any]] = []

    def mark(self, step: str, **extra: Any) -> None:
        row: dict[str, Any] = {"step": step, **status(), "files": smaps_by_kind(store=self.store)}
        row.update(extra)
        self.rows.append(row)


def heavy_modules() -> list[str]:
    return [m for m in HEAVY if m in sys.modules]


def _settings(home: Path) -> Any:
    from config import load_settings

    return load_settings(home=home)


def owners(home: Path) -> dict[str, Any]:
    """The owners in turn, in this (fresh) process."""
    steps = Steps(None)
    steps.mark("interpreter")
    t = time.perf_counter()
    import mcp_server  # what the server imports at start

    steps.mark("imports (import mcp_server)", s=round(time.perf_counter() - t, 2),
               heavy=heavy_modules(), modules=len(sys.modules))
    from bench import call, mcp_client
    from bench.synthetic import synthetic_notes, synthetic_queries
    from brain.app import Brain
    from brain.embedding.registry import build_embedder, resolve_record
    from brain.memory.graph import LinkGraph
    from brain.vector_store.edge import EdgeStore

    settings = _settings(home)
    e = settings.embedding
    emb = build_embedder(resolve_record(e.model, e.dimension), e.batch_size, e.backend)
    emb.embed_query("warm up")
    steps.mark(f"embedding model ({e.backend}, one query)", heavy=heavy_modules())
    qs = synthetic_queries(SEARCHES)
    lat = []
    for q in qs:
        t = time.perf_counter()
        emb.embed_query(q)
        lat.append((time.perf_counter() - t) * 1000)
    steps.mark(f"{SEARCHES} query embeddings", query_embedding_p50_ms=round(
        sorted(lat)[len(lat) // 2], 2))

    store_dir: list[Path] = []
    edge_open, graph_load = EdgeStore.open, LinkGraph.load

    def timed_open(self: EdgeStore, dimension: int) -> None:
        edge_open(self, dimension)
        store_dir.append(self.path)
        steps.store = self.path
        steps.mark("Edge shard open (with its payload indexes)")

    graph_init = LinkGraph.__init__

    def timed_init(self: LinkGraph, path: Path) -> None:
        steps.mark("store checks (counts, sample, meta)")
        graph_init(self, path)

    def timed_load(self: LinkGraph, expected_seq: int) -> bool:
        ok = graph_load(self, expected_seq)
        steps.mark("link graph", nodes=len(self.notes))
        return ok

    EdgeStore.open = timed_open  # type: ignore[method-assign]
    LinkGraph.load = timed_load  # type: ignore[method-assign]
    LinkGraph.__init__ = timed_init  # type: ignore[method-assign]
    try:
        brain = Brain(settings, embedder=emb).open()
    finally:
        EdgeStore.open, LinkGraph.load = edge_open, graph_load  # type: ignore[method-assign]
        LinkGraph.__init__ = graph_init  # type: ignore[method-assign]
    time.sleep(1.0)  # the warm-up thread (the model is warm already) and the workers' start
    steps.mark("rest of Brain.open (services, threads)",
               points=brain.store.info().points, index=brain.store.index_state().as_dict())
    try:
        async def serve() -> None:
            async with mcp_client(brain, profile=settings.mcp.tools) as client:
                for i, q in enumerate(qs):
                    args: dict[str, Any] = {"query": q, "top_k": 10}
                    if i % 2:
                        args["all_projects"] = True
                    else:
                        args["project"] = f"proj-{i % PROJECTS}"
                    await call(client, "search_memory", args)
                steps.mark(f"{SEARCHES} search_memory (in-process MCP client)")
                for x in synthetic_notes(ADDS, seed=97):
                    await call(client, "add_memory", {"content": f"{x} Added.",
                                                      "project": "proj-0"})
                steps.mark(f"{ADDS} add_memory")
                await asyncio.sleep(2.0)
                gc.collect()
                steps.mark("at rest (in-process server)", python_heap_mb=round(
                    (pymalloc_bytes() or 0) / 2**20, 1), objects=len(gc.get_objects()),
                    heavy=heavy_modules())

        asyncio.run(serve())
        from brain.embedding.registry import embed_passages

        texts = synthetic_notes(BATCH_NOTES, seed=96)
        for lo in range(0, BATCH_NOTES, 64):
            embed_passages(brain.embedder, texts[lo:lo + 64])
        time.sleep(3.0)  # at rest again (the embedder trims the heap 2 s after a batch)
        gc.collect()
        steps.mark(f"{BATCH_NOTES} notes embedded in batches of 64 (an import's write path)")
        trimmed = malloc_trim()
        steps.mark("after malloc_trim(0)", trimmed=trimmed)
    finally:
        brain.close()
    del mcp_server
    return {"steps": steps.rows}


def raw_shard(shard: Path) -> dict[str, Any]:
    """The Edge shard alone: ``EdgeShard.load`` after the server's imports, then a count."""
    import qdrant_edge as qe

    import mcp_server  # noqa: F401 - the same imports as the owners' process

    steps = Steps(shard)
    steps.mark("imports")
    s = qe.EdgeShard.load(str(shard))
    steps.mark("EdgeShard.load", indexes=len(s.info().payload_schema))
    s.close()
    return {"steps": steps.rows}


def drop_indexes(shard: Path, on_disk: bool = False) -> int:
    """Delete every payload index of the shard at ``shard`` (a copy), and with ``on_disk``
    create each again with Qdrant's ``on_disk`` index parameter; returns how many."""
    import qdrant_edge as qe

    from brain.vector_store.edge_convert import schema_name

    params: dict[str, Callable[[], Any]] = {"keyword:tenant": lambda: qe.KeywordIndexParams(is_tenant=True, on_disk=True),
              "keyword": lambda: qe.KeywordIndexParams(on_disk=True),
              "float": lambda: qe.FloatIndexParams(on_disk=True),
              "bool": lambda: qe.BoolIndexParams(on_disk=True)}
    s = qe.EdgeShard.load(str(shard))
    try:
        schema = s.info().payload_schema
        for name, info in schema.items():
            s.update(qe.UpdateOperation.delete_field_index(name))
            if on_disk:
                s.update(qe.UpdateOperation.create_field_index(
                    name, params[schema_name(info)]()))
        s.flush()
    finally:
        s.close()
    return len(schema)


# --------------------------------------------------------------------------- stdio server
async def stdio_server(home: Path) -> dict[str, Any]:
    """``python mcp_server.py`` on ``home`` with default settings: 100 searches, 20 adds, its
    RSS at rest from /proc/PID."""
    from bench.owner import PROTOCOL, StdioPeer, stop_child
    from bench.synthetic import synthetic_notes, synthetic_queries

    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN__")}
    env.update(BRAIN__HOME=str(home), PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    t0 = time.perf_counter()
    with open(home / "rss-bench.err", "ab") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(ROOT / "mcp_server.py"), env=env, cwd=str(ROOT),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
            limit=16 * 1024 * 1024)
    peer = StdioPeer(proc, "server")
    out: dict[str, Any] = {"pid": proc.pid}
    try:
        await peer.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                          "clientInfo": {"name": "rss-bench", "version": "1"}})
        await peer.notify("notifications/initialized")
        out["started"] = status(proc.pid)
        await peer.call_tool("search_memory", {"query": "warm up", "top_k": 10})
        out["first_search_s"] = round(time.perf_counter() - t0, 2)
        out["after_first_search"] = status(proc.pid)
        lat: list[float] = []
        for i, q in enumerate(synthetic_queries(SEARCHES)):
            args: dict[str, Any] = {"query": q, "top_k": 10}
            if i % 2:
                args["all_projects"] = True
            else:
                args["project"] = f"proj-{i % PROJECTS}"
            t = time.perf_counter()
            await peer.call_tool("search_memory", args)
            lat.append((time.perf_counter() - t) * 1000)
        add_lat: list[float] = []
        for x in synthetic_notes(ADDS, seed=97):
            t = time.perf_counter()
            await peer.call_tool("add_memory", {"content": f"{x} Added.", "project": "proj-0"})
            add_lat.append((time.perf_counter() - t) * 1000)
        await asyncio.sleep(3.0)
        out["search_p50_ms"] = round(sorted(lat)[len(lat) // 2], 2)
        out["add_p50_ms"] = round(sorted(add_lat)[len(add_lat) // 2], 2)
        out["at_rest"] = status(proc.pid)
        out["rollup"] = rollup(proc.pid)
        out["files"] = smaps_by_kind(proc.pid, next((home / "store").glob("*"), None))
        out["libs_mapped"] = maps_libs(proc.pid)
        out["threads"] = len(os.listdir(f"/proc/{proc.pid}/task"))
    finally:
        await stop_child(proc, 30)
    return out


# --------------------------------------------------------------------------- the store
def default_stores() -> Path:
    return Path.home() / ".cache" / "opencode-brain" / "bench"


def build_store(home: Path, n: int) -> dict[str, Any]:
    """N synthetic notes into a fresh Brain at ``home`` (default settings), then the index
    worker's runs until the store is at rest."""
    from bench.synthetic import synthetic_notes
    from bench.vector_cache import VectorCache
    from brain.app import Brain
    from brain.memory.bulk import BulkNote, bulk_add

    brain = Brain(_settings(home)).open()
    try:
        cache = VectorCache.for_embedder(brain.embedder.inner)  # type: ignore[attr-defined]
        vectors, source = _vectors(cache, n)
        t = time.perf_counter()
        bulk_add(brain.memory, (BulkNote(x, project=f"proj-{i % PROJECTS}",
                                         vector=next(vectors, None))
                                for i, x in enumerate(synthetic_notes(n))), batch=512)
        imported = round(time.perf_counter() - t, 1)
        runs = 0
        while True:
            res = brain.index_maintenance.tick()
            if res.get("ran"):
                runs += 1
            elif not brain.index_maintenance.running:
                break
            else:
                time.sleep(1.0)
        return {"notes": n, "vectors": "cycled" if "cycled" in source else source,
                "vectors_detail": source, "import_s": imported,
                "index_runs": runs, "index": brain.store.index_state().as_dict(),
                "version": BUILD_VERSION}
    finally:
        brain.close()


def _vectors(cache: Any, n: int) -> tuple[Iterator[Any], str]:
    """The notes' vectors: the cached ones when the cache holds ``n``; else, when it holds at
    least ``CYCLE_FROM``, those it holds again, each with a little noise (resident sizes do
    not depend on the values; recall on such a store means nothing); else none (embedded)."""
    import numpy as np

    if cache.done >= n:
        return (v for c in cache.rows(n) for v in c), "cache"
    if cache.done < CYCLE_FROM:
        return iter(()), "embedded"
    held = cache.done
    base = np.concatenate(list(cache.rows(held)))
    rng = np.random.default_rng(0)

    def cycled() -> Iterator[Any]:
        for i in range(n):
            v = base[i % held] + np.asarray(rng.normal(0.0, 0.02, base.shape[1]), np.float32)
            yield v / np.linalg.norm(v)

    return cycled(), f"the cache's first {held:,} vectors cycled, with noise"


def store_for(stores: Path, n: int, log: Callable[[str], None]) -> Path:
    """The built store of ``n`` notes under ``stores`` (built now, in a child, if missing)."""
    home = stores / f"rss-store-{n}"
    record = home / "rss-built.json"
    with contextlib.suppress(OSError, ValueError, KeyError):
        built = json.loads(record.read_text())
        if built["version"] == BUILD_VERSION and (built["vectors"] != "cycled" or not full(n)):
            return home
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    log(f"rss {n:,}: building the store at {home} (once)")
    built = _child(["--build", str(n), str(home)])
    record.write_text(json.dumps(built), encoding="utf-8")
    log(f"rss {n:,}: built {built}")
    return home


def full(n: int) -> bool:
    """Whether the vector cache holds ``n`` vectors of the default embedder."""
    from bench.vector_cache import VectorCache
    from brain.embedding.registry import build_embedder, resolve_record

    e = _settings(Path(tempfile.gettempdir())).embedding
    emb = build_embedder(resolve_record(e.model, e.dimension), e.batch_size, e.backend)
    return VectorCache.for_embedder(emb).done >= n


def _child(args: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}
        env = {k: v for k, v in env.items() if not k.startswith("BRAIN__")}
        proc = subprocess.run([sys.executable, "-m", "bench.rss_owner", *args, "--out", str(out)],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not out.is_file():
            tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
            raise RuntimeError(f"bench.rss_owner {' '.join(args)} exited {proc.returncode}:\n"
                               f"{tail}")
        data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return data


def measure(stores: Path, n: int, log: Callable[[str], None],
            parts: tuple[str, ...], home: Path | None = None) -> dict[str, Any]:
    """``home``: a data dir built elsewhere (a speed run's ``speed-1000000``) measured as it
    is, instead of a store built here."""
    built = home or store_for(stores, n, log)
    record = built / "rss-built.json"
    row: dict[str, Any] = {"notes": n, "store": json.loads(record.read_text())
                           if record.is_file() else {"from": str(built)}}
    with tempfile.TemporaryDirectory(prefix="rss-owner-") as tmp:
        if "owners" in parts:
            home = copy_store(built, Path(tmp) / "owners")
            row["owners"] = _child(["--owners", str(home)])
            log(f"rss {n:,}: owners done")
        if "shard" in parts:
            shard = next((built / "store").glob("*"))
            with_ix = copy_store(shard, Path(tmp) / "shard-with")
            without = copy_store(shard, Path(tmp) / "shard-without")
            on_disk = copy_store(shard, Path(tmp) / "shard-on-disk")
            row["indexes_dropped"] = drop_indexes(without)
            drop_indexes(on_disk, on_disk=True)
            row["shard_with_indexes"] = _child(["--shard", str(with_ix)])
            row["shard_without_indexes"] = _child(["--shard", str(without)])
            row["shard_indexes_on_disk"] = _child(["--shard", str(on_disk)])
            log(f"rss {n:,}: raw shard done")
        if "stdio" in parts:
            home = copy_store(built, Path(tmp) / "stdio")
            row["stdio"] = asyncio.run(stdio_server(home))
            log(f"rss {n:,}: stdio server at rest {row['stdio']['at_rest']}")
    return row


# --------------------------------------------------------------------------- the table
def _delta(rows: list[dict[str, Any]], i: int, key: str) -> float:
    return round(rows[i][key] - (rows[i - 1][key] if i else 0.0), 1)


def table(result: dict[str, Any]) -> str:
    """The owners as a markdown table per scale: each step's added RSS, anon and file."""
    buf = io.StringIO()
    for row in result["scales"]:
        n = row["notes"]
        buf.write(f"\n#### {n:,} notes\n\n| owner (step) | +RSS MB | +anon MB | +file MB | "
                  "RSS after MB |\n|---|---|---|---|---|\n")
        steps = row.get("owners", {}).get("steps", [])
        for i, st in enumerate(steps):
            buf.write(f"| {st['step']} | {_delta(steps, i, 'VmRSS')} | "
                      f"{_delta(steps, i, 'RssAnon')} | {_delta(steps, i, 'RssFile')} | "
                      f"{st['VmRSS']} |\n")
        w, wo = row.get("shard_with_indexes"), row.get("shard_without_indexes")
        if w and wo:
            sw, so = w["steps"], wo["steps"]
            a = _delta(sw, 1, "RssAnon")
            b = _delta(so, 1, "RssAnon")
            buf.write(f"| raw EdgeShard.load, with its payload indexes | {_delta(sw, 1, 'VmRSS')} "
                      f"| {a} | {_delta(sw, 1, 'RssFile')} | |\n")
            buf.write(f"| raw EdgeShard.load, {row['indexes_dropped']} payload indexes dropped | "
                      f"{_delta(so, 1, 'VmRSS')} | {b} | {_delta(so, 1, 'RssFile')} | |\n")
            buf.write(f"| so the payload indexes | {round(_delta(sw, 1, 'VmRSS') - _delta(so, 1, 'VmRSS'), 1)} | {round(a - b, 1)} | "
                      f"{round(_delta(sw, 1, 'RssFile') - _delta(so, 1, 'RssFile'), 1)} | |\n")
            od = row.get("shard_indexes_on_disk")
            if od:
                sd = od["steps"]
                buf.write(f"| (not the product's) raw EdgeShard.load, the same indexes `on_disk` | "
                          f"{_delta(sd, 1, 'VmRSS')} | {_delta(sd, 1, 'RssAnon')} | "
                          f"{_delta(sd, 1, 'RssFile')} | |\n")
        sv = row.get("stdio")
        if sv:
            r = sv["at_rest"]
            buf.write(f"| **`python mcp_server.py` at rest, {SEARCHES} searches + {ADDS} adds** | "
                      f"**{r['VmRSS']}** | {r['RssAnon']} (total) | {r['RssFile']} (total) | |\n")
        rest = [st for st in steps if st["step"].startswith("at rest")]
        if rest:
            buf.write(f"\nBy mapping at rest (in-process): {rest[0]['files']}\n")
        if sv:
            buf.write(f"\nstdio server: files {sv['files']}; libs {sv['libs_mapped']}; "
                      f"threads {sv['threads']}; search p50 {sv['search_p50_ms']} ms, add p50 "
                      f"{sv['add_p50_ms']} ms; peak {sv['at_rest'].get('VmHWM')} MB\n")
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.rss_owner", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scales", default="10000,100000")
    p.add_argument("--parts", default="owners,shard,stdio")
    p.add_argument("--stores", type=Path, default=None, help="where built stores are kept")
    p.add_argument("--home", type=Path, default=None,
                   help="measure this data dir (one scale: its note count) instead of building")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    # Internal: the child processes.
    p.add_argument("--owners", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--shard", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--build", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.owners or args.shard or args.build:
        if args.owners:
            data = owners(args.owners)
        elif args.shard:
            data = raw_shard(args.shard)
        else:
            data = build_store(Path(args.build[1]), int(args.build[0]))
        args.out.write_text(json.dumps(data, indent=1), encoding="utf-8")
        return 0

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    parts = tuple(args.parts.split(","))
    stores = args.stores or default_stores()
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "python": sys.version.split()[0], "scales": []}
    for n in (int(x) for x in args.scales.split(",")):
        result["scales"].append(measure(stores, n, log, parts, args.home))
        if args.json:
            args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    result["load_average"] = list(os.getloadavg())
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
