"""The benchmark suite: recall on public data (LoCoMo, CoSQA) and speed at scale.

Everything is measured THROUGH THE PUBLIC TOOLS: an in-process MCP client over
``create_server(brain=...)`` stores with ``add_memory`` and queries with ``search_memory``
(and ``deep_search`` when that tool is listed). Only the scale loads of the speed benchmark
(10k / 100k notes) use :mod:`brain.memory.bulk` directly, which writes the same payloads.

fastmcp and ``mcp_server`` are imported lazily, at run time, so ``brain/`` keeps no import of
the MCP layer (the layering rule); the bench is a client of the server, like any agent.
"""

from __future__ import annotations

import importlib
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA_ENV = "BRAIN_BENCH_DATA"


def data_dir(explicit: str | Path | None = None) -> Path:
    """Where locomo10.json and cosqa-dev.json live: ``--data``, $BRAIN_BENCH_DATA, or
    ``../shared/bench`` next to the project root."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    return ROOT.parent / "shared" / "bench"


@dataclass(slots=True)
class BenchContext:
    """What every benchmark gets: the embedder (shared, loaded once), options, a log."""

    embedder: Any
    data: Path
    quick: bool = False
    log: Callable[[str], None] = print
    deep: bool = True  # query deep_search too when the tool is listed
    ablations: bool = True  # the bulk-loaded index ablations (full mode)
    parts: tuple[str, ...] = ("systems", "caller", "lever")  # of LoCoMo (bench/locomo.py)
    sections: dict[str, Any] = field(default_factory=dict)  # settings overrides (tests)
    notes: list[str] = field(default_factory=list)
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="brain-bench-")))

    def open_brain(self, name: str, **sections: Any) -> Any:
        return open_brain(self.home(name), self.embedder, **merge(self.sections, sections))

    @asynccontextmanager
    async def configured(
        self, name: str, overrides: dict[str, Any], **sections: dict[str, Any]
    ) -> AsyncIterator[Any]:
        """(brain, client) on the store ``name`` reopened under settings changed by
        ``overrides`` (field -> value of [retrieval] or [memory]) and ``sections``: a
        benchmark configuration is a different set of settings on the same data, never a
        mutated service."""
        brain = self.open_brain(name, **merge(sections_for(overrides), sections))
        try:
            async with mcp_client(brain) as client:
                yield brain, client
        finally:
            brain.close()

    def home(self, name: str) -> Path:
        path = self.scratch / name
        path.mkdir(parents=True, exist_ok=True)
        return path


def open_brain(home: Path, embedder: Any, **sections: dict[str, Any]) -> Any:
    """A Brain on a fresh data dir with the default configuration (``sections`` override
    settings sections, e.g. ``retrieval={"fusion": "rrf"}``)."""
    from brain.app import Brain
    from config import load_settings

    settings = load_settings(home=home, **sections)
    return Brain(settings, embedder=embedder).open()


def merge(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Settings sections ``base`` with ``more`` laid over them, field by field."""
    out = {k: dict(v) for k, v in base.items()}
    for section, fields in more.items():
        out[section] = {**out.get(section, {}), **fields}
    return out


