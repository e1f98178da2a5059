"""search_memory latency through a proxying stdio server vs the owner, side by side.

Two ``python mcp_server.py`` processes on one data dir, as two agent sessions launch them:
the first becomes the owner (it holds the store), the second forwards every call to it over
the owner's Unix socket. The same searches go to each, interleaved (the order alternates per
round so neither side always runs second), and the client-side wall time of each call is
recorded. The difference of the medians is what proxying costs.

    python -m bench.owner [--n 300] [--notes 300] [--model offline/hash-384] [--json]

The client speaks MCP's stdio transport directly (newline-delimited JSON-RPC), so the figures
are the servers' cost plus one pipe round trip, with no client library in between. The data
dir is a fresh temp dir unless ``--home`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = "2025-06-18"
WORDS = (
    "cache", "retry", "index", "schema", "deploy", "socket", "token", "parser", "queue",
    "latency", "migration", "watcher", "logging", "timeout", "vector", "graph", "lock",
    "owner", "proxy", "thread", "embedding", "search", "filter", "payload",
)  # fmt: skip


class StdioPeer:
    """One MCP server process over stdio, one request at a time (any line on stdout that is
    not a JSON-RPC reply to the request is skipped)."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str) -> None:
        self.proc = proc
        self.name = name
        self._id = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        rid = self._id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        await self.proc.stdin.drain()
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name} server exited (rc={self.proc.returncode})")
            try:
                reply = json.loads(line)
            except ValueError:
                continue  # a server that prints to stdout (bench/peer.py's peer at start)
            if not isinstance(reply, dict) or reply.get("id") != rid:
                continue  # a notification (log, progress)
            if "error" in reply:
                raise RuntimeError(f"{self.name}: {method} failed: {reply['error']}")
            return dict(reply["result"])

    async def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        await self.proc.stdin.drain()

    async def call_tool(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        res = await self.request("tools/call", {"name": name, "arguments": args})
        if res.get("isError") or res.get("is_error"):
            raise RuntimeError(f"{self.name}: {name} failed: {res.get('content')}")
        return res.get("structuredContent") or res.get("structured_content") or {}


@contextlib.asynccontextmanager
async def _server(home: Path, model: str, name: str) -> AsyncIterator[StdioPeer]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN__")}
    env.update(
        BRAIN__HOME=str(home),
        BRAIN__EMBEDDING__MODEL=model,
        BRAIN__IDENTITY__AGENT_ID=f"bench-{name}",
        BRAIN__WORKERS__ENRICHMENT__ENABLED="false",
        BRAIN__LOG__LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    env.setdefault("HF_HUB_OFFLINE", "1")
    with open(home / f"bench-{name}.err", "ab") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "mcp_server.py"),
            env=env,
            cwd=str(ROOT),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            limit=16 * 1024 * 1024,
        )
    peer = StdioPeer(proc, name)
    try:
        await peer.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "owner-bench", "version": "1"},
            },
        )
        await peer.notify("notifications/initialized")
        yield peer
    finally:
        await stop_child(proc, 20)


async def stop_child(proc: asyncio.subprocess.Process, timeout: float) -> None:
    """End a stdio server the way a client does: close its stdin, wait ``timeout`` s for it to
    exit, then kill it."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(ms), 3),
        "p95_ms": round(_pct(ms, 0.95), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "min_ms": round(min(ms), 3),
    }


async def _timed(peer: StdioPeer, args: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    await peer.call_tool("search_memory", args)
    return (time.perf_counter() - t0) * 1000


async def run(home: Path, n: int, notes: int, model: str, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    home.mkdir(parents=True, exist_ok=True)
    async with _server(home, model, "owner") as owner:
        info = json.loads((home / "owner.json").read_text())
        async with _server(home, model, "proxy") as proxy:
            for i in range(notes):
                text = " ".join(rng.sample(WORDS, 5))
                await owner.call_tool(
                    "add_memory", {"content": f"{text} (note {i})", "project": "bench"}
                )
            queries = [
                {"query": " ".join(rng.sample(WORDS, 2)), "project": "bench", "top_k": 5}
                for _ in range(n)
            ]
            for q in queries[:20]:  # warm both (the proxy opens its link on first use)
                await owner.call_tool("search_memory", q)
                await proxy.call_tool("search_memory", q)
            direct: list[float] = []
            proxied: list[float] = []
            for i, q in enumerate(queries):
                if i % 2:
                    direct.append(await _timed(owner, q))
                    proxied.append(await _timed(proxy, q))
                else:
                    proxied.append(await _timed(proxy, q))
                    direct.append(await _timed(owner, q))
    d, p = _summary(direct), _summary(proxied)
    return {
        "calls_each": n,
        "notes": notes,
        "model": model,
        "owner_pid": info.get("pid"),
        "owner_direct": d,
        "through_proxy": p,
        "proxy_adds_p50_ms": round(p["p50_ms"] - d["p50_ms"], 3),
        "proxy_adds_p95_ms": round(p["p95_ms"] - d["p95_ms"], 3),
        "load_avg": list(os.getloadavg()),
        "cpus": os.cpu_count(),
    }


def _print(r: dict[str, Any]) -> None:
    print(f"search_memory, {r['calls_each']} calls each, {r['notes']} notes, {r['model']}")
    print(f"{'':16}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
    for label, key in (("owner direct", "owner_direct"), ("through proxy", "through_proxy")):
        s = r[key]
        print(f"{label:16}{s['p50_ms']:>10.2f}{s['p95_ms']:>10.2f}{s['mean_ms']:>10.2f}")
    print(f"proxy adds: p50 {r['proxy_adds_p50_ms']:+.2f} ms, p95 {r['proxy_adds_p95_ms']:+.2f} ms")
    load = ", ".join(f"{x:.1f}" for x in r["load_avg"])
    print(f"(load average {load} on {r['cpus']} cpus)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.owner", description=__doc__)
    ap.add_argument("--n", type=int, default=300, help="search_memory calls per server")
    ap.add_argument("--notes", type=int, default=300, help="notes stored before timing")
    ap.add_argument("--model", default="offline/hash-384", help="embedding model id")
    ap.add_argument("--home", type=Path, default=None, help="data dir (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    with contextlib.ExitStack() as stack:
        home = args.home or Path(stack.enter_context(tempfile.TemporaryDirectory())) / "home"
        result = asyncio.run(run(home, args.n, args.notes, args.model))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
