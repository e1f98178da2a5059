"""Evaluate a LoCoMo store a bench run left behind again, under other settings (query-time
levers, e.g. ``retrieval.neighbour_weight``), without writing it again::

    python -m bench.reeval STORE_HOME [--level turn] [--set neighbour_weight=0.3 ...]

STORE_HOME is the data dir a run logged ("... into <path>"); its ``bench-maps.json`` maps
note ids to dialogue ids. Prints dev / test / full any@k and writes them as JSON with --json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench import data_dir, mcp_client, open_brain, sections_for
    from bench.locomo import _brief, _evaluate, load
    from brain.embedding.registry import REGISTRY, build_embedder
    from config import EmbeddingSettings

    home = Path(args.store)
    maps = {int(k): v for k, v in json.loads((home / "bench-maps.json").read_text()).items()}
    convs = [c for c in load(data_dir(args.data) / "locomo10.json") if c.index in maps]
    overrides = {k: _value(v) for k, v in (s.split("=", 1) for s in args.set)}
    embedder = build_embedder(REGISTRY["sentence-transformers/all-MiniLM-L6-v2"],
                              backend=EmbeddingSettings().backend)
    brain = open_brain(home, embedder, **sections_for(overrides))
    try:
        async with mcp_client(brain) as client:
            table = await _evaluate(client, convs, maps, args.level, "search_memory")
    finally:
        brain.close()
    print(f"{home.name} {overrides}: {_brief(table)}", flush=True)
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.reeval", description=__doc__)
    p.add_argument("store")
    p.add_argument("--level", choices=("turn", "session"), default="turn")
    p.add_argument("--set", action="append", default=[], help="setting=value, repeatable")
    p.add_argument("--data", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    table = asyncio.run(run(args))
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
