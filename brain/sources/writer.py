"""The store side of a run: embed a batch of files, upsert their points, delete vanished ones.

Files wait in a batch until it holds ``embed_batch`` chunks that need a vector; a file whose
every chunk kept its vector is written at once. A cancel during embedding writes nothing of
the batch: those files stay for the next run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from brain.sources.points import (
    SOURCE_KINDS,
    Work,
    chunk_point_id,
    file_point_id,
    file_state,
    points_of,
)
from brain.sources.registry import FileState
from brain.sources.run import Run
from brain.sources.walker import FileEntry, entry_for
from brain.vector_store import Filter, Match, MatchAny, Point


class Writer:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.batch: list[Work] = []
        self.batch_texts = 0

    def queue(self, work: Work) -> None:
        missing = sum(1 for p in work.pieces if p.vector is None)
        work.reused = len(work.pieces) - missing
        self.batch.append(work)
        self.batch_texts += missing
        if missing == 0:
            self.flush()

    def full(self) -> bool:
        return self.batch_texts >= self.run.ix.embed_batch

    def flush(self) -> None:
        if not self.batch:
            return
        run = self.run
        batch, self.batch, self.batch_texts = self.batch, [], 0
        need = [p for w in batch for p in w.pieces if p.vector is None]
        if need:
            run.progress["phase"] = "embed"
            t0 = time.perf_counter()
            vecs = run.ix.embed([p.text for p in need], run.ctl)
            run.stats.embed_s += time.perf_counter() - t0
            if vecs is None:
                return  # cancelled: these files stay for the next run
            for piece, vec in zip(need, vecs, strict=True):
                piece.vector = vec
            run.stats.chunks_embedded += len(need)
            run.progress["chunks_embedded"] = run.stats.chunks_embedded
            run.progress["phase"] = "index"
        self.write(batch)

    def write(self, works: Sequence[Work]) -> None:
        """Upsert the files' points, drop their chunks past the new end, save their state."""
        run, ix, rec = self.run, self.run.ix, self.run.rec
        stats = run.stats
        points: list[Point] = []
        stale: list[str] = []
        states: list[FileState] = []
        for w in works:
            ix.pause()  # tool calls first: a file's points (BM25, payload) are Python work
            points.extend(points_of(w, rec, ix.model_id, ix.user_id, ix.bm25))
            n = (w.pieces[-1].index + 1) if w.pieces else 0
            stale.extend(chunk_point_id(rec.id, w.entry.rel, i) for i in range(n, w.old_n))
            if not w.pieces:
                stale.append(file_point_id(rec.id, w.entry.rel))
            states.append(file_state(w, len(w.text), n, ix.model_id))
            stats.chunks_reused += w.reused
            if w.kind == "renamed":
                stats.files_renamed += 1
            elif w.kind == "appended":
                stats.files_appended += 1
            else:
                stats.files_indexed += 1
        for i in range(0, len(points), 512):
            ix.store.upsert(points[i : i + 512])
        ix.store.delete(stale)
        ix.registry.put_states(rec.id, states)
        for w in works:
            ix.file_written(rec, w.entry.rel)
            run.touched.add(w.entry.rel)
        run.progress["chunks_reused"] = stats.chunks_reused

    def delete(self, rels: set[str]) -> None:
        """Delete every point and the state of files gone from the source."""
        run, ix = self.run, self.run.ix
        doomed = []
        for rel in sorted(rels):
            # A capped walk does not see every file: only drop what is really gone.
            if run.stats.capped and isinstance(entry_for(run.root, rel, run.flt), FileEntry):
                continue
            doomed.append(rel)
        run.progress["phase"] = "delete"
        for i in range(0, len(doomed), 256):
            if run.cancelled():
                return
            group = tuple(doomed[i : i + 256])
            ix.store.delete_by_filter(
                Filter(
                    must=(
                        Match("source_id", run.rec.id),
                        MatchAny("kind", SOURCE_KINDS),
                        MatchAny("path", group),
                    )
                )
            )
            ix.registry.delete_states(run.rec.id, group)
            run.stats.files_deleted += len(group)
            run.touched.update(group)
