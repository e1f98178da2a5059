"""fs_search: three ways to search the files of sources.

- ``semantic``: hybrid dense + BM25 over chunk and file points, ranked by the one search
  policy (brain/search/policy.py, the same as search_memory and search_files), one row per
  file: its best chunk. A scope of at most ``exact_max_points`` points is searched exactly
  instead of through the HNSW index.
- ``filter``: metadata (category, tags, path glob, date ranges) plus an optional keyword
  query ranked by term frequency over the file's chunks, one result per file. No embedding:
  the BM25 leg proposes candidates, term frequency counted here ranks them.
- ``grep``: ripgrep (or git grep / grep) over the live files; excludes and the floor hold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brain.embedding.bm25 import BM25Encoder
from brain.embedding.credential import query_vector
from brain.embedding.registry import Embedder
from brain.errors import InvalidArgument
from brain.search.fusion import matched_by
from brain.search.policy import SearchPolicy, rank
from brain.sources import grep_rank
from brain.sources.filters import SourceFilter
from brain.sources.grep import grep
from brain.sources.registry import Registry, SourceRecord
from brain.trust import tenancy
from brain.trust.globs import compile_spec
from brain.trust.identity import Identity
from brain.vector_store import Filter, Match, MatchAny, Range, VectorStore, scroll_all

MODES = ("semantic", "filter", "grep")
SNIPPET = 300
# grep hits gathered before ranking (grep_rank.py) cuts them to the caller's limit: the
# defining file is often not among the first hits an engine reports.
GREP_RANK_POOL = 200
GREP_RANK_MAX = 1000
_GLOB_PATHS_MAX = 2000
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(slots=True)
class Scope:
    """Where to search: sources, optionally one folder in one of them, and metadata."""

    sources: list[SourceRecord]
    folder: str | None = None  # POSIX, relative to the single source's root
    path_glob: str | None = None
    categories: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    created_after: float | None = None
    created_before: float | None = None
    modified_after: float | None = None
    modified_before: float | None = None
    glob_spec: Any = field(default=None, repr=False)
    who: Identity | None = None  # the caller: points must be its own too (tenancy.py)
    # The caller's sources it cannot read now ({name, kind, reason}): fs_search says so.
    unreachable: list[dict[str, str]] = field(default_factory=list)

    @property
    def has_metadata(self) -> bool:
        return bool(
            self.categories
            or self.tags
            or self.created_after
            or self.created_before
            or self.modified_after
            or self.modified_before
        )

    def glob_ok(self, rel: str) -> bool:
        if self.path_glob is None:
            return True
        if self.glob_spec is None:
            self.glob_spec = compile_spec([self.path_glob])  # bounded: brain/trust/globs.py
        return bool(self.glob_spec.match_file(rel))


@dataclass(slots=True)
class SearchDeps:
    store: VectorStore
    embedder: Embedder
    bm25: BM25Encoder
    registry: Registry
    policy: SearchPolicy
    exact_max_points: int
    grep_timeout_s: float


def store_filter(scope: Scope, kinds: Sequence[str] = ("file", "chunk")) -> Filter | None:
    """The store filter of a scope; None when the glob matches no indexed path."""
    must: list[Any] = [
        MatchAny("kind", tuple(kinds)),
        MatchAny("source_id", tuple(s.id for s in scope.sources)),
    ]
    if scope.who is not None:
        must.extend(tenancy.conditions(scope.who))
        must.extend(tenancy.path_conditions(scope.who))
    if scope.folder:
        must.append(Match("dirs", scope.folder))
    if scope.categories:
        must.append(MatchAny("category", scope.categories))
    must.extend(Match("tags", t) for t in scope.tags)
    for key, gte, lte in (
        ("created_ts", scope.created_after, scope.created_before),
        ("updated_ts", scope.modified_after, scope.modified_before),
    ):
        if gte is not None or lte is not None:
            must.append(Range(key, gte=gte, lte=lte))
    return Filter(must=tuple(must))


def _glob_paths(deps: SearchDeps, scope: Scope) -> tuple[str, ...] | None:
    """Indexed paths the glob matches (to filter in the store), None when too many."""
    paths: set[str] = set()
    for rec in scope.sources:
        for rel in deps.registry.file_states(rec.id):
            if scope.glob_ok(rel):
                paths.add(rel)
                if len(paths) > _GLOB_PATHS_MAX:
                    return None
    return tuple(sorted(paths))


def _with_glob(deps: SearchDeps, scope: Scope, flt: Filter) -> Filter | None:
    if scope.path_glob is None:
        return flt
    paths = _glob_paths(deps, scope)
    if paths is None:
        return flt  # too many to list: the glob is checked on each result instead
    if not paths:
        return None
    return flt.and_(MatchAny("path", paths))


def snippet(text: str, terms: Sequence[str]) -> str:
    """About SNIPPET characters of ``text`` around the first query term found."""
    if len(text) <= SNIPPET:
        return text.strip()
    lower = text.lower()
    positions = [i for t in terms if (i := lower.find(t)) >= 0]
    at = min(positions) if positions else 0
    start = max(0, min(at - SNIPPET // 3, len(text) - SNIPPET))
    return text[start : start + SNIPPET].strip()


def _terms(query: str) -> list[str]:
    return [t.lower() for t in _WORD.findall(query)]


def _result(
    payload: dict[str, Any], score: float, terms: Sequence[str], names: dict[str, str]
) -> dict[str, Any]:
    return {
        "path": payload.get("path"),
        "source": names.get(str(payload.get("source_id")), payload.get("source_id")),
        "project": payload.get("project"),
        "kind": payload.get("kind"),
        "category": payload.get("category"),
        "chunk_index": payload.get("chunk_index"),
        "line_start": payload.get("line_start"),
        "line_end": payload.get("line_end"),
        "score": round(float(score), 6),
        "snippet": snippet(str(payload.get("content", "")), terms),
    }


def semantic(deps: SearchDeps, scope: Scope, query: str, limit: int) -> list[dict[str, Any]]:
    base = store_filter(scope)
    flt = _with_glob(deps, scope, base) if base is not None else None
    if flt is None:
        return []
    exact = deps.store.count(flt) <= deps.exact_max_points
    qvec = query_vector(deps.embedder, query)  # None: keywords alone (embedding/credential.py)
    # A glob too wide to list in the store filter is checked on each row: fetch more then.
    n = limit if scope.path_glob is None or flt is not base else limit * 3
    cands = rank(deps.store, qvec, deps.bm25.query(query), flt, n, deps.policy, exact=exact,
                 group=_file_key, query=query, text=_chunk_text)
    names = {s.id: s.name for s in scope.sources}
    terms = _terms(query)
    out: list[dict[str, Any]] = []
    for c in cands:
        if not scope.glob_ok(str(c.payload.get("path"))):
            continue
        out.append({**_result(c.payload, c.score, terms, names), "matched": matched_by(c),
                    **({"rerank_score": round(c.rerank, 6)} if c.rerank is not None else {})})
        if len(out) >= limit:
            break
    return out


def _chunk_text(payload: dict[str, Any]) -> str:
    """What a reranker reads of a file's row: the best chunk's text (a file point's own)."""
    return str(payload.get("content", ""))


def _file_key(payload: dict[str, Any]) -> tuple[str, str]:
    """fs_search semantic returns one row per file: the file's point and its chunks share
    this key, so only the best-ranked of them is kept."""
    return (str(payload.get("source_id")), str(payload.get("path")))


def filter_mode(
    deps: SearchDeps, scope: Scope, query: str | None, limit: int
) -> list[dict[str, Any]]:
    names = {s.id: s.name for s in scope.sources}
    if not query or not query.strip():
        flt = store_filter(scope, ("file",))
        flt = _with_glob(deps, scope, flt) if flt is not None else None
        if flt is None:
            return []
        files = [
            p.payload
            for p in scroll_all(deps.store, flt)
            if scope.glob_ok(str(p.payload.get("path")))
        ]
        files.sort(key=lambda pl: (-float(pl.get("updated_ts", 0.0)), str(pl.get("path"))))
        return [
            {**_result(pl, 0.0, [], names), "snippet": snippet(str(pl.get("content", "")), [])}
            for pl in files[:limit]
        ]
    terms = _terms(query)
    if not terms:
        raise InvalidArgument("query has no searchable words; pass words or use grep mode.")
    flt = store_filter(scope, ("chunk",))
    flt = _with_glob(deps, scope, flt) if flt is not None else None
    if flt is None:
        return []
    hits = deps.store.query_sparse(deps.bm25.query(query), flt, max(500, limit * 20))
    patterns = [re.compile(rf"(?<!\w){re.escape(t)}(?!\w)") for t in terms]
    per_file: dict[tuple[str, str], tuple[int, int, dict[str, Any]]] = {}
    for h in hits:
        p = h.payload
        key = (str(p.get("source_id")), str(p.get("path")))
        if not scope.glob_ok(key[1]):
            continue
        text = str(p.get("content", "")).lower()
        tf = sum(len(rx.findall(text)) for rx in patterns)
        if tf == 0:
            continue
        total, best, best_p = per_file.get(key, (0, -1, p))
        per_file[key] = (total + tf, tf, p) if tf > best else (total + tf, best, best_p)
    ranked = sorted(per_file.items(), key=lambda kv: (-kv[1][0], kv[0][1]))
    return [_result(best_p, total, terms, names) for _, (total, _b, best_p) in ranked[:limit]]


def grep_mode(
    deps: SearchDeps, scope: Scope, pattern: str, limit: int, *, fixed: bool, case_insensitive: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    allowed: set[tuple[str, str]] | None = None
    if scope.has_metadata:
        flt = store_filter(scope, ("file",))
        allowed = (
            {
                (str(p.payload["source_id"]), str(p.payload["path"]))
                for p in scroll_all(deps.store, flt)
            }
            if flt is not None
            else set()
        )
    glob = f"{scope.folder}/**" if scope.folder else scope.path_glob
    roots = [
        (Path(s.root), SourceFilter(Path(s.root), s.exclude, s.include, s.use_gitignore))
        for s in scope.sources
    ]
    by_root = {str(Path(s.root)): s for s in scope.sources}
    res = grep(
        roots,
        pattern,
        fixed=fixed,
        case_insensitive=case_insensitive,
        glob=glob,
        max_results=min(max(limit * 10, GREP_RANK_POOL), GREP_RANK_MAX),
        timeout_s=deps.grep_timeout_s,
    )
    out = []
    for h in grep_rank.rank(res.hits, pattern, fixed=fixed, case_insensitive=case_insensitive):
        rec = by_root[str(h.root)]
        if scope.folder and scope.path_glob and not scope.glob_ok(h.path):
            continue
        if allowed is not None and (rec.id, h.path) not in allowed:
            continue
        if scope.who is not None and not tenancy.path_readable(h.path, scope.who):
            continue  # another agent's private subtree: silently absent (tenancy.py)
        out.append(
            {
                "path": h.path,
                "source": rec.name,
                "project": rec.project,
                "line_start": h.line,
                "line_end": h.line,
                "score": 1.0,
                "snippet": h.text,
            }
        )
    cut = len(out) > limit or res.truncated
    return out[:limit], {"engine": res.engine, "truncated": cut, "timed_out": res.timed_out,
                         "matched": len(out), "matched_all": not res.truncated}
