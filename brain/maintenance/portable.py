"""What an export carries besides notes: sources, uploaded documents and pending work.

``brain export`` writes, after the notes and retired ids, one line per:

- ``source``: the source's record (root, filters, trigger, owner). Its vectors are not
  exported: the importing brain reads the folder again, so a source whose folder is not on
  the new machine is kept and reports the missing folder at its first sync.
- ``document``: the upload's record, its parsed (redacted) text, and its raw bytes
  (base64) when ``files.keep_raw`` kept them. The importing brain indexes it again.
- ``job``: a sync job the exporting brain had queued or running; the importing brain
  resumes it under its id.

Import restores them after the notes; an id that already exists is skipped (or, with
``on_conflict=replace``, replaced), like notes. The line shapes are checked in the first
pass, before anything is written.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from brain.files.service import FilesService
from brain.sources.registry import SourceRecord
from brain.sources.service import SourcesService

TYPES = ("source", "document", "job")
_DOC_KEYS = ("id", "user_id", "file_name", "content_hash", "project", "status")


def export_records(sources: SourcesService, files: FilesService) -> Iterator[dict[str, Any]]:
    """Every source, document and unfinished sync job, as export lines."""
    for rec in sources.registry.list():
        yield {"type": "source", "record": rec.to_dict()}
    for doc in files.records.list():
        line: dict[str, Any] = {"type": "document", "record": doc,
                                "text": files.texts.get(doc["id"])}
        if files.blobs.has(doc["storage_path"]):
            line["raw"] = base64.b64encode(files.blobs.read(doc["storage_path"])).decode()
        yield line
    for job in sources.registry.unfinished_jobs():
        yield {"type": "job", "record": job}


def valid(line: dict[str, Any]) -> bool:
    """Whether an export line of one of :data:`TYPES` has the shape import needs."""
    rec = line.get("record")
    if not isinstance(rec, dict):
        return False
    if line["type"] == "source":
        return all(isinstance(rec.get(k), str) and rec[k] for k in ("id", "name", "root"))
    if line["type"] == "document":
        text_ok = line.get("text") is None or isinstance(line["text"], dict)
        raw_ok = line.get("raw") is None or isinstance(line["raw"], str)
        return text_ok and raw_ok and all(isinstance(rec.get(k), str) for k in _DOC_KEYS)
    return all(isinstance(rec.get(k), str) for k in ("job_id", "source_id", "kind"))


def restore(lines: list[dict[str, Any]], sources: SourcesService, files: FilesService,
            replace: bool = False) -> dict[str, int]:
    """Restore checked export lines (sources first, then documents, then jobs)."""
    counts = {"sources": 0, "documents": 0, "jobs": 0, "extras_skipped": 0}
    order = {t: i for i, t in enumerate(TYPES)}
    for line in sorted(lines, key=lambda x: order[x["type"]]):
        rec = line["record"]
        if line["type"] == "source":
            if sources.registry.find(rec["id"]) is not None and not replace:
                counts["extras_skipped"] += 1
                continue
            restored = SourceRecord.from_dict({**rec, "state_complete": False})
            sources.registry.save(restored)
            sources.queue.submit(restored.id, restored.project, "sync", reason="import")
            counts["sources"] += 1
        elif line["type"] == "document":
            if files.records.get(rec["id"]) is not None and not replace:
                counts["extras_skipped"] += 1
                continue
            raw = base64.b64decode(line["raw"]) if line.get("raw") else None
            if files.restore(rec, line.get("text"), raw):
                counts["documents"] += 1
            else:
                counts["extras_skipped"] += 1
        else:
            known = sources.registry.load_job(rec["job_id"]) is not None  # already here
            if known or sources.registry.find(rec["source_id"]) is None:
                counts["extras_skipped"] += 1
                continue
            sources.queue.resume(rec)
            counts["jobs"] += 1
    return counts
