"""CitationService: notes that know the code they cite, and whether it has changed since.

- Write time (:meth:`attach`, :meth:`reanchor`): a note's citations are gathered from the
  caller (``cites``; ``key_files``, kept when they resolve), from its text (detect.py) and
  from the files the agent read or edited in the turn (turns.py), resolved against the
  sources the caller may see, and anchored (anchor.py): span, hash, commit, blob.
- Index time (:meth:`files_changed`, the source indexer's callback): the notes citing the
  changed files, found through the ``cite_keys`` payload index (the path -> notes index),
  are checked again; no other note is read or written (``counters``).
- Read time (:meth:`demote`, :meth:`refresh`): a hit whose cited file's size or mtime moved
  since its last check is checked again first, so an edit the index has not seen yet still
  shows; changed and gone notes then rank below equal fresh ones (model.RANK_PENALTY).
- :meth:`verify` (the verify_note tool) shows each span then and now; :meth:`changed_since`
  names the notes citing files git reports changed since a ref.
- Branches (``branches``, brain/citations/branches.py): a note citing code, or written in a
  hook turn, on a branch other than the default stays on that branch until it merges.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.citation import (
    MAX_CITES,
    Ref,
    key_of,
    note_state,
    parse_ref,
    penalised,
    ref_text,
)
from brain.citations import anchor, detect, git
from brain.citations.branches import BranchGit, BranchScope, roots_of
from brain.citations.git import GitError, Repos
from brain.citations.turns import TurnFiles
from brain.clock import Clock, iso
from brain.errors import InvalidArgument
from brain.notes import point_id
from brain.sources.filters import SourceFilter
from brain.trust import tenancy
from brain.trust.limits import MAX_ITEMS
from brain.trust.redact import redact
from brain.vector_store import Filter, Match, MatchAny, scroll_all

if TYPE_CHECKING:
    from brain.memory import MemoryService
    from brain.search.fusion import Candidate
    from brain.sources.registry import SourceRecord
    from brain.sources.service import SourcesService

log = logging.getLogger(__name__)

_KEY_BATCH = 256  # cite_keys matched per store query
_MAX_SEEN = 100_000  # files whose last index-time check is remembered
_RECORD_TTL_S = 2.0  # a source record read is reused this long


@dataclass(frozen=True, slots=True)
class CitationConfig:
    redact_secrets: bool
    hook_turn_ttl_s: float  # how old a hook turn may be and still be "the turn"


class CitationService:
    def __init__(self, memory: MemoryService, sources: SourcesService, clock: Clock,
                 cfg: CitationConfig, turns: TurnFiles | None = None,
                 repos: Repos | None = None) -> None:
        self.memory = memory
        self.sources = sources
        self.clock = clock
        self.cfg = cfg
        self.turns = turns
        self.repos = repos or Repos()
        self.counters = {"notes_checked": 0, "notes_updated": 0, "files_changed": 0}
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, int] | None] = {}  # cite key -> stat last checked
        self._filters: dict[tuple[Any, ...], SourceFilter] = {}
        self._records: dict[str, tuple[float, SourceRecord | None]] = {}
        self.branches = BranchScope(memory, self._git_roots, turns, BranchGit(self.repos.enabled),
                                    cfg.hook_turn_ttl_s)

    # ------------------------------------------------------------------ write time
    def attach(self, payload: dict[str, Any], cites: Sequence[str] = (),
               soft: Sequence[str] = ()) -> None:
        """Give a new note (payload not yet stored) its citations. ``cites`` must each
        resolve (else InvalidArgument, nothing written); ``soft`` (close_session's key_files)
        and the references detected in the text are kept when they resolve."""
        if cites is None:
            cites = ()
        if isinstance(cites, str) or len(cites) > MAX_ITEMS:
            raise InvalidArgument(f"cites must be a list of at most {MAX_ITEMS} references",
                                  field="cites")
        explicit = [parse_ref(c) for c in cites]
        if len(explicit) > MAX_CITES:
            raise InvalidArgument(f"at most {MAX_CITES} citations per note", field="cites")
        sources = self._citable(payload)
        found: list[dict[str, Any]] = []
        now = self._now()
        for ref in explicit:
            cite = self._anchor(ref, "explicit", sources, now)
            if cite is None:
                raise InvalidArgument(
                    f"cites: {ref.text()} is not a file (or a symbol or range of one) in a "
                    "source you may see; add its folder with 'brain source add' (the "
                    "sources tool's add action), or fix the path",
                    field="cites")
            found.append(cite)
        for ref in (r for r in (_soft_ref(s) for s in soft or ()) if r is not None):
            self._add(found, self._anchor(ref, "explicit", sources, now))
        for ref in detect.candidates(str(payload.get("content", ""))):
            self._add(found, self._anchor(ref, "detected", sources, now))
        for path in self._turn_files(str(payload.get("project", ""))):
            self._add(found, self._anchor(Ref(path), "hook", sources, now))
        _store(payload, found)
        roots = {s.id: s.root for s in sources}
        self.branches.stamp(payload, list(dict.fromkeys(
            str(roots[c["src"]]) for c in found if c.get("src") in roots)))

    def reanchor(self, payload: dict[str, Any]) -> None:
        """update_memory: every citation taken again from the code as it is now (the caller
        has read it, corrected the note), plus the ones its new text names."""
        now = self._now()
        found: list[dict[str, Any]] = []
        sources = self._citable(payload)
        by_id = {s.id: s for s in sources}
        for c in payload.get("cites") or []:
            rec = by_id.get(str(c.get("src")))  # a source the caller may no longer cite: kept
            ref = Ref(str(c.get("path")), c.get("symbol"),
                      tuple(c["lines"]) if c.get("kind") == "lines" and c.get("lines") else None)
            fresh = anchor.anchor(rec.root, ref.path, ref, str(c.get("origin")), self.repos,
                                  now, self._redact) if rec is not None else None
            if fresh is not None:
                self._add(found, {**fresh, "src": rec.id} if rec is not None else fresh)
            else:
                self._add(found, c)  # still gone: kept, so the note still says so
        for ref in detect.candidates(str(payload.get("content", ""))):
            self._add(found, self._anchor(ref, "detected", sources, now))
        _store(payload, found)

    def _anchor(self, ref: Ref, origin: str, sources: list[SourceRecord],
                now: str) -> dict[str, Any] | None:
        located = self._locate(ref.path, sources)
        if located is None:
            return None
        rec, rel = located
        cite = anchor.anchor(rec.root, rel, Ref(rel, ref.symbol, ref.lines), origin,
                             self.repos, now, self._redact)
        return {**cite, "src": rec.id} if cite is not None else None

    def _locate(self, path: str, sources: list[SourceRecord]) -> tuple[SourceRecord, str] | None:
        """The source and source-relative path of a cited file the caller may read."""
        ident = self.memory.identity
        raw = path.strip()
        if not raw or "\0" in raw:
            return None
        for rec in sources:
            root = os.path.realpath(rec.root)
            try:
                full = os.path.realpath(raw if os.path.isabs(raw) else os.path.join(root, raw))
                if os.path.commonpath([root, full]) != root or not os.path.isfile(full):
                    continue
            except (OSError, ValueError):
                continue
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel.startswith("..") or not tenancy.path_readable(rel, ident):
                continue
            if not self._filter(rec).admits(rel):
                continue  # excluded from the source (a secret, a vendored tree): not cited
            return rec, rel
        return None

    def _filter(self, rec: SourceRecord) -> SourceFilter:
        key = (rec.id, tuple(rec.exclude), tuple(rec.include), rec.use_gitignore)
        with self._lock:
            flt = self._filters.get(key)
            if flt is None:
                if len(self._filters) > 256:
                    self._filters.clear()
                flt = self._filters[key] = SourceFilter(Path(rec.root), rec.exclude,
                                                        rec.include, rec.use_gitignore)
        return flt

    def _citable(self, payload: dict[str, Any]) -> list[SourceRecord]:
        """The sources a note may cite: the caller's, and for a shared note only shared ones
        (its readers would otherwise read a private source's code in its citations)."""
        srcs = self._visible(str(payload.get("project", "")))
        if payload.get("visibility", tenancy.SHARED) == tenancy.SHARED:
            srcs = [r for r in srcs if r.visibility == tenancy.SHARED]
        return srcs

    def _visible(self, project: str) -> list[SourceRecord]:
        """The caller's sources, the note's project first."""
        srcs = self.sources.registry.list(self.sources.caller)
        srcs = [r for r in srcs if self.sources.paths.reaches(r.root)]
        return sorted(srcs, key=lambda r: (r.project != project, r.name))

    def _git_roots(self, project: str) -> list[str]:
        """The roots of the caller's sources of ``project`` (where its branch is asked)."""
        return roots_of(self._visible(project), project)

    def _turn_files(self, project: str) -> list[str]:
        if self.turns is None:
            return []
        return self.turns.files(project, self.memory.identity.user_id, self.cfg.hook_turn_ttl_s)

    @staticmethod
    def _add(found: list[dict[str, Any]], cite: dict[str, Any] | None) -> None:
        if cite is None or len(found) >= MAX_CITES:
            return
        same = (cite.get("src"), cite.get("path"), cite.get("kind"), cite.get("symbol"),
                tuple(cite.get("lines") or ()) if cite.get("kind") == "lines" else None)
        for c in found:
            if (c.get("src"), c.get("path"), c.get("kind"), c.get("symbol"),
                    tuple(c.get("lines") or ()) if c.get("kind") == "lines" else None) == same:
                return
        found.append(cite)

    # ------------------------------------------------------------------ index time
    def files_changed(self, source_id: str, rels: Iterable[str]) -> int:
        """The source index saw ``rels`` of ``source_id`` change (written, deleted, renamed):
        check the notes citing them, and only those. Returns how many notes were checked.

        A note whose citations only saw their file's size or mtime move is not written: the
        file's stat is remembered as checked (``_seen``), so a read does not check it again."""
        rels = set(rels)
        keys = sorted({key_of(source_id, r) for r in rels})
        if not keys:
            return 0
        checked = 0
        views: dict[str, anchor.Views] = {}  # per source: each file read once
        for i in range(0, len(keys), _KEY_BATCH):
            batch = set(keys[i : i + _KEY_BATCH])
            flt = Filter(must=(Match("kind", "note"), MatchAny("cite_keys", tuple(batch))))
            for pt in scroll_all(self.memory.store, flt):
                checked += 1
                self._recheck(pt.payload["zk_id"], lambda c, b=batch: _key(c) in b,
                              views=views, seen=pt.payload, write_stat=False)
        rec = self._record(source_id)
        if rec is not None:  # a sync that saw a new commit or branch: promotions are due
            self.branches.observe(rec.project, str(rec.root))
        with self._lock:
            self.counters["files_changed"] += len(keys)
            self.counters["notes_checked"] += checked
            if rec is not None:
                if len(self._seen) > _MAX_SEEN:
                    self._seen.clear()
                for rel in rels:
                    self._seen[key_of(source_id, rel)] = anchor.stat_of(rec.root, rel)
        return checked

    def _recheck(self, zk_id: str, which: Any, force: bool = True,
                 views: dict[str, anchor.Views] | None = None,
                 seen: dict[str, Any] | None = None, write_stat: bool = True,
                 ) -> dict[str, Any] | None:
        """Check the citations of one note that ``which`` selects; write what moved (with
        ``write_stat`` False, a moved size or mtime alone is not written). ``seen``: the
        payload as just read; when its check changes nothing, no lock is taken. A write
        checks again under the write lock, on the note read there (a concurrent update may
        have re-anchored it)."""
        m = self.memory
        views = {} if views is None else views
        if seen is not None:
            new = self._checked(seen, which, force, views)
            if _same(list(seen.get("cites") or []), new, write_stat):
                return seen
        with m._write_lock:
            pts = m.store.retrieve([point_id(zk_id)])
            if not pts:
                return None
            payload = pts[0].payload
            new = self._checked(payload, which, force, views)
            if _same(list(payload.get("cites") or []), new, write_stat):
                return payload
            fields = _fields(new)
            m.store.set_payload([point_id(zk_id)], fields)
            with self._lock:
                self.counters["notes_updated"] += 1
            return {**payload, **fields}

    def _checked(self, payload: dict[str, Any], which: Any, force: bool,
                 views: dict[str, anchor.Views]) -> list[dict[str, Any]]:
        now = self._now()
        new: list[dict[str, Any]] = []
        for c in payload.get("cites") or []:
            rec = self._record(str(c.get("src"))) if which(c) else None
            if rec is None or (not force and self._untouched(c)):
                new.append(c)
                continue
            new.append(anchor.check(rec.root, c, self.repos, now,
                                    views.setdefault(rec.id, anchor.Views())))
        return new

    # ------------------------------------------------------------------ read time
    def refresh(self, payloads: list[dict[str, Any]]) -> None:
        """Check again, in place, the citations of ``payloads`` whose file moved on disk
        since their last check (a stat per cited file; a read only for those)."""
        for i, p in enumerate(payloads):
            cites = p.get("cites") or []
            if not cites or all(self._untouched(c) for c in cites):
                continue
            new = self._recheck(str(p["zk_id"]), lambda c: True, force=False)
            if new is not None:
                payloads[i].update({k: new[k] for k in ("cites", "cite_keys", "cite_state")
                                    if k in new})

    def _untouched(self, c: dict[str, Any]) -> bool:
        """Whether a citation's file is as it was when last checked: the size and mtime the
        note holds, or those the last index-time check of every citing note saw."""
        rec = self._record(str(c.get("src")))
        if rec is None or anchor.unchanged_on_disk(rec.root, c):
            return True
        seen = self._seen.get(_key(c))
        return seen is not None and seen == anchor.stat_of(rec.root, str(c.get("path")))

    def demote(self, cands: list[Candidate]) -> list[Candidate]:
        """Refreshed candidates, those whose cited code changed or is gone lowered by the
        state's RANK_PENALTY (a stable sort: an equal fresh note now ranks first)."""
        if not any(c.payload.get("cites") for c in cands):
            return cands
        self.refresh([c.payload for c in cands])
        moved = False
        for c in cands:
            state = str(c.payload.get("cite_state") or "fresh")
            if state != "fresh" and c.payload.get("cites"):
                c.score = penalised(c.score, state)
                if c.rerank is not None:
                    c.rerank = penalised(c.rerank, state)
                moved = True
        if not moved:
            return cands
        reranked = any(c.rerank is not None for c in cands)
        return sorted(cands, key=lambda c: -(c.rerank or 0.0) if reranked else -c.score)

    # ------------------------------------------------------------------ tools
    def verify(self, zk_id: str) -> dict[str, Any]:
        """Each citation of a note the caller may see: what was seen then, what is there now."""
        payload = self.memory.get_payload(zk_id)
        checked = self._recheck(payload["zk_id"], lambda c: True) or payload
        rows = []
        mine = {r.id for r in self._visible("")}
        for c in checked.get("cites") or []:
            rec = self._record(str(c.get("src")))
            now: dict[str, Any] = (anchor.now_view(rec.root, c, self._redact) if rec
                                   else {"exists": False})
            if rec is not None and rec.id not in mine:
                now = {"hidden": True}  # a source the caller may not read: not shown
            if rec is not None and now.get("found"):
                now["commit"] = self.repos.head(rec.root)
            rows.append({
                "ref": ref_text(str(c.get("path")), c.get("symbol"),
                                c.get("lines") if c.get("kind") == "lines" else None),
                "origin": c.get("origin"), "state": c.get("state"),
                "moved_from": c.get("moved_from"),
                "then": {"lines": c.get("lines"), "hash": c.get("hash"),
                         "commit": c.get("commit") or "", "blob": c.get("blob") or "",
                         "excerpt": c.get("excerpt", "")},
                "now": now,
            })
        return {"zk_id": checked["zk_id"], "state": checked.get("cite_state", "fresh")
                if rows else None, "citations": rows,
                "hint": "update_memory re-anchors the citations once the note is right"
                if any(r["state"] != "fresh" for r in rows) else ""}

    def changed_since(self, ref: str, to: str | None = None,
                      project: str | None = None, limit: int = 50) -> dict[str, Any]:
        """The caller's notes citing files git reports changed between ``ref`` and ``to``
        (default: the work tree), over the caller's git sources (of ``project`` if given)."""
        if not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidArgument("limit must be 1..1000", field="limit")
        keys: list[str] = []
        repos = 0
        for rec in self._visible(project or ""):
            if project is not None and rec.project != project:
                continue
            if not self.repos.head(rec.root, fresh=True):
                continue
            try:
                paths = self.repos.changed(rec.root, ref, to)
            except GitError as exc:
                raise InvalidArgument(f"git could not compare {ref!r} in {rec.name}: {exc}",
                                      field="changed_since") from exc
            repos += 1
            keys.extend(key_of(rec.id, p) for p in sorted(paths))
        found: list[tuple[dict[str, Any], list[str]]] = []
        m = self.memory
        for i in range(0, len(keys), _KEY_BATCH):
            batch = tuple(keys[i : i + _KEY_BATCH])
            flt = Filter(must=(Match("kind", "note"), MatchAny("cite_keys", batch),
                               *m._tenancy()))
            for pt in scroll_all(m.store, flt):
                p = pt.payload
                if p.get("forgotten") or not m.visible(p):
                    continue
                hit = set(batch)
                found.append((p, sorted({str(c.get("path")) for c in p.get("cites") or []
                                         if _key(c) in hit})))
        found.sort(key=lambda f: (f[0].get("created_ts") or 0.0, f[0]["zk_id"]), reverse=True)
        # Their citations as the files are now, as a search shows them: the stored state is
        # the last sync's, and these files changed (without a running server, since then).
        self.refresh([p for p, _ in found[:limit]])  # in place
        notes = [m.public(p, changed_paths=paths) for p, paths in found[:limit]]
        return {"ref": ref, "to": to or "worktree", "repositories": repos,
                "notes": notes, "count": len(found), "truncated": len(found) > limit}

    def commit_time(self, ref: str, project: str) -> float | None:
        """When ``ref`` was committed (its committer time, epoch seconds) in the first of the
        caller's git sources of ``project`` that knows it; None when none does. An as_of
        search by commit (brain/memory/supersede.py)."""
        ref = git.check_ref(ref)
        for rec in self._visible(project):
            if rec.project != project or not self.repos.head(rec.root):
                continue
            try:
                out = git.run(rec.root, "show", "-s", "--format=%ct", ref + "^{commit}", "--")
            except GitError:
                continue
            if out.strip().isdigit():
                return float(out.strip())
        return None

    # ------------------------------------------------------------------ helpers
    def _record(self, source_id: str) -> SourceRecord | None:
        """The source a citation names, from the registry at most every _RECORD_TTL_S (a
        search checks the citations of every hit: one registry read each would cost more
        than the stat it guards)."""
        if not source_id:
            return None
        now = time.monotonic()
        with self._lock:
            cached = self._records.get(source_id)
        if cached is not None and now - cached[0] < _RECORD_TTL_S:
            return cached[1]
        rec = self.sources.registry.find(source_id)
        with self._lock:
            if len(self._records) > 1024:
                self._records.clear()
            self._records[source_id] = (now, rec)
        return rec

    def _redact(self, text: str) -> str:
        return redact(text).text if self.cfg.redact_secrets else text

    def _now(self) -> str:
        return iso(self.clock.now())


def _soft_ref(value: Any) -> Ref | None:
    """A key_files line as a citation when it starts with one (``path — why``)."""
    if not isinstance(value, str) or not value.strip():
        return None
    head = value.strip().split()[0].strip("`,;:")
    try:
        return parse_ref(head)
    except InvalidArgument:
        return None


def _key(c: dict[str, Any]) -> str:
    return key_of(str(c.get("src")), str(c.get("path")))


def _fields(cites: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cites": cites, "cite_keys": sorted({_key(c) for c in cites}),
            "cite_state": note_state(cites) if cites else None}


def _store(payload: dict[str, Any], cites: list[dict[str, Any]]) -> None:
    if cites or payload.get("cites"):
        payload.update(_fields(cites))


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]], stat: bool = True) -> bool:
    """Whether two citation lists differ only in when they were checked; without ``stat``,
    also in what a read finds again: their files' size and mtime, and the lines a symbol
    now spans (its hash, not its lines, is what it is known by)."""
    def strip(c: dict[str, Any]) -> dict[str, Any]:
        volatile = {"checked"} if stat else {"checked", "size", "mtime_ns"}
        if not stat and c.get("kind") != "lines":
            volatile.add("lines")
        return {k: v for k, v in c.items() if k not in volatile}

    return [strip(c) for c in a] == [strip(c) for c in b]
