"""The diff phase of a run: what changed in each file, and the least work that catches up.

- a file whose size and mtime match the sync state is not read at all;
- a file whose content hash matches what the store holds only gets a payload refresh;
- a chunk whose hash the store already holds for this path (any index: an insertion at
  the top shifts indexes) keeps its vector, copied with ``retrieve(with_vectors)``;
- a new file whose content hash matches another indexed file of the source (a rename or
  a copy) takes every vector from it: 0 chunks embedded;
- a .jsonl/.ndjson file whose stored text is an exact prefix of the new text (checked by
  hashing that prefix) embeds only the new tail.

Everything else is read, redacted, chunked and handed to the writer for its vectors.
"""

from __future__ import annotations

from brain.sources.categories import categorize, manifest_fields
from brain.sources.filters import holds_credentials
from brain.sources.points import (
    HEAD_CHARS,
    Old,
    Work,
    chunk_point_id,
    file_point_id,
    file_state,
    sha,
    tags_of,
)
from brain.sources.run import Run
from brain.sources.walker import (
    APPEND_SUFFIXES,
    MAX_APPEND_FILE_BYTES,
    FileEntry,
    read_text_capped,
)
from brain.sources.writer import Writer
from brain.trust import tenancy
from brain.trust.redact import redact
from brain.vector_store import Filter, Match, MatchAny, scroll_all

_GROUP = 64  # files whose old state is looked up at once


