"""``brain import`` through a running server beside the bulk path, notes/s, embedding included::

    python -m bench.import_rate [--notes 10000] [--json OUT]

In one run, on the speed bench's synthetic notes (bench/synthetic.py, 20 projects):

1. the bulk path: a Brain on a fresh data dir (default settings, its workers running, the
   configured embedder) imports the notes with :func:`brain.memory.bulk.bulk_add`, as the speed bench
   does, embedding every note; then the store is exported (``brain export``'s JSONL);
2. ``brain import``: a server (``python -m brain.cli serve``) on another fresh data dir, then
   ``python -m brain.cli import EXPORT`` as a user runs it, timed from the command's start to
   its exit (it hands the file to the server, which re-embeds every note with its model).

then the bulk path once more on a third data dir (A-B-A, so a load that drifts weighs on both).
Both rates count the same notes and embed them with the same model and backend; the second
also pays the command's start and the graph rebuild at the end of an import.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import emit_json

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = 20


def bulk_path(home: Path, n: int, export: Path) -> dict[str, Any]:
    """Import ``n`` synthetic notes with bulk_add into a fresh brain; export them."""
    from bench.synthetic import synthetic_notes
    from brain.app import Brain
    from brain.memory.bulk import BulkNote, bulk_add
    from config import load_settings

    brain = Brain(load_settings(home=home)).open()
    try:
        brain.embedder.embed_query("warm up")  # the model loaded before the clock starts
        notes = [BulkNote(x, project=f"proj-{i % PROJECTS}")
                 for i, x in enumerate(synthetic_notes(n))]
        t = time.perf_counter()
        bulk_add(brain.memory, notes, batch=512)  # the speed bench's call
        took = time.perf_counter() - t
        brain.maintenance.export_jsonl(export)
    finally:
        brain.close()
    return {"notes": n, "s": round(took, 1), "notes_per_s": round(n / took, 1)}


def _serve(home: Path) -> subprocess.Popen[bytes]:
    """A server owning ``home`` (stdio, as an agent starts it), once it answers its owner
    socket and has loaded its model."""
    from brain.api import open_brain

    env = {**os.environ, "BRAIN__HOME": str(home)}
    server = subprocess.Popen([sys.executable, "-m", "brain.cli", "serve"], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 180
    while not (home / "owner.json").exists():
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the server for {home} did not start (exit {server.poll()})")
        time.sleep(0.2)
    with open_brain(home) as brain:  # through the running server: the model warms up
        brain.search_memory(query="warm up")
    return server


def through_server(home: Path, export: Path, n: int) -> dict[str, Any]:
    """``brain import EXPORT`` while a server owns ``home``, timed as a user sees it."""
    server = _serve(home)
    try:
        env = {**os.environ, "BRAIN__HOME": str(home)}
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "brain.cli", "import", str(export)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=7200)
        took = time.perf_counter() - t
    finally:
        if server.stdin is not None:
            server.stdin.close()  # end of stdin: the server shuts down cleanly
        server.wait(timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"brain import exited {done.returncode}: {done.stderr[-1000:]}")
    out = json.loads(done.stdout)
    if out["imported"] != n or "through the running server" not in done.stderr:
        raise SystemExit(f"brain import did not import {n} notes through the server: {out}")
    return {"notes": n, "s": round(took, 1), "notes_per_s": round(n / took, 1)}


def run(n: int, scratch: Path) -> dict[str, Any]:
    """The bulk path, ``brain import`` through a server, the bulk path again (A-B-A: on a box
    other work shares, a load that drifts during the run weighs on both sides alike)."""
    export = scratch / "export.jsonl"
    bulk = [bulk_path(scratch / "bulk", n, export)]
    print(f"import_rate {n}: bulk path {bulk[0]['notes_per_s']} notes/s", flush=True)
    served = through_server(scratch / "served", export, n)
    print(f"import_rate {n}: brain import through a server {served['notes_per_s']} notes/s",
          flush=True)
    bulk.append(bulk_path(scratch / "bulk-again", n, scratch / "export-again.jsonl"))
    print(f"import_rate {n}: bulk path again {bulk[1]['notes_per_s']} notes/s", flush=True)
    mean = sum(b["notes_per_s"] for b in bulk) / len(bulk)
    return {"notes": n, "bulk_path": bulk, "brain_import_through_server": served,
            "ratio_to_bulk_mean": round(served["notes_per_s"] / mean, 3),
            "load_average_at_end": [round(x, 1) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.import_rate", description=__doc__)
    p.add_argument("--notes", type=int, default=10_000)
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="brain-import-rate-") as tmp:
        out = run(args.notes, Path(tmp))
    emit_json(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
