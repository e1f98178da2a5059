"""fs_read, fs_list and fs_write over registered sources: the live disk first, the index second.

Reads and listings take content and the tree from the disk even when the index is cold,
then say for each file how the index stands (its *presence*):

- ``synced``: on disk, and the index holds the same content (content hashes agree);
- ``unindexed``: on disk, not in the index (not synced yet, or binary: never indexed);
- ``stale_indexed``: in the index, but the file changed on disk or is gone from it;
- ``brain``: only the index has it (vector only): the source's filters no longer admit
  the path, so no sync will read it again; fs_read returns the indexed copy;
- ``unknown``: the index could not be asked (the listing still comes from the disk).

The hash compared is the indexer's own (brain/sources/changes.py): the text capped as the
sync caps it, redacted, sha'd, so a file is ``synced`` exactly when a sync would skip it.

Every path goes through the source's filters and the credential floor as a sync would: a
credential file is refused (PATH_EXCLUDED) and never listed; what is returned is redacted.
A path that climbs out of the source, or leads out through a link, is PATH_OUTSIDE_SOURCE.

fs_write writes inside a source (never through a link, never a path the sync would skip),
records the change in the journal (brain/sources/journal.py) with the bytes it replaced,
and indexes the file inline through the sync queue's targeted path, so the file is
searchable when the call returns. The review side (approve / revert) is review.py.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.clock import Clock, iso
from brain.errors import (
    BrainError,
    DiskFull,
    FileNotFound,
    FileTooLarge,
    Forbidden,
    InvalidArgument,
    PathExcluded,
    PathOutsideSource,
)
from brain.sources.filters import (
    SourceFilter,
    file_holds_credentials,
    holds_credentials,
    is_secret_path,
)
from brain.sources.journal import Change, ChangeJournal, digest, new_change_id
from brain.sources.points import HEAD_CHARS, file_point_id, sha
from brain.sources.registry import FileState, SourceRecord
from brain.sources.service import SourcesService
from brain.sources.walker import (
    APPEND_SUFFIXES,
    MAX_APPEND_FILE_BYTES,
    FileEntry,
    entry_for,
    open_beneath,
    size_cap,
    target_rel,
)
from brain.trust import tenancy
from brain.trust.redact import redact
from brain.vector_store import Filter, Match, Point

MAX_PATH_CHARS = 4096
_SNIFF = 8192
_INDEX_SCAN_CAP = 2_000  # file points scanned by a listing whose sync state is not trusted


@dataclass(frozen=True, slots=True)
class FsConfig:
    max_read_bytes: int = 262_144
    max_write_bytes: int = 1_048_576
    list_limit: int = 1000
    index_timeout_s: float = 30.0


@dataclass(frozen=True, slots=True)
class Located:
    rec: SourceRecord
    rel: str  # "" for the root
    flt: SourceFilter

    @property
    def root(self) -> Path:
        return Path(self.rec.root)

    @property
    def full(self) -> Path:
        return self.root / self.rel if self.rel else self.root


def index_hash(rel: str, text: str) -> str:
    """The content hash a sync stores for a file of this text (changes.py's rule)."""
    limit = MAX_APPEND_FILE_BYTES if rel.endswith(APPEND_SUFFIXES) else HEAD_CHARS
    return sha(redact(text[:limit], keep_lines=True).text)


def decode(data: bytes) -> str | None:
    """Text as the sync decodes it; None for a binary (a NUL in the first 8 KB)."""
    if b"\0" in data[:_SNIFF]:
        return None
    return data.decode("utf-8-sig", errors="replace")


def clean_rel(path: str, root: str) -> str:
    """``path`` (relative, or absolute under ``root``) as a POSIX path relative to the root.
    Refuses ``..`` and ``.`` steps and anything outside, without touching the disk."""
    if not isinstance(path, str) or len(path) > MAX_PATH_CHARS or "\0" in path:
        raise InvalidArgument(
            f"a path must be text of at most {MAX_PATH_CHARS} characters without NUL.",
            field="path",
        )
    raw = path.strip()
    if os.path.isabs(raw):
        if raw.rstrip("/") == root:
            return ""
        if not raw.startswith(root.rstrip("/") + "/"):
            raise PathOutsideSource(
                f"{path} is outside the source folder {root}; pass a path inside it "
                "(relative to the source root).",
                path=path,
                root=root,
            )
        raw = raw[len(root.rstrip("/")) + 1 :]
    parts = [p for p in raw.replace("\\", "/").split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise PathOutsideSource(
            f"{path} uses '.' or '..' steps; pass a plain path inside the source.",
            path=path,
            root=root,
        )
    return "/".join(parts)


@contextlib.contextmanager
def os_errors(rel: str) -> Iterator[None]:
    """An OS refusal (a full disk, a name too long, no permission) as a typed error."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(
                f"no space left to write {rel}; free some disk space and retry.", path=rel
            ) from None
        raise InvalidArgument(
            f"{rel or 'the path'} could not be used ({exc.strerror or type(exc).__name__}); "
            "pick a shorter, readable or writable path inside the source.",
            path=rel,
        ) from None


class FsService:
    """The file view of sources: read, list and write with the index's presence."""

    def __init__(
        self, sources: SourcesService, journal: ChangeJournal, clock: Clock, cfg: FsConfig
    ) -> None:
        self.sources = sources
        self.journal = journal
        self.clock = clock
        self.cfg = cfg

    # ------------------------------------------------------------------ locating
    def locate(self, source: str, path: str) -> Located:
        rec = self.sources.get(source)  # SOURCE_NOT_FOUND for what the caller may not see
        self.sources.paths.check_source(rec.root)
        flt = SourceFilter(Path(rec.root), rec.exclude, rec.include, rec.use_gitignore)
        rel = clean_rel(path, rec.root)
        if rel and not tenancy.path_readable(rel, self.sources.caller):
            raise Forbidden(f"{rel} is in another agent's private subtree (agent-core/<agent>/);"
                            " only that agent reads or writes it.", path=rel)
        return Located(rec, rel, flt)

    def _readable(self, loc: Located, name: str) -> bool:
        return tenancy.path_readable(f"{loc.rel}/{name}" if loc.rel else name,
                                     self.sources.caller)

    def _check_file(self, loc: Located) -> None:
        """A file path the sync could read: inside, through no link out, admitted."""
        if not loc.rel:
            raise InvalidArgument("the path names the source root; name a file in it.")
        if is_secret_path(loc.rel):
            raise PathExcluded(
                f"{loc.rel} is a credential file or store, which is never read or written "
                "through the brain; open it yourself if you must.",
                path=loc.rel,
            )
        if os.path.lexists(loc.full) and target_rel(loc.root, loc.rel) is None:
            raise PathOutsideSource(
                f"{loc.rel} leads outside the source {loc.rec.name!r} through a link; "
                "name the file inside the source instead.",
                path=loc.rel,
            )

    def _excluded(self, loc: Located) -> PathExcluded:
        return PathExcluded(
            f"{loc.rel} is excluded by the filters of source {loc.rec.name!r} (its exclude "
            "rules, .gitignore or built-in excludes); change them with 'brain source update' "
            "(the sources tool's update action).",
            path=loc.rel,
        )

    # ------------------------------------------------------------------ index side
    def _points(self, rec: SourceRecord, rels: builtins.list[str]) -> dict[str, Point]:
        out: dict[str, Point] = {}
        for i in range(0, len(rels), 256):
            ids = [file_point_id(rec.id, r) for r in rels[i : i + 256]]
            for p in self.sources.store.retrieve(ids):
                out[str(p.payload.get("path"))] = p
        return out

    def _index_side(
        self, loc: Located, disk_files: dict[str, FileEntry], states: dict[str, FileState]
    ) -> tuple[dict[str, Point], set[str]]:
        """The index's files directly in the folder (by name) and its subfolders.

        The sync state names what the store holds, so its points are fetched by id: a
        listing reads O(entries) points, never a source's whole index. Only when the state
        is not trusted (a reset, an interrupted run) is the store scanned too, bounded."""
        prefix = loc.rel + "/" if loc.rel else ""
        rels = {prefix + n for n in disk_files}
        dirs: set[str] = set()
        for rel in states:
            if rel.startswith(prefix):
                rest = rel[len(prefix) :]
                if "/" in rest:
                    dirs.add(rest.split("/", 1)[0])
                else:
                    rels.add(rel)
        found = self._points(loc.rec, sorted(rels))
        if not loc.rec.state_complete:
            found.update(self._scan_index(loc.rec, loc.rel))
        here: dict[str, Point] = {}
        for rel, p in found.items():
            if not rel.startswith(prefix) or is_secret_path(rel):
                continue
            rest = rel[len(prefix) :]
            if "/" in rest:
                dirs.add(rest.split("/", 1)[0])
            else:
                here[rest] = p
        return here, {d for d in dirs if not is_secret_path(prefix + d)}

    def _scan_index(self, rec: SourceRecord, folder: str) -> dict[str, Point]:
        must: tuple[Match, ...] = (Match("kind", "file"), Match("source_id", rec.id))
        if folder:
            must += (Match("dirs", folder),)
        out: dict[str, Point] = {}
        offset: str | None = None
        while len(out) < _INDEX_SCAN_CAP:
            page, offset = self.sources.store.scroll(Filter(must=must), limit=256, offset=offset)
            for p in page:
                out[str(p.payload.get("path"))] = p
            if offset is None:
                break
        return out

    # ------------------------------------------------------------------ disk side
    def _read_bytes(self, loc: Located, cap: int,
                    why: str = "the most fs_read returns; search inside it with fs_search "
                               "(grep mode gives the matching lines).") -> bytes:
        """The file's bytes, through no link out; FILE_TOO_LARGE (saying ``why``) beyond
        ``cap``."""
        with open_beneath(loc.root, loc.rel) as fh:
            data = fh.read(cap + 1)
        if len(data) > cap:
            raise FileTooLarge(f"{loc.rel} is larger than {cap} bytes, {why}", path=loc.rel,
                               cap=cap)
        return data

    def _disk_hash(self, root: Path, entry: FileEntry) -> str | None:
        """The index hash of a file on disk; None when a sync would not index it."""
        try:
            with open_beneath(root, entry.rel) as fh:
                text = decode(fh.read(size_cap(entry.rel) + 1))
        except OSError:
            return None
        if text is None or holds_credentials(entry.rel, text):
            return None
        return index_hash(entry.rel, text)

    # ------------------------------------------------------------------ fs_read
    def read(self, source: str, path: str) -> dict[str, Any]:
        with os_errors(path):
            return self._read(source, path)

    def _read(self, source: str, path: str) -> dict[str, Any]:
        loc = self.locate(source, path)
        self._check_file(loc)
        base: dict[str, Any] = {"source": loc.rec.name, "path": loc.rel}
        point, index_state = self._point_of(loc)
        entry = entry_for(loc.root, loc.rel, loc.flt)
        if isinstance(entry, FileEntry):
            return {**base, **self._read_disk(loc, point), "index": index_state}
        if point is not None:  # not on disk (or not admitted): the index's copy
            admitted = loc.flt.admits(loc.rel)
            presence = "stale_indexed" if admitted else "brain"
            pl = point.payload
            return {**base, "from": "index", "presence": presence, "index": index_state,
                    "content": str(pl.get("content", "")), "truncated": bool(pl.get("truncated")),
                    "size": pl.get("size"), "content_hash": pl.get("content_hash")}
        if entry == "dir":
            raise InvalidArgument(f"{loc.rel} is a folder; list it with fs(action='list').",
                                  path=loc.rel)
        if os.path.isfile(loc.full) and not loc.flt.admits(loc.rel):
            raise self._excluded(loc)
        raise FileNotFound(
            f"no file {loc.rel!r} in source {loc.rec.name!r}, on disk or in the index; "
            "list the folder with fs(action='list').",
            path=loc.rel,
        )

    def _point_of(self, loc: Located) -> tuple[Point | None, str]:
        try:
            return self._points(loc.rec, [loc.rel]).get(loc.rel), "ok"
        except (BrainError, OSError, RuntimeError) as exc:
            return None, f"unreachable: {type(exc).__name__}"

    def _read_disk(self, loc: Located, point: Point | None) -> dict[str, Any]:
        data = self._read_bytes(loc, self.cfg.max_read_bytes)
        text = decode(data)
        out: dict[str, Any] = {"from": "disk", "size": len(data), "sha256": digest(data)}
        if text is None:
            presence = "stale_indexed" if point is not None else "unindexed"
            return {**out, "binary": True, "content": None, "presence": presence}
        if holds_credentials(loc.rel, text):
            raise PathExcluded(
                f"{loc.rel} holds a credential (a service-account key), which is never read "
                "through the brain.",
                path=loc.rel,
            )
        red = redact(text, keep_lines=True)
        h = index_hash(loc.rel, text)
        presence = "unindexed"
        if point is not None:
            presence = "synced" if point.payload.get("content_hash") == h else "stale_indexed"
        return {**out, "binary": False, "content": red.text, "redacted": list(red.kinds),
                "presence": presence, "content_hash": h}

    # ------------------------------------------------------------------ fs_list
    def list(self, source: str, folder: str = "", limit: int | None = None) -> dict[str, Any]:
        with os_errors(folder):
            return self._list(source, folder, limit)

    def _list(self, source: str, folder: str, limit: int | None) -> dict[str, Any]:
        loc = self.locate(source, folder or "")
        cap = min(limit or self.cfg.list_limit, self.cfg.list_limit)
        if loc.rel:
            self._check_folder(loc)
        disk_files, disk_dirs = self._scan(loc)
        states = self.sources.registry.file_states(loc.rec.id)
        here: dict[str, Point] = {}
        index_dirs: set[str] = set()
        index_state = "ok"
        try:
            here, index_dirs = self._index_side(loc, disk_files, states)
        except (BrainError, OSError, RuntimeError) as exc:
            index_state = f"unreachable: {type(exc).__name__}"
        # Another agent's private subtree is silently absent (tenancy.py).
        disk_files = {n: e for n, e in disk_files.items() if self._readable(loc, n)}
        here = {n: p for n, p in here.items() if self._readable(loc, n)}
        disk_dirs = {d for d in disk_dirs if self._readable(loc, d)}
        index_dirs = {d for d in index_dirs if self._readable(loc, d)}
        entries = [
            *self._dir_rows(disk_dirs, index_dirs),
            *(self._file_row(loc, name, disk_files.get(name), here.get(name), states,
                             index_state)
              for name in sorted(set(disk_files) | set(here))),
        ]
        if loc.rel and not entries and not os.path.isdir(loc.full):
            raise FileNotFound(
                f"no folder {loc.rel!r} in source {loc.rec.name!r}, on disk or in the index; "
                "list its parent with fs(action='list').",
                path=loc.rel,
            )
        entries.sort(key=lambda e: (e["type"] != "dir", e["name"]))
        return {"source": loc.rec.name, "folder": loc.rel, "index": index_state,
                "entries": entries[:cap], "count": min(len(entries), cap),
                "truncated": len(entries) > cap}

    def _check_folder(self, loc: Located) -> None:
        if is_secret_path(loc.rel) or loc.flt.is_excluded_dir(loc.rel):
            raise PathExcluded(
                f"{loc.rel} is a folder the source's filters keep out; list another one.",
                path=loc.rel,
            )
        real = os.path.realpath(loc.full)
        if real != os.path.join(os.path.realpath(loc.root), loc.rel):
            raise PathOutsideSource(
                f"{loc.rel} leads outside the source through a link; list the real folder.",
                path=loc.rel,
            )

    def _scan(self, loc: Located) -> tuple[dict[str, FileEntry], set[str]]:
        files: dict[str, FileEntry] = {}
        dirs: set[str] = set()
        try:
            it = os.scandir(loc.full)
        except FileNotFoundError:
            return files, dirs
        except NotADirectoryError as exc:
            raise InvalidArgument(f"{loc.rel} is a file; read it with fs(action='read').") from exc
        with it:
            for de in it:
                rel = f"{loc.rel}/{de.name}" if loc.rel else de.name
                if is_secret_path(rel):
                    continue
                got = entry_for(loc.root, rel, loc.flt)
                if got == "dir" and not de.is_symlink():
                    dirs.add(de.name)
                elif isinstance(got, FileEntry) and not file_holds_credentials(got.path, rel):
                    files[de.name] = got
        return files, dirs

    @staticmethod
    def _dir_rows(disk_dirs: set[str], index_dirs: set[str]) -> builtins.list[dict[str, Any]]:
        out: builtins.list[dict[str, Any]] = []
        for name in sorted(disk_dirs | index_dirs):
            row: dict[str, Any] = {"name": name, "type": "dir", "on_disk": name in disk_dirs}
            if name not in disk_dirs:
                row["presence"] = "stale_indexed"  # only the index still holds files there
            out.append(row)
        return out

    def _file_row(
        self, loc: Located, name: str, entry: FileEntry | None, point: Point | None,
        states: dict[str, FileState], index_state: str,
    ) -> dict[str, Any]:
        rel = f"{loc.rel}/{name}" if loc.rel else name
        row: dict[str, Any] = {"name": name, "path": rel, "type": "file",
                               "on_disk": entry is not None}
        if entry is not None:
            row["size"], row["mtime_ns"] = entry.size, entry.mtime_ns
        if index_state != "ok":
            row["presence"] = "unknown"
        elif entry is None:
            row["presence"] = "stale_indexed" if loc.flt.admits(rel) else "brain"
        elif point is None:
            row["presence"] = "unindexed"
        else:
            stored = point.payload.get("content_hash")
            st = states.get(rel)
            if st is not None and (st.size, st.mtime_ns, st.content_hash) == (
                entry.size, entry.mtime_ns, stored
            ):
                row["presence"] = "synced"  # what the sync saw, untouched since: no read
            else:
                same = self._disk_hash(loc.root, entry) == stored
                row["presence"] = "synced" if same else "stale_indexed"
        return row

    # ------------------------------------------------------------------ fs_write
    def write(self, source: str, path: str, content: str) -> dict[str, Any]:
        with os_errors(path):
            return self._write(source, path, content)

    def _write(self, source: str, path: str, content: str) -> dict[str, Any]:
        loc = self.locate(source, path)
        self._check_file(loc)
        size = len(content.encode("utf-8", "surrogatepass"))
        if size > self.cfg.max_write_bytes:
            raise FileTooLarge(
                f"content is {size} bytes, more than fs(action='write')'s cap of "
                f"{self.cfg.max_write_bytes} (BRAIN__FS__MAX_WRITE_BYTES); write a smaller file.",
                size=size,
                cap=self.cfg.max_write_bytes,
            )
        if not loc.flt.admits(loc.rel):
            raise self._excluded(loc)
        self._real_folders(loc, create=False)  # before anything is written, blobs included
        if holds_credentials(loc.rel, content):
            raise PathExcluded(
                f"the content for {loc.rel} is a credential (a service-account key); the brain "
                "never writes, journals or indexes one.",
                path=loc.rel,
            )
        red = redact(content, keep_lines=True)
        data = red.text.encode("utf-8", "surrogatepass")
        before = self._previous(loc)
        if before is not None and before == data:
            return {"source": loc.rec.name, "path": loc.rel, "changed": False, "change": None,
                    **self.index_now(loc)}
        change = self._journal(loc, data, before)
        self.put_bytes(loc, data)
        self.journal.record(change)
        return {"source": loc.rec.name, "path": loc.rel, "changed": True,
                "change": change.to_dict(), "redacted": list(red.kinds), **self.index_now(loc)}

    def _previous(self, loc: Located) -> bytes | None:
        """The bytes the write replaces; None when the path holds nothing."""
        try:
            st = os.lstat(loc.full)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
            raise InvalidArgument(
                f"{loc.rel} is a link or not a regular file; fs(action='write') replaces "
                "only plain files (write the link's target by its own path).",
                path=loc.rel,
            )
        return self._read_bytes(loc, size_cap(loc.rel), "more than a source indexes; "
                                "fs(action='write') does not replace it.")

    def _journal(self, loc: Located, data: bytes, before: bytes | None) -> Change:
        who = self.sources.caller
        baseline_sha, kept, note = None, False, ""
        if before is not None:
            baseline_sha = digest(before)
            note = self._unsafe_baseline(loc.rel, before)
            if not note:
                self.journal.put_blob(before)
                kept = True
        snapshot_sha = self.journal.put_blob(data)
        return Change(
            id=new_change_id(), source_id=loc.rec.id, path=loc.rel,
            kind="create" if before is None else "modify", created=iso(self.clock.now()),
            user_id=who.user_id, agent_id=who.agent_id, visibility=loc.rec.visibility,
            snapshot_sha=snapshot_sha, snapshot_size=len(data), baseline_sha=baseline_sha,
            baseline_kept=kept, baseline_note=note,
        )  # fmt: skip

    @staticmethod
    def _unsafe_baseline(rel: str, before: bytes) -> str:
        """Why the replaced bytes may not be kept in the journal ('' when they may)."""
        text = decode(before)
        if text is None:
            return "binary content is not kept (it cannot be checked for credentials)"
        if holds_credentials(rel, text) or redact(text).count:
            return "it held a credential, which the journal never stores"
        return ""

    def put_bytes(self, loc: Located, data: bytes) -> None:
        """Write ``data`` at the path atomically (temp file + rename), creating folders,
        never through a link: each folder on the way is checked after it exists."""
        with os_errors(loc.rel):
            self._put_bytes(loc, data)

    @staticmethod
    def _real_folders(loc: Located, *, create: bool) -> None:
        """Every folder on the way is a real folder (no link), created when ``create``."""
        folder = loc.root
        for part in loc.rel.split("/")[:-1]:
            folder = folder / part
            if create:
                with contextlib.suppress(FileExistsError):
                    folder.mkdir()
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                raise PathOutsideSource(
                    f"{loc.rel} goes through {folder.name}, a link or not a folder; write "
                    "to a path of real folders inside the source.",
                    path=loc.rel,
                )
            if not folder.exists():
                return  # nothing further down exists yet

    def _put_bytes(self, loc: Located, data: bytes) -> None:
        self._real_folders(loc, create=True)
        if target_rel(loc.root, loc.rel) is None:
            raise PathOutsideSource(f"{loc.rel} leads outside the source.", path=loc.rel)
        mode = None
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(os.lstat(loc.full).st_mode)
        tmp = loc.full.with_name(f".{loc.full.name}.brain-{new_change_id()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode or 0o644)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, loc.full)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def index_now(self, loc: Located) -> dict[str, Any]:
        """Index the one file through the sync queue (one job per source at a time) and
        wait for it, so the file is searchable when the tool returns."""
        job = self.sources.queue.submit(
            loc.rec.id, loc.rec.project, "targeted", paths={loc.rel}, reason="fs_write"
        )
        job.done.wait(self.cfg.index_timeout_s)
        return {"indexed": job.status == "done", "job_id": job.id, "job_status": job.status}
