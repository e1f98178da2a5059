"""``python -m bench.fsio``: fs_write -> searchable, fs_read and fs_list wall times.

A 50-file source on Qdrant Edge in a temp dir with the configured (default: bundled MiniLM)
model. fs_write's time includes its inline index (one targeted job through the sync queue:
read, redact, chunk, embed, upsert), so it is the time until the file is searchable. Prints
medians; nothing here is a test (speed is checked in bench, never by timed tests).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 1)


def main(writes: int = 20) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-fsio-"))
    os.environ["BRAIN__PATHS__ALLOWED_ROOTS"] = json.dumps([str(tmp)])
    from brain.app import Brain
    from config import load_settings

    settings = load_settings(home=tmp / "home")
    src = tmp / "proj"
    src.mkdir()
    for i in range(50):
        (src / f"f{i}.md").write_text(f"# File {i}\n\n" + f"Some text about topic {i}. " * 40)
    with Brain(settings) as b:
        b.sources.add(str(src), name="p", trigger="manual")
        b.sources.wait_idle(300)
        wrote, read, listed = [], [], []
        for i in range(writes):
            t0 = time.perf_counter()
            res = b.fs.write("p", f"new/n{i}.md", f"# Note {i}\n\nThe plan number {i}.\n" * 20)
            wrote.append(time.perf_counter() - t0)
            assert res["indexed"], res
        for i in range(writes):
            t0 = time.perf_counter()
            b.fs.read("p", f"f{i}.md")
            read.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            b.fs.list("p")
            listed.append(time.perf_counter() - t0)
    out = {"fs_write_indexed_ms": _ms(wrote), "fs_write_max_ms": round(max(wrote) * 1000, 1),
           "fs_read_ms": _ms(read), "fs_list_52_entries_ms": _ms(listed)}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
