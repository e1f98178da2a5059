"""Safe maintenance: schema health, conformance migrations with backups, export/import.

- ``check_health`` validates every note payload against ``brain.notes.REQUIRED_FIELDS`` and
  the enums (memory_type, note_kind, visibility, relations, id shape).
- Three migrations, each a dry run unless ``apply=True``; applying first writes a full
  snapshot of every note payload to ``<home>/backups/<name>-pre-migration-<timestamp>.json``:

  ``memory-schema`` (backup ``memory``)      fill missing fields from brain.notes.NOTE_DEFAULTS
  ``note-kind``     (backup ``notekind``)    unknown note_kind -> ``general``
  ``memory-type``   (backup ``memorytype``)  memory_type outside fleeting/permanent/archived
                                             (e.g. ``research``) -> ``permanent``, and the
                                             value moves to note_kind when it is a kind
  Migrations only add or change payload fields, never content, so vectors stay valid.
- ``restore_backup`` puts every backed-up payload back exactly (whole payload replaced).
- ``export_jsonl`` / ``import_jsonl``: one JSON object per line (header, notes, retired ids,
  then sources, documents and pending sync jobs: brain/maintenance/portable.py);
  import re-embeds from the text with the home's model and reproduces notes, links and
  counters exactly.
- ``weekly`` runs the weekly routine: stale archival, reclamation, health, stats.

Notes written by older OpenCode Brain versions may lack ``kind``; a point with a ``zk_id``
and no ``kind`` is treated as a note. Other kinds (files, chunks, meta) are not touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from tqdm import tqdm

from brain.clock import Clock, iso
from brain.embedding.bm25 import BM25Encoder
from brain.errors import Conflict, InvalidArgument, disk_full, is_no_space
from brain.files.service import FilesService
from brain.maintenance import portable
from brain.memory import MemoryService, bulk, hype, keyword_text
from brain.memory.decay import DecayService
from brain.memory.graph import LinkGraph
from brain.notes import (
    MEMORY_TYPES,
    NOTE_KINDS,
    RELATIONS,
    REQUIRED_FIELDS,
    VISIBILITIES,
    ZK_ID_RE,
    NoteContext,
    missing_defaults,
    point_id,
)
from brain.private import private_file
from brain.sources.service import SourcesService
from brain.store.integrity import SpaceGuard
from brain.store.meta import StoreMeta
from brain.trust.identity import Identity
from brain.trust.redact import redact_tree
from brain.vector_store import Filter, Match, MatchAny, Point, VectorStore, scroll_all

EXPORT_FORMAT = "opencode-brain-export"
BACKUP_FORMAT = "opencode-brain-backup"
NOT_NOTES = ("meta", "file", "chunk", "doc", "doc_chunk", "retired", "hype")
MIGRATIONS = {"memory-schema": "memory", "note-kind": "notekind", "memory-type": "memorytype"}
PROBLEM_CAP = 200
BATCH = 64


def is_note(payload: dict[str, Any]) -> bool:
    kind = payload.get("kind")
    return kind == "note" or (kind is None and isinstance(payload.get("zk_id"), str))


def _type_ok(value: object, expected: type | tuple[type, ...]) -> bool:
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def validate(payload: dict[str, Any]) -> list[str]:
    """Problems of one note payload, as short codes (``missing:salience``, ...)."""
    issues = []
    for name, expected in REQUIRED_FIELDS.items():
        if name not in payload:
            issues.append(f"missing:{name}")
        elif not _type_ok(payload[name], expected):
            issues.append(f"type:{name}")
    checks = (
        ("memory_type", MEMORY_TYPES),
        ("note_kind", NOTE_KINDS),
        ("visibility", VISIBILITIES),
    )
    for name, allowed in checks:
        if name in payload and payload[name] not in allowed:
            issues.append(f"enum:{name}")
    if payload.get("kind") not in (None, "note"):
        issues.append("enum:kind")
    zk = payload.get("zk_id")
    if isinstance(zk, str) and not ZK_ID_RE.match(zk):
        issues.append("format:zk_id")
    types = payload.get("link_types")
    if isinstance(types, dict) and any(v not in RELATIONS for v in types.values()):
        issues.append("enum:link_types")
    return issues


# ---------------------------------------------------------------------- migrations
def _note_kind(p: dict[str, Any], ctx: NoteContext) -> dict[str, Any]:  # noqa: ARG001
    kind = p.get("note_kind")
    if "note_kind" in p and kind not in NOTE_KINDS:
        return {"note_kind": "general", "legacy_note_kind": kind}
    return {}


def _memory_type(p: dict[str, Any], ctx: NoteContext) -> dict[str, Any]:  # noqa: ARG001
    mt = p.get("memory_type")
    if "memory_type" not in p or mt in MEMORY_TYPES:
        return {}
    patch: dict[str, Any] = {"memory_type": "permanent", "legacy_memory_type": mt}
    kind = p.get("note_kind")
    # The semantic type drifted into memory_type: move it to note_kind unless a real kind
    # is already set there.
    if mt in NOTE_KINDS and (kind is None or kind == "general" or kind not in NOTE_KINDS):
        patch["note_kind"] = mt
    return patch


PATCHERS: dict[str, Callable[[dict[str, Any], NoteContext], dict[str, Any]]] = {
    "memory-schema": missing_defaults,  # the defaults of brain.notes.NOTE_DEFAULTS
    "note-kind": _note_kind,
    "memory-type": _memory_type,
}


def _bar(total: int | None, desc: str, enabled: bool) -> tqdm[NoReturn]:
    """A progress bar on a terminal only: tqdm's ``disable=None`` is off when stderr is not a
    tty, so a weekly job's log gets its JSON result, not carriage-return redraws."""
    return tqdm(total=total, desc=desc, file=sys.stderr, disable=None if enabled else True,
                unit="pt")


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class MaintenanceService:
    def __init__(
        self,
        memory: MemoryService,
        store: VectorStore,
        graph: LinkGraph,
        meta: StoreMeta,
        bm25: BM25Encoder,
        clock: Clock,
        decay: DecayService,
        *,
        home: Path,
        identity: Identity,
        default_project: str,
        save_graph: Callable[[], None],
        stats: Callable[[], dict[str, Any]],
        sources: SourcesService | None = None,
        files: FilesService | None = None,
        requeue_hype: Callable[[], int] = lambda: 0,
    ) -> None:
        self.memory = memory
        # Queues HyPE for imported notes (their questions are derived data, never exported).
        self.requeue_hype = requeue_hype
        self.store = store
        self.graph = graph
        self.meta = meta
        self.bm25 = bm25
        self.clock = clock
        self.decay = decay
        self.home = Path(home)
        self.identity = identity  # the process's own: what migrated legacy notes belong to
        self.default_project = default_project
        self.save_graph = save_graph
        self.stats = stats  # the whole brain's (the weekly report shows it)
        # What an export carries besides notes (brain/maintenance/portable.py), when the brain has them.
        self.sources = sources
        self.files = files

    def note_points(self, with_vectors: bool = False) -> Iterator[Point]:
        """Every note point (forgotten, archived and legacy ones included), paged."""
        flt = Filter(must_not=(MatchAny("kind", NOT_NOTES),))
        self.memory.flush_stamps()
        for pt in scroll_all(self.store, flt, with_vectors=with_vectors):
            if is_note(pt.payload):
                yield pt

    def _count(self) -> int:
        return self.store.count(Filter(must_not=(MatchAny("kind", NOT_NOTES),)))

    # ------------------------------------------------------------------ health
    def check_health(self, progress: bool = False) -> dict[str, Any]:
        problems: list[dict[str, Any]] = []
        by_issue: Counter[str] = Counter()
        scanned = invalid = 0
        with _bar(self._count(), "health", progress) as bar:
            for pt in self.note_points():
                scanned += 1
                bar.update(1)
                issues = validate(pt.payload)
                if issues:
                    invalid += 1
                    by_issue.update(issues)
                    if len(problems) < PROBLEM_CAP:
                        problems.append(
                            {"zk_id": pt.payload.get("zk_id"), "point_id": pt.id, "issues": issues}
                        )
        return {
            "ok": invalid == 0,
            "scanned": scanned,
            "invalid": invalid,
            "by_issue": dict(sorted(by_issue.items())),
            "problems": problems,
        }

    # ------------------------------------------------------------------ migrations
    def _ctx(self) -> NoteContext:
        return {
            "project": self.default_project,
            "user_id": self.identity.user_id,
            "agent_id": self.identity.agent_id,
            "model": self.meta.model,
            "now": iso(self.clock.now()),
        }

    def migrate(self, name: str, apply: bool = False, progress: bool = False) -> dict[str, Any]:
        if name not in PATCHERS:
            raise InvalidArgument(
                f"no migration {name!r}; use one of: {', '.join(PATCHERS)}", field="name"
            )
        patcher, ctx = PATCHERS[name], self._ctx()
        planned: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        with _bar(self._count(), f"scan {name}", progress) as bar:
            for pt in self.note_points():
                bar.update(1)
                patch = patcher(pt.payload, ctx)
                if patch:
                    planned.append((pt.id, pt.payload, patch))
        changes = [{"zk_id": p.get("zk_id"), "set": patch} for _, p, patch in planned]
        result: dict[str, Any] = {
            "migration": name,
            "apply": apply,
            "changed": len(planned),
            "changes": changes[:PROBLEM_CAP],
            "backup": None,
        }
        if not apply or not planned:
            return result
        result["backup"] = str(self.write_backup(MIGRATIONS[name], progress))
        with _bar(len(planned), f"apply {name}", progress) as bar:
            for pid, _, patch in planned:
                self.store.set_payload([pid], patch)
                bar.update(1)
        self.store.flush()
        return result

    def write_backup(self, name: str, progress: bool = False) -> Path:
        """A full snapshot of every note payload, written atomically before a migration."""
        stamp = self.clock.now().strftime("%Y%m%dT%H%M%SZ")
        folder = self.home / "backups"
        path = folder / f"{name}-pre-migration-{stamp}.json"
        n = 1
        while path.exists():
            n += 1
            path = folder / f"{name}-pre-migration-{stamp}-{n}.json"
        with _bar(self._count(), "backup", progress) as bar:
            points = []
            for pt in self.note_points():
                points.append({"id": pt.id, "payload": pt.payload})
                bar.update(1)
        data = {
            "format": BACKUP_FORMAT,
            "version": 1,
            "name": name,
            "created": iso(self.clock.now()),
            "model": self.meta.model,
            "points": points,
        }
        _atomic_write(path, json.dumps(data, ensure_ascii=False))
        return path

    def restore_backup(self, path: str | Path, progress: bool = False) -> dict[str, Any]:
        """Put every payload of a backup back exactly; points it lacks are left alone."""
        path = Path(path).expanduser()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidArgument(f"cannot read backup {path}: {exc}", field="path") from exc
        if not isinstance(data, dict) or data.get("format") != BACKUP_FORMAT:
            raise InvalidArgument(f"{path} is not an opencode-brain backup", field="path")
        entries = data.get("points") or []
        restored = reembedded = 0
        with _bar(len(entries), "restore", progress) as bar:
            for i in range(0, len(entries), BATCH):
                batch = entries[i : i + BATCH]
                have = {
                    p.id: p
                    for p in self.store.retrieve([e["id"] for e in batch], with_vectors=True)
                }
                points = []
                for e in batch:
                    old = have.get(e["id"])
                    if old is not None and old.dense is not None:
                        points.append(Point(e["id"], e["payload"], old.dense, old.sparse))
                    else:
                        points.append(self._embedded(e["id"], e["payload"]))
                        reembedded += 1
                self.store.upsert(points)
                restored += len(points)
                bar.update(len(batch))
        self._rebuild_graph()
        # The payloads are back exactly, salience keys as they were (possibly none, or for
        # another half-life): the next decay pass checks them all (brain/memory/salience.py).
        self.meta.set(salience_half_life_days=None)
        return {"backup": str(path), "restored": restored, "reembedded": reembedded}

    def _embedded(self, pid: str, payload: dict[str, Any]) -> Point:
        return self._embed_batch([(pid, payload)])[0]

    def _embed_batch(self, items: list[tuple[str, dict[str, Any]]]) -> list[Point]:
        dense = self.memory.embed_notes(
            [{**p, "content": p.get("content") or ""} for _, p in items])
        out = []
        for (pid, p), vec in zip(items, dense, strict=True):
            sparse = self.bm25.document(
                keyword_text({**p, "content": p.get("content") or ""})
            )
            out.append(Point(pid, p, vec.tolist(), sparse))
        return out

    def _rebuild_graph(self) -> None:
        self.store.flush()
        self.meta.mark_graph_dirty()
        notes = (p.payload for p in self.note_points() if isinstance(p.payload.get("zk_id"), str))
        self.graph.rebuild(notes, self.meta.graph_seq)
        self.save_graph()

    # ------------------------------------------------------------------ export / import
    def export_jsonl(self, path: str | Path, progress: bool = False,
                     keep_free_mb: float = 0.0) -> dict[str, Any]:
        """Every note, link and counter as JSONL at ``path`` (written whole or not at all).
        ``keep_free_mb``: the export stops with DISK_FULL, its partial file removed, before
        the disk it writes to has less free (the brain's reserve, when it is the data dir's
        disk); an ENOSPC is DISK_FULL the same way, never an untyped error and a full disk."""
        path = Path(path).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        guard = SpaceGuard(path.parent, keep_free_mb) if keep_free_mb > 0 else None
        try:
            counts = self._export_to(tmp, progress, guard)
            os.replace(tmp, path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            if is_no_space(exc):
                raise disk_full("write the export", str(path)) from None
            raise
        return {"path": str(path), **counts}

    def _export_to(self, tmp: Path, progress: bool, guard: SpaceGuard | None
                   ) -> dict[str, Any]:
        retired_flt = Filter(must=(Match("kind", "retired"),))
        header = {
            "type": "header",
            "format": EXPORT_FORMAT,
            "version": 1,
            "exported": iso(self.clock.now()),
            "model": self.meta.model,
            "dimension": self.meta.dimension,
        }
        notes = retired = 0
        lines = 0

        def room() -> None:  # every 32 lines: the reserve stays free, or the export stops
            nonlocal lines
            lines += 1
            if guard is not None and lines % 32 == 0:
                guard.require("write the export")

        with open(tmp, "w", encoding="utf-8") as fh, _bar(self._count(), "export", progress) as bar:
            private_file(tmp)  # an export is the whole brain: owner-only wherever it goes
            if guard is not None:
                guard.require("write the export")
            fh.write(json.dumps(header) + "\n")
            for pt in self.note_points():
                fh.write(
                    json.dumps(
                        {"type": "note", "id": pt.id, "payload": pt.payload}, ensure_ascii=False
                    )
                    + "\n"
                )
                notes += 1
                bar.update(1)
                room()
            for pt in scroll_all(self.store, retired_flt):
                fh.write(json.dumps({"type": "retired", "id": pt.id, "payload": pt.payload}) + "\n")
                retired += 1
                room()
            extras: Counter[str] = Counter()
            if self.sources is not None and self.files is not None:
                for line in portable.export_records(self.sources, self.files):
                    fh.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
                    extras[line["type"]] += 1
                    room()
            fh.flush()
            os.fsync(fh.fileno())
        # HyPE questions are not exported: derived data, written again by the importing
        # brain's model (brain/memory/hype.py).
        return {"notes": notes, "retired": retired,
                "hype_skipped": hype.count(self.store),
                "sources": extras["source"], "documents": extras["document"],
                "jobs": extras["job"]}

    def _read_export(self, path: Path) -> Iterator[dict[str, Any]]:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as exc:
                    raise InvalidArgument(
                        f"{path}:{lineno} is not JSON ({exc}); nothing was imported", field="path"
                    ) from exc
                if lineno == 1:
                    if rec.get("type") != "header" or rec.get("format") != EXPORT_FORMAT:
                        raise InvalidArgument(
                            f"{path} is not an opencode-brain export "
                            "(missing header); nothing was imported",
                            field="path",
                        )
                    continue
                if isinstance(rec, dict) and rec.get("type") in portable.TYPES:
                    if not portable.valid(rec):
                        raise InvalidArgument(
                            f"{path}:{lineno} is not a valid {rec['type']} record; nothing "
                            "was imported", field="path")
                    yield rec
                    continue
                ok = (
                    isinstance(rec, dict)
                    and rec.get("type") in ("note", "retired")
                    and isinstance(rec.get("payload"), dict)
                    and isinstance(rec["payload"].get("zk_id"), str)
                )
                if not ok:
                    raise InvalidArgument(
                        f"{path}:{lineno} is not a note record; nothing was imported", field="path"
                    )
                yield rec

    def import_jsonl(
        self, path: str | Path, on_conflict: str = "error", progress: bool = False
    ) -> dict[str, Any]:
        """Import an export. Existing ids: ``error`` (default, before any write), ``skip`` or
        ``replace``."""
        if on_conflict not in ("error", "skip", "replace"):
            raise InvalidArgument("on_conflict must be error, skip or replace", field="on_conflict")
        path = Path(path).expanduser()
        if not path.is_file():
            raise InvalidArgument(f"no export file at {path}", field="path")
        # First pass: validate every line and find clashes before writing anything.
        total = 0
        clashes: list[str] = []
        batch: list[str] = []
        extras: list[dict[str, Any]] = []
        for rec in self._read_export(path):
            if rec["type"] in portable.TYPES:
                extras.append(rec)
                continue
            total += 1
            batch.append(
                rec["id"] if isinstance(rec.get("id"), str) else point_id(rec["payload"]["zk_id"])
            )
            if len(batch) >= 256:
                clashes += [p.payload.get("zk_id", p.id) for p in self.store.retrieve(batch)]
                batch = []
        clashes += [p.payload.get("zk_id", p.id) for p in self.store.retrieve(batch)]
        if clashes and on_conflict == "error":
            raise Conflict(
                f"{len(clashes)} ids of the export already exist here (e.g. "
                f"{clashes[0]}); import into an empty home, or pass on_conflict="
                "skip / replace (--on-conflict)",
                count=len(clashes),
            )
        skip = set(clashes) if on_conflict == "skip" else set()
        replaced = set(clashes) if on_conflict == "replace" else set()
        imported = skipped = 0
        pending: list[tuple[str, dict[str, Any]]] = []
        with _bar(total, "import", progress) as bar:
            for rec in self._read_export(path):
                if rec["type"] in portable.TYPES:
                    continue
                p = rec["payload"]
                pid = rec["id"] if isinstance(rec.get("id"), str) else point_id(p["zk_id"])
                bar.update(1)
                if p["zk_id"] in skip:
                    skipped += 1
                    continue
                if rec["type"] == "retired":
                    self.store.upsert([Point(pid, p)])
                    imported += 1
                    continue
                pending.append((pid, p))
                if len(pending) >= bulk.BATCH:
                    imported += self._import_batch(pending, replaced)
                    pending = []
            imported += self._import_batch(pending, replaced)
        self._rebuild_graph()
        hype_queued = self.requeue_hype() if imported else 0
        restored: dict[str, int] = {}
        if extras and self.sources is not None and self.files is not None:
            restored = portable.restore(extras, self.sources, self.files,
                                        replace=on_conflict == "replace")
        return {
            "path": str(path),
            "imported": imported,
            "skipped": skipped,
            "model": self.meta.model,
            "hype_queued": hype_queued,
            **restored,
        }

    def _import_batch(self, items: list[tuple[str, dict[str, Any]]], replaced: set[str]) -> int:
        """Write one batch of exported notes the way the bulk path does (brain/memory/bulk.py: one
        embedding call, one upsert under the write lock); ``replaced``: ids of the export
        that were already here."""
        if not items:
            return 0
        model = self.meta.model
        if self.memory.cfg.redact_secrets:  # an export of an older version may hold them
            items = [(pid, redact_tree(p)) for pid, p in items]
        # Re-embedded here with this home's model, so the stamp names it.
        # Salience keys are this store's (brain/memory/salience.py): its half-life may differ.
        items = [
            (pid, self.memory.keyed({**p, "embed_model": model} if "embed_model" in p else
                                    dict(p)))
            for pid, p in items
        ]
        # Embedded and keyword-indexed as notes with content (an old export may lack it);
        # stored as exported.
        filled = [{**p, "content": p.get("content") or ""} for _, p in items]
        points = bulk.note_points(self.memory, [pid for pid, _ in items], filled)
        bulk.write(self.memory, [Point(pt.id, p, pt.dense, pt.sparse)
                                 for pt, (_, p) in zip(points, items, strict=True)])
        # A replaced note's questions were about its old content; a new note has none.
        gone = [str(p["zk_id"]) for _, p in items if p["zk_id"] in replaced]
        if gone:
            hype.drop(self.store, gone)
        return len(items)

    # ------------------------------------------------------------------ weekly
    def weekly(self, apply: bool = False, progress: bool = False) -> dict[str, Any]:
        archive = self.decay.archive_stale_notes(dry_run=not apply, everyone=True)
        reclaim = self.decay.reclaim_forgotten() if apply else None
        health = self.check_health(progress)
        return {
            "apply": apply,
            "archive": archive,
            "reclamation": reclaim,
            "health": health,
            "stats": self.stats(),
            "ok": health["ok"],
        }
