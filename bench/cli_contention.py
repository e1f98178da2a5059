"""A sync started from the CLI while an agent works: ``python -m bench.cli_contention
[--files N] [--window S]`` (or ``python -m bench --only cli_contention``).

Issue 51, item 2, through every real door: a stdio server (``python mcp_server.py``, its own
process, the bundled model, a temp data dir) owns the brain; an MCP client over stdio (the
agent) alternates search_memory and add_memory with ``THINK_S`` between calls, idle, then
while a second shell runs ``brain source add`` and ``brain sync NAME`` (the real CLI, in
subprocesses, through the owner's call channel: the sync is a job in the owner's queue, the
command follows it). p50 / p95 / p99 of each tool side by side in one run, every failed call
counted (the target: none, and search_memory p99 within 3x of idle). A sync still running at
the end of ``--window`` is cancelled (``brain source cancel``) and the row says how far it got.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import emit_json, percentiles
from bench.ingest_contention import TARGET_RATIO, THINK_S, WORDS, make_source, paragraph

ROOT = Path(__file__).resolve().parents[1]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "BRAIN__HOME": str(home), "HF_HUB_OFFLINE": "1",
            "BRAIN__SOURCES__WORKSPACE": "off", "PYTHONPATH": str(ROOT)}


def _cli(env: dict[str, str], *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "brain.cli", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)


async def _calls(client: Any, running: Any, limit_s: float, min_calls: int,
                 rng: random.Random) -> tuple[dict[str, list[float]], list[str]]:
    """search_memory and add_memory in turn while ``running()`` (at least ``min_calls``
    each, within ``limit_s``); the latencies, and every call that failed."""
    out: dict[str, list[float]] = {"search_memory": [], "add_memory": []}
    failed: list[str] = []
    end = time.perf_counter() + limit_s
    i = 0
    while time.perf_counter() < end and (running() or min(map(len, out.values())) < min_calls):
        q = " ".join(rng.choice(WORDS) for _ in range(4))
        tool, args = (("search_memory", {"query": q, "top_k": 5, "project": "bench"})
                      if i % 2 == 0 else
                      ("add_memory", {"content": f"observation {i}: {q}", "project": "bench"}))
        t = time.perf_counter()
        try:
            res = await client.call_tool(tool, args, raise_on_error=False)
            if res.is_error:
                failed.append(f"{tool}: {str(res.content)[:200]}")
        except Exception as exc:  # noqa: BLE001 - a failed call is what this counts
            failed.append(f"{tool}: {type(exc).__name__}: {exc}"[:200])
        out[tool].append((time.perf_counter() - t) * 1000)
        i += 1
        await asyncio.sleep(THINK_S)
    return out, failed


def _last_job(res: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The status and progress of the sync job ``brain source jobs`` lists last."""
    try:
        data = json.loads(res.stdout)
    except ValueError:
        return {"error": (res.stderr or res.stdout).strip()[-300:]}
    jobs = data.get("jobs", data) if isinstance(data, dict) else data
    if isinstance(jobs, list) and jobs:
        job = jobs[0]
        return {"status": job.get("status"), "progress": job.get("progress")}
    return {"raw": str(data)[:300]}


def _row(samples: dict[str, list[float]], idle: dict[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for tool, xs in samples.items():
        p = percentiles(xs)
        if idle is not None and idle[tool]["p99"]:
            p["p99_vs_idle"] = round(p["p99"] / idle[tool]["p99"], 2)
        row[tool] = p
    return row


async def _measure(tmp: Path, files: int, window_s: float, idle_calls: int,
                   log: Any) -> dict[str, Any]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    home, work = tmp / "data", tmp / "work"
    work.mkdir(parents=True)
    env = _env(home)
    rng = random.Random(3)
    server = StdioTransport(command=sys.executable, args=[str(ROOT / "mcp_server.py")],
                            env=env, cwd=str(work))
    result: dict[str, Any] = {}
    async with Client(server, timeout=120) as client:
        for i in range(40):  # notes to search, and a warm model
            await client.call_tool("add_memory", {"content": f"seed note {i}: "
                                                  + paragraph(rng, 30), "project": "bench"})
        samples, failed = await _calls(client, lambda: False, 120.0, idle_calls, rng)
        idle = _row(samples, None)
        result["idle"] = {**idle, "failed": len(failed)}
        log(f"cli_contention idle: {json.dumps(result['idle'])}")

        src = make_source(work / "src", files)
        added = await asyncio.to_thread(_cli, env, "source", "add", str(src), "--name", "many",
                                        "--project", "bench", cwd=work)
        if added.returncode != 0:
            raise RuntimeError(f"brain source add failed: {added.stderr[-2000:]}")
        t0 = time.perf_counter()
        sync = subprocess.Popen([sys.executable, "-m", "brain.cli", "sync", "many", "--quiet"],
                                env=env, cwd=work, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        samples, failed = await _calls(client, lambda: sync.poll() is None, window_s, 0, rng)
        cancelled = sync.poll() is None
        if cancelled:
            await asyncio.to_thread(_cli, env, "source", "cancel", "many", cwd=work)
        out, err = await asyncio.to_thread(sync.communicate, None, 600)
        jobs = await asyncio.to_thread(_cli, env, "source", "jobs", "--source", "many",
                                       cwd=work)
        result["sync"] = {**_row(samples, idle), "failed": len(failed),
                          "failures": failed[:5], "files": files,
                          "cli_exit": sync.returncode, "cancelled_at_window": cancelled,
                          "sync_s": round(time.perf_counter() - t0, 1),
                          "cli_said": (out.strip().splitlines() or [""])[-1][:300],
                          "job": _last_job(jobs)}
        log(f"cli_contention sync: {json.dumps(result['sync'])}")
    p99 = result["sync"]["search_memory"].get("p99_vs_idle")
    result["sync"]["met"] = (p99 is not None and p99 <= TARGET_RATIO
                             and result["sync"]["failed"] == 0)
    return result


def run(scratch: Path, quick: bool, log: Any = print, *, files: int | None = None,
        window_s: float | None = None, idle_calls: int = 200) -> dict[str, Any]:
    n = files or 2_000
    window = window_s or (300.0 if quick else 1200.0)
    tmp = Path(tempfile.mkdtemp(prefix="cli-contention-", dir=scratch))
    out = asyncio.run(_measure(tmp, n, window, idle_calls, log))
    return {"files": n, "think_s": THINK_S, "window_s": window, **out}


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    p = argparse.ArgumentParser(prog="python -m bench.cli_contention", description=__doc__)
    p.add_argument("--files", type=int, default=None, help="files in the synced source (2,000)")
    p.add_argument("--window", type=float, default=None, help="most seconds the sync is measured")
    p.add_argument("--json", default=None, help="write the figures to this file")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        res = run(Path(tmp), False, files=args.files, window_s=args.window)
    emit_json(res, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