def sections_for(overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Settings sections of a configuration given as flat fields: each field goes to the
    section that defines it ([retrieval] first, then [memory])."""
    from config import MemorySettings, RetrievalSettings

    out: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        if key in RetrievalSettings.model_fields:
            out.setdefault("retrieval", {})[key] = value
        elif key in MemorySettings.model_fields:
            out.setdefault("memory", {})[key] = value
        else:
            raise KeyError(f"{key} is not a [retrieval] or [memory] setting")
    return out


@asynccontextmanager
async def mcp_client(brain: Any, profile: str = "full") -> AsyncIterator[Any]:
    """An in-process fastmcp Client over ``create_server(brain=brain)``, listing ``profile``'s
    tools (the benches call admin tools too)."""
    fastmcp = importlib.import_module("fastmcp")
    server = importlib.import_module("mcp_server").create_server(brain=brain, profile=profile)
    async with fastmcp.Client(server) as client:
        yield client


async def call(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    res = await client.call_tool(tool, args)
    data = res.structured_content
    if data is None:
        raise RuntimeError(f"{tool} returned no structured content")
    return dict(data)


def tool_runs(
    systems: dict[str, dict[str, Any]], deep: bool
) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, tool, MemoryConfig overrides) of every system to evaluate. A system whose spec
    names ``"tool": "deep_search"`` is a deep_search configuration; those, and the
    ``deep_search`` row (default arguments), run only when the server lists the tool."""
    runs = []
    for name, spec in systems.items():
        tool = spec.get("tool", "search_memory")
        if tool == "search_memory" or deep:
            runs.append((name, tool, {k: v for k, v in spec.items() if k != "tool"}))
    if deep:
        runs.append(("deep_search", "deep_search", {}))
    return runs


async def tool_names(client: Any) -> set[str]:
    return {t.name for t in await client.list_tools()}


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    if not samples_ms:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "n": 0}
    xs = sorted(samples_ms)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    p99 = xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))]
    return {"p50": round(statistics.median(xs), 2), "p95": round(p95, 2), "p99": round(p99, 2),
            "n": len(xs)}


def peak_rss_mb() -> float:
    """The most this process has held since it started (every benchmark run in it before)."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(kb / 1024, 1)


def rss_mb() -> float | None:
    """What this process holds now (VmRSS; None where /proc is not there)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError):
        pass
    return None


def rss_parts_mb(home: Path | None = None, top: int = 8, pid: int | str = "self") -> dict[str, Any]:
    """Where a process's RSS is (this one unless ``pid``): anonymous vs file-backed
    (/proc/PID/status), and the mappings holding most of it (/proc/PID/smaps), files under
    ``home`` by their path there with segment ids as ``*``. Empty where /proc is not there."""
    import re

    out: dict[str, Any] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
            key, _, rest = line.partition(":")
            if key in ("RssAnon", "RssFile", "RssShmem"):
                out[key] = round(int(rest.split()[0]) / 1024, 1)
        by: dict[str, int] = {}
        name = "[anon]"
        for line in Path(f"/proc/{pid}/smaps").read_text(encoding="utf-8").splitlines():
            head = line.split(None, 5)
            if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                name = head[5].strip() if len(head) == 6 else "[anon]"
                if home is not None and name.startswith(str(home)):
                    name = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "*", name[len(str(home)) + 1:])
                else:
                    name = re.sub(r".*/(site-packages|dist-packages)/", "", name)
            elif line.startswith("Rss:"):
                by[name] = by.get(name, 0) + int(line.split()[1])
    except (OSError, ValueError):
        return out
    ranked = sorted(by.items(), key=lambda kv: -kv[1])[:top]
    out["largest"] = {k: round(v / 1024, 1) for k, v in ranked}
    return out


def machine_info() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    try:
        import torch

        torch_version = str(torch.__version__)
        threads = torch.get_num_threads()
    except ImportError:
        torch_version, threads = "", 0
    try:
        import qdrant_edge

        edge = getattr(qdrant_edge, "__version__", "")
    except ImportError:
        edge = ""
    if not edge:
        from importlib.metadata import PackageNotFoundError, version

        try:
            edge = version("qdrant-edge-py")
        except PackageNotFoundError:
            edge = ""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch_version,
        "torch_threads": threads,
        "qdrant_edge": edge,
        "load_average": list(os.getloadavg()),
    }


def copy_store(src: Path, dst: Path) -> Path:
    """A data dir (or a shard) copied to ``dst`` for a measurement: sparse files stay sparse
    (a store's preallocated files are mostly holes), and its lock, owner record and socket
    are left behind, so the copy opens as a store nobody holds."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-r", "--sparse=always", str(src), str(dst)], check=True)
    for junk in ("*.lock", "owner.json", "*.sock"):
        for f in dst.rglob(junk):
            f.unlink()
    return dst


def emit_json(out: Any, path: str | None) -> None:
    """Print a one-purpose bench's figures as JSON, and write them to ``path`` (--json) too."""
    import json

    text = json.dumps(out, indent=2, default=str)
    print(text)
    if path:
        Path(path).write_text(text + "\n", encoding="utf-8")
