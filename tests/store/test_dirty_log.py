"""The write log of a model switch (brain/generations/state.DirtyLog) under concurrency."""

from __future__ import annotations

import threading
from pathlib import Path

from brain.generations.state import DirtyLog


def test_appends_through_one_instance_survive_consumes_through_another(tmp_path: Path) -> None:
    """The live store's wrapper appends through one DirtyLog and the rebuild reads and consumes
    through another of the same file. Every id appended is either handed to a read that was
    consumed, or still in the log: none is lost to a consume's rewrite of the file."""
    writer, reader = DirtyLog.for_generation(tmp_path, 2), DirtyLog.for_generation(tmp_path, 2)
    n = 3000
    done = threading.Event()

    def append() -> None:
        for i in range(n):
            writer.add([f"id-{i}"])
        done.set()

    taken: set[str] = set()
    t = threading.Thread(target=append)
    t.start()
    while not done.is_set():
        ids, upto = reader.read()
        taken.update(ids)
        reader.consume(upto)
    t.join()
    taken.update(reader.read()[0])
    missing = {f"id-{i}" for i in range(n)} - taken
    assert not missing, f"{len(missing)} appended ids lost, e.g. {sorted(missing)[:3]}"
