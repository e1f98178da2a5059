"""The recall filter: one object every note search takes, and search_memory's body.

``search_memory`` and ``deep_search`` take ``project`` and one ``filters`` object
(:class:`RecallFilters`), so the filter's schema is declared once and listed once per tool,
not as a dozen parameters copied into each (issue 32). :func:`recall_filter` is the one place
that turns it into the service's :class:`brain.memory.RecallFilter`;
``MemoryService.build_filter`` checks the same fields again for non-MCP callers.

Calls in the shape of earlier releases (the filter fields as top-level arguments) are moved
into ``filters`` by mcp_surface/profiles.py before the tool runs, so stale instructions and
scripts keep working while the schema lists only the object.

:func:`search_notes` is search_memory's whole body, on one frozen :class:`NoteSearch` (the
tool's arguments, typed), kept here so that ``bench.search_stages`` times and profiles the
code the tool runs, not a copy of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, Field

from brain.embedding.credential import query_vector
from brain.memory import RecallFilter
from brain.notes import NoteKind
from brain.search.presentation import Detail
from brain.trust.limits import MAX_AGE_DAYS
from mcp_surface.args import Date, FilterRules, Similarity, TagList
from mcp_surface.calls import Services

DEFAULT_TOP_K = 5  # search_memory without top_k (the band may return fewer)

NoteKinds = Annotated[list[NoteKind] | None, Field(max_length=len(get_args(NoteKind)))]


# Which notes a search may return. No docstring: pydantic would list it as the schema's
# description on every turn; the field names say what each one does.
class RecallFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    all_projects: bool = False
    include_contextual: Annotated[bool, Field(
        description="Also open_thread, session_summary, project_context")] = False
    include_fleeting: bool = False
    include_siblings: Annotated[bool, Field(
        description="Also your other agents' private notes")] = False
    note_kind: NoteKinds = None
    tags: Annotated[TagList, Field(description="All of these")] = None
    max_age_days: Annotated[float | None, Field(gt=0, le=MAX_AGE_DAYS, allow_inf_nan=False)
                            ] = None
    min_salience: Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False)] = None
    confidence_min: Annotated[Similarity | None, Field(description="Meaning similarity")
                              ] = None
    fingerprint_match: Annotated[bool, Field(description="Current embedding model only")
                                 ] = True
    custom: Annotated[FilterRules, Field(
        description="Payload rules, all must hold: {key, value|any|none_of|gte|gt|lte|lt, "
                    "not?}")] = None
    as_of: Date = None
    # None your git branch, "*" every branch, or a branch's name (docs/citations.md); no
    # description: tools/list is within 20 characters of its budget.
    branch: Annotated[str | None, Field(max_length=255)] = None


# The filter fields, as earlier releases took them at the top level of a call (profiles.py
# moves them into ``filters``); ``custom_filters`` is the old name of ``custom``.
FLAT_FILTER_ARGS: dict[str, str] = {
    **{name: name for name in RecallFilters.model_fields if name not in ("custom", "branch")},
    "custom_filters": "custom",
}


def recall_filter(project: str | None, filters: RecallFilters | None) -> RecallFilter:
    """The service's RecallFilter of a tool's ``project`` and ``filters`` arguments."""
    f = filters or RecallFilters()
    return RecallFilter(
        project=project,
        include_fleeting=f.include_fleeting,
        include_contextual=f.include_contextual,
        note_kinds=tuple(f.note_kind or ()),
        tags=tuple(f.tags or ()),
        max_age_days=f.max_age_days,
        min_salience=f.min_salience,
        confidence_min=f.confidence_min,
        fingerprint_match=f.fingerprint_match,
        custom=tuple(f.custom or ()),
        include_siblings=f.include_siblings,
        all_projects=f.all_projects,
        as_of=f.as_of,
        branch=f.branch or "",
    )


@dataclass(frozen=True)
class NoteSearch:
    """One search_memory call: its arguments, typed (``top_k`` None: not given, so the
    relevance band may answer with fewer than :data:`DEFAULT_TOP_K`)."""

    query: str
    top_k: int | None = None
    project: str | None = None
    filters: RecallFilters | None = None
    include_files: bool = False
    files_threshold: float | None = None
    detail: Detail = "compact"


def search_notes(s: Services, req: NoteSearch) -> dict[str, Any]:
    """search_memory's body on the services, for one request."""
    top_k = req.top_k or DEFAULT_TOP_K
    rf = recall_filter(req.project, req.filters)
    qvec = query_vector(s.embedder, req.query)  # embedded once, for both (None: BM25 only)
    hits = s.memory.search(req.query, top_k, rf, query_vector=qvec)
    out: dict[str, Any] = {"results": hits, "count": len(hits)}
    if req.include_files:
        out["files"] = s.files.search_with_vector(
            qvec, req.query, limit=min(top_k, 30), threshold=req.files_threshold)
    page = s.pages.search(out, req.detail, explicit=req.top_k is not None, query=req.query)
    return with_project_hint(s, rf, page)


def with_project_hint(s: Services, rf: RecallFilter, page: dict[str, Any]) -> dict[str, Any]:
    """An empty answer from a project that holds no note of the caller's says so (an agent
    that guessed its project's name learns how to reach its notes)."""
    if page.get("results"):
        return page
    empty = s.memory.empty_project(rf)
    if empty is None:
        return page
    return {**page, "hint": f"project {empty!r} holds no notes of yours: omit project for "
                            "this workspace's, or set filters.all_projects to search every "
                            "project."}