class Changes:
    def __init__(self, run: Run, writer: Writer) -> None:
        self.run = run
        self.writer = writer

    def index(self, entries: list[FileEntry]) -> None:
        run = self.run
        run.progress.update(
            phase="index",
            files_total=len(entries),
            files_done=0,
            chunks_embedded=0,
            chunks_reused=0,
        )
        force = run.mode == "reembed"
        for start in range(0, len(entries), _GROUP):
            if run.cancelled():
                return
            group = entries[start : start + _GROUP]
            todo = [e for e in group if force or run.mode == "rescan" or not self._unchanged(e)]
            run.stats.files_unchanged += len(group) - len(todo)
            olds = self._olds([e.rel for e in todo])
            for entry in todo:
                if run.cancelled():
                    return
                run.ix.pause()  # tool calls first: a file's read and chunking is work too
                self._prepare(entry, olds.get(entry.rel), force)
                if self.writer.full():
                    self.writer.flush()
            run.progress["files_done"] = start + len(group)
        self.writer.flush()

    def _unchanged(self, e: FileEntry) -> bool:
        st = self.run.states.get(e.rel)
        return (
            st is not None
            and st.size == e.size
            and st.mtime_ns == e.mtime_ns
            and st.embed_model == self.run.ix.model_id
        )

    def _olds(self, rels: list[str]) -> dict[str, Old]:
        out: dict[str, Old] = {}
        missing = []
        for rel in rels:
            st = self.run.states.get(rel)
            if st is not None:
                out[rel] = Old(
                    st.content_hash,
                    st.text_len,
                    st.n_chunks,
                    st.created_ts,
                    st.embed_model,
                    st.size,
                    st.mtime_ns,
                )
            else:
                missing.append(rel)
        if missing:
            ids = [file_point_id(self.run.rec.id, r) for r in missing]
            for p in self.run.ix.store.retrieve(ids):
                pl = p.payload
                out[str(pl["path"])] = Old(
                    str(pl.get("content_hash", "")),
                    int(pl.get("text_len", 0)),
                    int(pl.get("n_chunks", 0)),
                    float(pl.get("created_ts", 0.0)),
                    str(pl.get("embed_model", "")),
                )
        return out

    def _read(self, entry: FileEntry) -> str | None:
        limit = MAX_APPEND_FILE_BYTES if entry.rel.endswith(APPEND_SUFFIXES) else HEAD_CHARS
        try:
            text, _ = read_text_capped(entry.path, limit, root=self.run.root)
        except OSError:
            return None
        return text

    def _prepare(self, entry: FileEntry, old: Old | None, force: bool) -> None:
        run = self.run
        text = self._read(entry)
        if text is not None and holds_credentials(entry.rel, text):
            text = None  # a credential file under an innocent name: never indexed
        if text is not None:
            # Everything stored for a file (chunks, head, hashes, offsets) is of the redacted
            # text; keep_lines keeps line numbers true to the file on disk.
            text = redact(text, keep_lines=True).text
        if text is None:
            run.stats.files_unindexed += 1
            if old is not None:  # now binary or unreadable: its old text is stale
                self.writer.delete({entry.rel})
            return
        content_hash = sha(text)
        category, capture = categorize(entry.rel, text)
        work = Work(
            entry,
            text,
            content_hash,
            category,
            capture,
            tags_of(entry.rel, text),
            old.created_ts if old and old.created_ts else entry.mtime_ns / 1e9,
        )
        work.old_n = old.n_chunks if old else 0
        same_model = old is not None and old.embed_model == run.ix.model_id
        if not force and same_model and old is not None and old.content_hash == content_hash:
            return self._refresh(work, old)
        if not text.strip():
            return self.writer.write([work])
        if not force and same_model and old is not None and self._try_append(work, old):
            return
        donor = None if force else self._donor(entry.rel, content_hash)
        work.pieces = run.ix.chunk(text)
        if not force and (old is not None or donor is not None):
            self._reuse(work, [entry.rel] + ([donor] if donor else []))
        if donor is not None and all(p.vector is not None for p in work.pieces):
            work.kind = "renamed"
        self.writer.queue(work)

    def _refresh(self, work: Work, old: Old) -> None:
        """Content unchanged: refresh the payload only (mtime, size, category)."""
        run, e = self.run, work.entry
        ids = [file_point_id(run.rec.id, e.rel)]
        ids += [chunk_point_id(run.rec.id, e.rel, i) for i in range(old.n_chunks)]
        # Fields derived after a file was first indexed (the agent-core owner marker, a
        # manifest's usability flag) reach it here, with no re-embedding.
        marker = {**tenancy.path_fields(e.rel), **manifest_fields(e.rel, work.text)}
        if old.size != e.size or old.mtime_ns != e.mtime_ns or marker:
            if len(run.ix.store.retrieve(ids)) < len(ids):
                # The store lost this file's points (a crash, a GC) while its state says
                # indexed: index it again rather than update what is not there.
                work.pieces = run.ix.chunk(work.text)
                self.writer.queue(work)
                return
            run.ix.store.set_payload(
                ids,
                {
                    "mtime_ns": e.mtime_ns,
                    "size": e.size,
                    "updated_ts": e.mtime_ns / 1e9,
                    "category": work.category,
                    "tags": work.tags,
                    "frontmatter": work.capture,
                    **marker,
                },
            )
        run.stats.files_refreshed += 1
        state = file_state(work, len(work.text), old.n_chunks, run.ix.model_id)
        run.ix.registry.put_states(run.rec.id, [state])

    def _try_append(self, work: Work, old: Old) -> bool:
        rel, text, ix = work.entry.rel, work.text, self.run.ix
        if not rel.endswith(APPEND_SUFFIXES) or not 0 < old.text_len < len(text):
            return False
        if old.n_chunks < 1 or sha(text[: old.text_len]) != old.content_hash:
            return False
        head = ix.store.retrieve([file_point_id(self.run.rec.id, rel)], with_vectors=True)
        if not head or head[0].dense is None:
            return False
        work.file_vector = head[0].dense
        lines = text.count("\n", 0, old.text_len)
        work.pieces = ix.chunk(text[old.text_len :], old.text_len, old.n_chunks, lines)
        work.keep_below = old.n_chunks
        work.kind = "appended"
        self.writer.queue(work)
        return True

    def _donor(self, rel: str, content_hash: str) -> str | None:
        flt = Filter(
            must=(
                Match("kind", "file"),
                Match("source_id", self.run.rec.id),
                Match("content_hash", content_hash),
                Match("embed_model", self.run.ix.model_id),
            ),
            must_not=(Match("path", rel),),
        )
        points, _ = self.run.ix.store.scroll(flt, limit=1)
        return str(points[0].payload["path"]) if points else None

    def _reuse(self, work: Work, paths: list[str]) -> None:
        by_hash: dict[str, list[float]] = {}
        hashes = tuple({p.hash for p in work.pieces})
        flt = Filter(
            must=(
                Match("kind", "chunk"),
                Match("source_id", self.run.rec.id),
                MatchAny("path", tuple(paths)),
                Match("embed_model", self.run.ix.model_id),
                MatchAny("chunk_hash", hashes),
            )
        )
        for p in scroll_all(self.run.ix.store, flt, with_vectors=True):
            if p.dense is not None:
                by_hash.setdefault(str(p.payload.get("chunk_hash")), p.dense)
        for piece in work.pieces:
            piece.vector = by_hash.get(piece.hash)
