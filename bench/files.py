"""Throughput of brain files: pages per second from upload to ``ready`` for a generated PDF.

Run with the real model (the default)::

    .venv/bin/python -m bench.files --pages 200

It uses a throwaway data dir unless ``--home`` is given.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

_SUBJECTS = ("The committee", "Our team", "The contractor", "Each region", "The auditor",
             "The new policy", "The research group", "Management", "The vendor", "The board")  # fmt: skip
_VERBS = ("reviewed", "approved", "postponed", "measured", "documented", "questioned",
          "extended", "simplified", "reported", "rejected")  # fmt: skip
_OBJECTS = ("the quarterly budget", "the delivery schedule", "the safety procedure",
            "the migration plan", "the support contract", "the hiring forecast",
            "the energy audit", "the travel guidelines", "the data retention rule",
            "the pricing model")  # fmt: skip
_TAILS = ("after a long discussion.", "before the end of the month.", "with minor changes.",
          "for the second time this year.", "despite several objections.",
          "in line with last year's figures.", "pending a legal review.")  # fmt: skip


def page_text(rng: random.Random, page: int, sentences: int = 18) -> str:
    """About 250 words of varied business prose, unique per page."""
    out = [f"Section {page}."]
    for _ in range(sentences):
        out.append(
            f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
            f"{rng.choice(_TAILS)}"
        )
    return " ".join(out)


def make_pdf(pages: int, seed: int = 7) -> bytes:
    from fpdf import FPDF

    rng = random.Random(seed)
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.multi_cell(0, 6, page_text(rng, number))
    return bytes(pdf.output())


def measure_pdf_throughput(
    brain: Any, pages: int = 200, keep: bool = False, timeout: float = 1800.0
) -> float:
    """Pages/s from ingest() to ``ready`` for a generated ``pages``-page PDF on ``brain``."""
    stats = measure(brain, pages, keep, timeout)
    return float(stats["pages_per_s"])


def measure(brain: Any, pages: int = 200, keep: bool = False, timeout: float = 1800.0) -> dict:
    data = make_pdf(pages)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"bench-{pages}-pages.pdf"
        path.write_bytes(data)
        started = time.perf_counter()
        roots = brain.settings.paths.allowed_roots
        brain.settings.paths.allowed_roots = [*(roots or [str(Path.home())]), tmp]  # its file
        try:
            rec = brain.files.ingest(path)
        finally:
            brain.settings.paths.allowed_roots = roots
        if rec.get("deduped"):  # same bytes measured before: index them again
            rec = brain.files.reprocess(rec["id"])
        done = brain.files.wait(rec["id"], timeout)
        elapsed = time.perf_counter() - started
    if done["status"] != "ready":
        raise RuntimeError(f"benchmark file did not become ready: {done}")
    if not keep:
        brain.files.delete(done["id"])
    return {
        "pages": pages,
        "bytes": len(data),
        "chunks": done["chunks_count"],
        "seconds": round(elapsed, 3),
        "pages_per_s": round(pages / elapsed, 2),
        "model": brain.meta.model,
        "chunk_tokens": brain.files.chunk_budget()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--home", default=None, help="data dir (default: a temporary one)")
    args = parser.parse_args(argv)
    from brain.app import Brain
    from config import load_settings

    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(home=args.home or tmp)
        with Brain(settings) as brain:
            print(json.dumps(measure(brain, args.pages)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
