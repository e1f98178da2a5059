"""Qdrant Edge backend: the Qdrant engine in-process, one shard directory under the data dir.

A shard directory admits one open ``EdgeShard`` (a sibling ``<shard>.lock`` is flocked for the
store's whole open life, and the WAL is locked too); a second opener gets ``StoreLocked`` with
the fix in its message.

Optimization runs out of process. qdrant-edge-py 0.9.0's ``EdgeShard.optimize()`` holds the
GIL for its whole run (searches in other threads waited 31-42 s at 10k notes), so
:meth:`EdgeStore.optimize` flushes the shard, copies its directory (writes wait for the copy
only), optimizes the copy in a child process at low priority while this process keeps serving
and records every write made since the copy, then swaps briefly: close the live shard, rename
it aside, rename the optimized copy in, fsync, reopen, replay the recorded writes, flush, and
drop the old directory. Reads wait for the swap only.

Crash safety: until the swap the live shard and its WAL are untouched. The old directory is
renamed ``<shard>.aside`` before the new one comes in and renamed ``<shard>.trash`` only once
the replayed writes are flushed in the new one, so at open: ``.aside`` present means the swap
did not finish and the old shard (holding every acknowledged write) goes back in place;
``.trash`` and ``.optimizing`` leftovers are deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from brain import heap
from brain.errors import ActionInProgress, InvalidArgument, OptimizeAborted, StoreError, StoreLocked
from brain.private import fsync_dir
from brain.vector_store import edge_convert as cv
from brain.vector_store.base import (
    DENSE,
    QUANTIZATION_MODES,
    SPARSE,
    TENANT_FIELDS,
    Filter,
    Hit,
    Hold,
    IndexState,
    Match,
    Point,
    SparseVector,
    StoreInfo,
    count_flags,
    declared_indexes,
)
from brain.vector_store.edge_swap import (
    _CHILD,
    MAX_REPLAY_POINTS,
    _copy_tree,
    _replay,
    _SwapLock,
    catch_up,
    points_of,
)

# Up to this many points an index built otherwise than declared is built again in the live
# store when it opens (milliseconds); above, in the next optimization's copy.
REBUILD_IN_PLACE_MAX = 20_000


class EdgeStore:
    backend = "qdrant-edge"

    def __init__(self, path: Path, index_min_vectors: int | None = None,
                 quantization: str = "none") -> None:
        if quantization not in QUANTIZATION_MODES:
            raise InvalidArgument(f"quantization={quantization!r} is not one of "
                                  f"{', '.join(QUANTIZATION_MODES)}", field="quantization")
        self.path = Path(path)
        # The mode a new store is created with; an existing store keeps its own (the one in
        # its edge_config.json) until set_quantization() switches it.
        self.create_quantization = quantization
        self._mode = quantization
        self._dimension = 0
        # Edge indexes a segment once its dense vectors pass an indexing threshold in KB (10 MB
        # by default: ~6,700 384-d vectors). Set from ``[index] min_unindexed`` so that the
        # index worker's trigger and what an optimization indexes agree.
        self.index_min_vectors = index_min_vectors
        self._shard: qe.EdgeShard | None = None
        self._write_lock = threading.Lock()
        self._rw = _SwapLock()
        self._lock_fd: int | None = None
        # Optimization: one at a time; the writes made since its copy; what it has done.
        self._optimize_lock = threading.Lock()
        # "module:function" applied to every payload in the next optimization's copy before
        # it is optimized (edge_swap.rewrite_payloads); the targets of the runs that swapped in.
        self.payload_rewrite: str | None = None
        self.rewrites_done: set[str] = set()
        self._recorded: list[tuple[str, Any]] | None = None
        self._recorded_points = 0
        self._abort = threading.Event()
        self._warming: threading.Thread | None = None  # heap.warm_in_background at open
        self._deleted_since = 0  # points deleted since open or the last optimization
        # Bumped after every write lands (and when the shard is replaced): what
        # may_hold_flag learned stays true until it moves.
        self._writes = 0
        self._flags: dict[str, tuple[int, bool]] = {}
        # An index built otherwise than declared waits for the next optimization's copy.
        self.indexes_stale = False
        # The steps of the last optimization, seconds: copy (writes wait), child, swap (reads
        # and writes wait), and how many points were replayed (in all, and by the swap).
        self.last_optimize: dict[str, float] = {}

    # sibling paths of the shard directory (see the module docstring)
    def _sibling(self, suffix: str) -> Path:
        return self.path.with_name(self.path.name + suffix)

    @property
    def aside_path(self) -> Path:
        return self._sibling(".aside")

    # -- lifecycle --------------------------------------------------------------------------
    def _take_lock(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._sibling(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLocked(
                f"the store at {self.path} is open in another process. Stop that process, "
                "or point BRAIN__HOME at another data dir.",
                path=str(self.path),
            ) from None
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    def recover(self) -> list[str]:
        """Finish or roll back an optimization a crash interrupted (call with the lock held)."""
        done: list[str] = []
        aside, trash, work = self.aside_path, self._sibling(".trash"), self._sibling(".optimizing")
        if trash.exists():
            shutil.rmtree(trash, ignore_errors=True)
        if aside.exists():
            # The swap did not finish: the old shard holds every acknowledged write.
            if self.path.exists():
                self.path.rename(trash)
                fsync_dir(self.path.parent)
            aside.rename(self.path)
            fsync_dir(self.path.parent)
            done.append("rolled back an interrupted optimization")
        for leftover in (trash, work):
            if leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
                done.append(f"removed {leftover.name}")
        return done

    def _config(self, dimension: int, mode: str) -> Any:
        """The shard config: dense (quantized per ``mode``) + BM25 sparse, and the indexing
        threshold when set. Loading with it rewrites the persisted config, so an existing store
        is always loaded with its own mode."""
        optimizers = None
        if self.index_min_vectors:
            kb = max(1, -(-self.index_min_vectors * dimension * 4 // 1024))
            optimizers = qe.EdgeOptimizersConfig(indexing_threshold=kb)
        dense = qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine,
                                    quantization_config=cv.quantization_config(mode),
                                    on_disk=cv.originals_on_disk(mode))
        # The BM25 index and the id tracker of indexed segments memory-mapped (cold), not on
        # the heap: at 100,000 notes these were most of the 52 MB the shard still held there
        # with its payload indexes on disk (32 MB with them mapped; BENCHMARKS.md, Footprint).
        return qe.EdgeConfig(
            vectors={DENSE: dense},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf,
                                                              memory=qe.Memory.Cold)},
            optimizers=optimizers,
            id_tracker_memory=qe.Memory.Cold,
        )

    def _persisted(self) -> dict[str, Any] | None:
        try:
            data = json.loads((self.path / "edge_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _persisted_mode(self) -> str | None:
        """The quantization mode the shard's own config records (None: no readable config).
        A per-vector setting wins over a global one, as in Qdrant."""
        data = self._persisted()
        if data is None:
            return None
        dense = (data.get("vectors") or {}).get(DENSE) or {}
        if dense.get("quantization_config"):
            return cv.mode_of(dense["quantization_config"])
        return cv.mode_of(data.get("quantization_config"))

    def open(self, dimension: int) -> None:
        self._dimension = dimension
        self._take_lock()
        try:
            self._open_shard(dimension)
        except BaseException:
            self._release_lock()
            raise
        # Filtered search without payload indexes reads every payload per condition: measured
        # 66 ms vs 3 ms for a filtered search over 200 notes. Index from the first point on.
        self.ensure_indexes()
        # Edge reads every page of its files in at a load; most are preallocated and empty.
        heap.watch_files(self.path)
        heap.release_files()
        # The first searches would otherwise read their pages from the disk one fault at a time.
        self._warming = heap.warm_in_background(self.path)

    def _open_shard(self, dimension: int) -> None:
        with heap.mapping_change():
            self._open_shard_locked(dimension)
        self._writes += 1

    def _open_shard_locked(self, dimension: int) -> None:
        try:
            self.recover()
        except OSError as exc:
            raise StoreError(f"cannot recover the store at {self.path} from an interrupted "
                             f"optimization ({exc}); check the permissions of its folder") from exc
        fresh = not (self.path.exists() and any(self.path.iterdir()))
        try:
            if fresh:
                self.path.mkdir(parents=True, exist_ok=True)
                self._mode = self.create_quantization
                self._shard = qe.EdgeShard.create(str(self.path), self._config(dimension,
                                                                               self._mode))
            else:
                # With the config when it sets the threshold: checked, then kept on disk (the
                # optimizer child loads the shard without one and reads it from there). The
                # store keeps its own quantization: a setting never switches it at a start.
                mode = self._persisted_mode()
                self._mode = mode or "none"
                keep = self.index_min_vectors and mode in QUANTIZATION_MODES
                self._shard = qe.EdgeShard.load(
                    str(self.path), self._config(dimension, self._mode) if keep else None)
        except Exception as exc:
            if "WouldBlock" in str(exc):
                raise StoreLocked(
                    f"the store at {self.path} is open in another process. Stop that process, "
                    "or point BRAIN__HOME at another data dir.",
                    path=str(self.path),
                ) from exc
            raise StoreError(f"cannot open Qdrant Edge shard at {self.path}: {exc}") from exc

    def declared_indexes(self) -> dict[str, str]:
        return declared_indexes(cv.SHADOW, tiers=True)

    def payload_indexes(self) -> dict[str, str]:
        with self._rw.reading():
            schema = self._require().info().payload_schema
        return {name: cv.schema_name(info) for name, info in schema.items()}

    def rebuild_index(self, name: str) -> None:
        want = self.declared_indexes().get(name)
        if want is None:
            raise InvalidArgument(f"{name!r} is not a declared payload index", field="name")
        if name in self.payload_indexes():
            self._update(qe.UpdateOperation.delete_field_index(name))
        self._update(qe.UpdateOperation.create_field_index(name, cv.index_params(want)))

    def ensure_indexes(self, in_place: bool = False) -> int:
        """Create the payload indexes that are missing; returns how many were created. One
        an older version built (in RAM, or with HNSW links: ``edge_convert.retiered``) is
        built again here on a small store, and one a newer version declares is created here;
        on a larger store both are left to the next optimization's copy (``indexes_stale``
        says one is due; the Brain starts that run at open): building one reads every point,
        ~1 s per 50,000 notes each, which a start would otherwise wait for. One of another
        schema is only reported (brain/health/collection.py). ``in_place``: as on a small
        store, whatever the size (no index run will come: ``[index] enabled`` is off)."""
        shard = self._require()
        schema = shard.info().payload_schema
        have = {name: cv.schema_name(info) for name, info in schema.items()}
        created = 0
        regrouped = set()
        for name in TENANT_FIELDS:
            # A store from before tenant indexes: rebuild the index as a tenant index (the
            # points are regrouped by the next optimize()).
            if name in have and not have[name].startswith("keyword:tenant"):
                self._update(qe.UpdateOperation.delete_field_index(name))
                del have[name]
                regrouped.add(name)
        small = in_place or int(shard.info().points_count) <= REBUILD_IN_PLACE_MAX
        stale = False
        for name, want in self.declared_indexes().items():
            if name not in have and not small and name not in regrouped:
                stale = True  # one a newer version declares: built in the next run's copy
            elif name not in have:
                self._update(qe.UpdateOperation.create_field_index(name, cv.index_params(want)))
                created += 1
            elif cv.retiered(have[name], want) and not small:
                stale = True
            elif cv.retiered(have[name], want):
                self._update(qe.UpdateOperation.delete_field_index(name))
                self._update(qe.UpdateOperation.create_field_index(name, cv.index_params(want)))
        self.indexes_stale = stale
        return created

    # -- index maintenance ------------------------------------------------------------------
    def index_state(self) -> IndexState:
        with self._rw.reading():
            shard = self._require()
            info = shard.info()
            dense = shard.count(qe.CountRequest(
                exact=True, filter=qe.Filter(must=[qe.HasVectorCondition(DENSE)])))
            sparse = shard.count(qe.CountRequest(
                exact=True, filter=qe.Filter(must=[qe.HasVectorCondition(SPARSE)])))
        # indexed_vectors_count counts every sparse vector (always indexed), the dense ones in
        # HNSW segments, and deleted ones until a vacuum: the surplus over the live vectors,
        # when the dense ones are all indexed, is deleted vectors.
        indexed_total = int(info.indexed_vectors_count)
        indexed = max(0, min(dense, indexed_total - sparse))
        unindexed = dense - indexed
        deleted = self._deleted_since
        if unindexed == 0:
            surplus = indexed_total - sparse - dense
            deleted = max(deleted, surplus // 2 if sparse else surplus)
        points = int(info.points_count)
        share = deleted / (points + deleted) if points + deleted else 0.0
        return IndexState(
            points=points, indexed=indexed, unindexed=unindexed,
            segments=int(info.segments_count), deleted_share=round(share, 4),
            optimizing=self._optimize_lock.locked(),
        )

    def optimize(self, hold: Hold | None = None) -> bool:
        """Optimize a copy in a child process, then swap it in (see the module docstring).

        True when the optimizer changed anything; False when there was nothing to do or a run
        is already going on. Raises StoreError when the child fails (the live shard is left as
        it was) and OptimizeAborted when the store closes meanwhile."""
        if not self._optimize_lock.acquire(blocking=False):
            return False
        try:
            return self._optimize_locked(hold)
        finally:
            self._optimize_lock.release()

    def _optimize_locked(self, hold: Hold | None) -> bool:
        guard: Hold = hold or contextlib.nullcontext
        work = self._sibling(".optimizing")
        try:
            self._abort.clear()
            shutil.rmtree(work, ignore_errors=True)
            t0 = time.monotonic()
            with guard(), self._write_lock:
                if self._shard is None:  # closed before the run began its copy
                    raise OptimizeAborted("the store closed during an optimization")
                shard = self._shard
                with heap.mapping_change():
                    shard.flush()
                _copy_tree(self.path, work)
                self._recorded, self._recorded_points = [], 0
                rewrite = self.payload_rewrite
            t1 = time.monotonic()
            changed = self._run_child(work, rewrite)
            t2 = time.monotonic()
            # Catch up outside the locks: replay into the copy what was written so far, so the
            # swap replays only what comes in meanwhile.
            caught = catch_up(work, self._recorded_after)
            with guard(), self._write_lock:
                recorded, self._recorded = self._recorded, None
                if recorded is None:
                    raise OptimizeAborted("too many writes during the optimization to replay "
                                          f"(> {MAX_REPLAY_POINTS} points); it runs again later")
                if self._abort.is_set():
                    raise OptimizeAborted("the store closed during an optimization")
                t3 = time.monotonic()
                with self._rw.exclusive():
                    self._swap(work, recorded[caught:])
                self._deleted_since = 0
                self.indexes_stale = False  # the child built them as declared
                if rewrite is not None:
                    self.rewrites_done.add(rewrite)
                    if self.payload_rewrite == rewrite:
                        self.payload_rewrite = None
            self.last_optimize = {
                "copy_s": round(t1 - t0, 3), "child_s": round(t2 - t1, 3),
                "catch_up_s": round(t3 - t2, 3), "swap_s": round(time.monotonic() - t3, 3),
                "replayed": float(points_of(recorded)),  # points, not batches
                "swap_replayed": float(points_of(recorded[caught:])),
            }
            return changed
        finally:
            with self._write_lock:
                self._recorded = None
            shutil.rmtree(work, ignore_errors=True)
            heap.release()  # the run freed its recorded writes and the replaced shard

    # -- quantization -----------------------------------------------------------------------
    def quantization(self) -> str | None:
        with self._rw.reading():
            return self._persisted_mode() or self._mode

    def quantized_segments(self) -> tuple[int, int]:
        """(segments with an HNSW index, of which holding int8 data): a switch to int8 is
        complete once both are equal."""
        indexed = quantized = 0
        with self._rw.reading():
            for seg in (self.path / "segments").glob("*"):
                if (seg / f"vector_index-{DENSE}" / "graph.bin").exists():
                    indexed += 1
                    quantized += (seg / f"vector_storage-{DENSE}" / "quantized.data").exists()
        return indexed, quantized

    def set_quantization(self, mode: str, hold: Hold | None = None,
                         wait_s: float = 600.0) -> dict[str, Any]:
        """Switch the dense vectors' quantization: reload the live shard with the new config
        (reads and writes wait for that step only), then rebuild its segments the way
        :meth:`optimize` does (a child process works on a copy, then a swap). The optimizer
        rebuilds every segment whose config differs, so an indexed store is fully switched
        when this returns. Waits up to ``wait_s`` for a running optimization to finish."""
        if mode not in QUANTIZATION_MODES:
            raise InvalidArgument(f"quantization={mode!r} is not one of "
                                  f"{', '.join(QUANTIZATION_MODES)}", field="quantization")
        # Held for the whole switch: an optimization started before the reload would swap
        # in a copy with the old config.
        if not self._optimize_lock.acquire(timeout=wait_s):
            raise ActionInProgress(f"an optimization of {self.path} is still running after "
                                   f"{wait_s:.0f} s; retry when it is done")
        try:
            before = self.quantization()
            t0 = time.monotonic()
            guard: Hold = hold or contextlib.nullcontext
            with guard(), self._write_lock, self._rw.exclusive(), heap.mapping_change():
                shard = self._require()
                shard.flush()
                shard.close()
                self._shard = None
                try:
                    self._shard = qe.EdgeShard.load(str(self.path),
                                                    self._config(self._dimension, mode))
                except Exception as exc:
                    self._shard = qe.EdgeShard.load(str(self.path))
                    raise StoreError(f"cannot switch {self.path} to quantization {mode!r} "
                                     f"({exc}); the store is unchanged") from exc
                self._mode = mode
            changed = self._optimize_locked(hold)
            indexed, quantized = self.quantized_segments()
            return {"from": before, "to": mode, "rebuilt": changed,
                    "duration_s": round(time.monotonic() - t0, 3),
                    "indexed_segments": indexed, "quantized_segments": quantized}
        finally:
            self._optimize_lock.release()

    def _search_params(self, exact: bool) -> Any:
        if exact:  # the original vectors only
            quant = qe.QuantizationSearchParams(ignore=True) if self._mode != "none" else None
            return qe.SearchParams(exact=True, quantization=quant)
        if self._mode == "none":
            return None
        # Qdrant Edge does not rescore by default: without it the int8 scores are returned.
        return qe.SearchParams(quantization=qe.QuantizationSearchParams(rescore=True))

    def cancel_optimize(self) -> None:
        """Make a running optimization give up (the live shard is left as it is)."""
        self._abort.set()

    def _run_child(self, work: Path, rewrite: str | None = None) -> bool:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(work), str(os.getpid()),
             *([rewrite] if rewrite else [])],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )
        try:
            while proc.poll() is None:
                if self._abort.wait(0.1):
                    proc.kill()
                    proc.wait()
                    raise OptimizeAborted("the store closed during an optimization")
            out, err = proc.communicate()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip().splitlines()[-3:]
            raise StoreError(f"optimizing a copy of {self.path} failed (exit {proc.returncode}: "
                             f"{' / '.join(tail)}); the store is unchanged and serves as before")
        return out.strip() == b"1"

    def _recorded_after(self, n: int) -> list[tuple[str, Any]] | None:
        with self._write_lock:
            return None if self._recorded is None else self._recorded[n:]

    def _swap(self, work: Path, recorded: Sequence[tuple[str, Any]]) -> None:
        """Replace the live shard by the optimized copy ``work`` plus the recorded writes.
        Called with writes and reads held off."""
        with heap.mapping_change():
            self._swap_locked(work, recorded)

    def _swap_locked(self, work: Path, recorded: Sequence[tuple[str, Any]]) -> None:
        parent, aside = self.path.parent, self.aside_path
        old = self._require()
        old.close()
        self._shard = None
        new: qe.EdgeShard | None = None
        try:
            os.rename(self.path, aside)
            fsync_dir(parent)
            os.rename(work, self.path)
            fsync_dir(parent)
            new = qe.EdgeShard.load(str(self.path))
            # In the new WAL now, as durable as any write (no flush: it costs ~0.5 s here).
            _replay(new, recorded)
        except BaseException:  # roll back: the old shard holds everything
            if new is not None:
                new.close()
            self.recover()
            self._shard = qe.EdgeShard.load(str(self.path))
            raise
        self._shard = new
        self._writes += 1
        trash = self._sibling(".trash")
        os.rename(aside, trash)
        fsync_dir(parent)
        shutil.rmtree(trash, ignore_errors=True)

    def _require(self) -> qe.EdgeShard:
        if self._shard is None:
            raise StoreError("the store is not open; call open() first")
        return self._shard

    def flush(self) -> None:
        with self._rw.reading(), heap.mapping_change():
            if self._shard is not None:
                self._shard.flush()

    def close(self) -> None:
        self._abort.set()  # a running optimization gives up; the live shard is intact
        with self._write_lock, self._rw.exclusive(), heap.mapping_change():
            heap.unwatch_files(self.path)
            if self._shard is not None:
                self._shard.close()
                self._shard = None
            self._release_lock()

    def info(self) -> StoreInfo:
        with self._rw.reading():
            info = self._require().info()
        return StoreInfo(
            backend=self.backend,
            location=str(self.path),
            points=info.points_count,
            extra={"segments": info.segments_count},
        )

    # -- writes -----------------------------------------------------------------------------
    def _update(self, op: Any, points: int = 1, deleted: int = 0,
                upserted: list[tuple[str, Any]] | None = None) -> None:
        """Apply one write; during an optimization also keep it for the replay."""
        with self._write_lock:
            with heap.mapping_change():
                self._require().update(op)
            self._writes += 1  # after the write: a reader that counted before it recounts
            self._deleted_since += deleted
            if self._recorded is not None:
                self._recorded_points += points
                if self._recorded_points > MAX_REPLAY_POINTS:
                    self._recorded = None  # the run is abandoned at its swap
                elif upserted is not None:
                    self._recorded.append(("upsert", upserted))
                else:
                    self._recorded.append(("op", op))

    def upsert(self, points: Sequence[Point]) -> None:
        if not points:
            return
        pts = [(p.id, qe.Point(p.id, cv.vectors(p), cv.shadow(p.payload))) for p in points]
        self._update(qe.UpdateOperation.upsert_points([q for _, q in pts]), len(pts),
                     upserted=pts)

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if not ids:
            return
        self._update(qe.UpdateOperation.set_payload(list(ids), cv.shadow(payload)), len(ids))

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        self._update(qe.UpdateOperation.delete_points(list(ids)), len(ids), len(set(ids)))

    def delete_by_filter(self, flt: Filter) -> None:
        qflt = cv.to_filter(flt) or qe.Filter()
        n = self.count(flt)
        self._update(qe.UpdateOperation.delete_points_by_filter(qflt), n, n)

    # -- reads ------------------------------------------------------------------------------
    def retrieve(self, ids: Sequence[str], with_vectors: bool = False,
                 with_payload: bool = True) -> list[Point]:
        if not ids:
            return []
        with self._rw.reading():
            recs = self._require().retrieve(list(ids), with_payload=with_payload,
                                            with_vector=with_vectors)
        return [cv.from_record(r, with_vectors) for r in recs]

    def query_dense(
        self, vector: Sequence[float], flt: Filter | None, limit: int, exact: bool = False,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        req = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest([float(x) for x in vector], using=DENSE),
            filter=cv.to_filter(flt),
            with_payload=cv.selector(fields),
            params=self._search_params(exact),
        )
        with self._rw.reading():
            found = self._require().query(req)
        return cv.hits(found, fields)

    def query_sparse(
        self, vector: SparseVector, flt: Filter | None, limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        if not vector.indices:
            return []
        sv = qe.SparseVector(indices=list(vector.indices), values=list(vector.values))
        req = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(sv, using=SPARSE),
            filter=cv.to_filter(flt),
            with_payload=cv.selector(fields),
        )
        with self._rw.reading():
            found = self._require().query(req)
        return cv.hits(found, fields)

    def scroll(
        self,
        flt: Filter | None,
        limit: int = 256,
        offset: str | None = None,
        with_vectors: bool = False,
    ) -> tuple[list[Point], str | None]:
        req = qe.ScrollRequest(
            offset=offset,
            limit=limit,
            filter=cv.to_filter(flt),
            with_payload=True,
            with_vector=with_vectors,
        )
        with self._rw.reading():
            recs, next_offset = self._require().scroll(req)
        points = [cv.from_record(r, with_vectors) for r in recs]
        return points, (str(next_offset) if next_offset is not None else None)

    def count(self, flt: Filter | None = None, exact: bool = True) -> int:
        """Points matching ``flt``; ``exact`` False: the payload indexes' estimate."""
        req = qe.CountRequest(exact=exact, filter=cv.to_filter(flt))
        with self._rw.reading():
            return int(self._require().count(req))

    def may_hold_flag(self, field: str) -> bool:
        """Whether any point may hold the boolean ``field`` true, kept until the next write,
        so a store without code (``is_code``) skips the code-share facet of every search
        (~0.35 ms of a 1,000-note search). Asked of the field's index as an estimated count
        (0.1-0.35 ms; 0 only when the index holds no such point): while the index is being
        rebuilt the estimate is a guess above 0, so the answer is "may", where reading the
        payloads instead took 8 ms at 1,000 notes."""
        seen = self._writes
        known = self._flags.get(field)
        if known is not None and known[0] == seen:
            return known[1]
        held = self.count(Filter(must=(Match(field, True),)), exact=False) > 0
        self._flags[field] = (seen, held)
        return held

    def flag_counts(self, ids: Sequence[str], field: str) -> tuple[int, int]:
        # One facet over the field's keyword shadow: the id set is converted once (~2 us an
        # id in the binding), where two counts converted it twice.
        req = qe.FacetRequest(key=cv.SHADOW + field, limit=2, exact=True,
                              filter=qe.Filter(must=[qe.HasIdCondition(set(ids))]))
        try:
            with self._rw.reading():
                hits = {h.value: int(h.count) for h in self._require().facet(req).hits}
        except Exception as exc:  # noqa: BLE001 - the binding raises a bare Exception
            if "index" not in str(exc):
                raise
            # The field's index is being rebuilt (health rebuild_indexes): count instead.
            return count_flags(self, ids, field)
        return hits.get("true", 0), hits.get("false", 0)
