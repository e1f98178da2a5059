"""Runs INSIDE mcp-memory-service's own virtualenv (bench/peer.py starts it with ``python -I``):
fills the peer's store through its bulk path and says which embedder it loaded.

    PEER_PYTHON -I bench/peer_fill.py NOTES_JSONL OUT_JSON [VECTORS_F32]

The store is the one the peer's settings name (``MCP_MEMORY_SQLITE_PATH``, set by
bench/peer.py); it is created by the peer's own factory (``create_storage_instance``, as its
server does) and filled with ``store_batch`` (batched embedding in one transaction per batch:
the peer's bulk path, used by its consolidator; it skips the semantic-dedup check a
``memory_store`` call makes). OUT_JSON gets the embedder's class, the stored count and the
vectors of a few probe texts, so the bench can check they match ours. With VECTORS_F32 (raw
float32 rows, one per note, from bench/vector_cache.py: the same model's vectors, which the
probes check), the notes' vectors are taken from it instead of being embedded again, as the
speed bench does for ours at scale; everything else store_batch does is unchanged. Only the
standard library, numpy and mcp_memory_service are imported: this file never sees the
project's packages. A note row may carry ``created_at`` (epoch seconds): the note is dated so.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

BATCH = 256


async def fill(notes: list[str], probes: list[str], vectors: Any = None,
               created: dict[int, float] | None = None) -> dict[str, Any]:
    from mcp_memory_service.config import SQLITE_VEC_PATH
    from mcp_memory_service.models.memory import Memory
    from mcp_memory_service.storage.factory import create_storage_instance
    from mcp_memory_service.utils.hashing import generate_content_hash

    storage: Any = await create_storage_instance(SQLITE_VEC_PATH)
    model = storage.embedding_model
    out: dict[str, Any] = {"db": SQLITE_VEC_PATH, "embedder": type(model).__name__,
                           "model_dir": str(getattr(model, "_model_dir", ""))}
    t = time.perf_counter()
    stored = refused = 0
    first_error = ""
    for start in range(0, len(notes), BATCH):
        chunk = [Memory(content=c, content_hash=generate_content_hash(c), tags=[],
                        memory_type="note", created_at=(created or {}).get(start + i))
                 for i, c in enumerate(notes[start:start + BATCH])]
        if vectors is not None:
            rows = vectors[start:start + len(chunk)]
            model.encode = lambda texts, rows=rows, **_: rows
        for ok, msg in await storage.store_batch(chunk):
            stored += bool(ok)
            refused += not ok
            if not ok and not first_error:
                first_error = str(msg)
    out.update(stored=stored, refused=refused, first_error=first_error,
               fill_s=round(time.perf_counter() - t, 2))
    if vectors is not None:
        del model.encode  # the model's own method again, for the probes
    out["vectors"] = "cache" if vectors is not None else "embedded by the peer"
    out["probe_vectors"] = [[float(x) for x in v] for v in model.encode(probes)]
    await storage.close()
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in Path(argv[0]).read_text(encoding="utf-8").splitlines()]
    notes = [r["content"] for r in rows if r.get("kind") == "note"]
    created = {i: r["created_at"] for i, r in enumerate(r for r in rows if r.get("kind") == "note")
               if r.get("created_at") is not None}
    probes = [r["content"] for r in rows if r.get("kind") == "probe"]
    vectors = None
    if len(argv) == 3:
        import numpy as np

        vectors = np.fromfile(argv[2], dtype=np.float32).reshape(len(notes), -1)
    result = asyncio.run(fill(notes, probes, vectors, created))
    Path(argv[1]).write_text(json.dumps(result) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
