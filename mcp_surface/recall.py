"""The recall-filter arguments shared by every tool that searches notes.

``search_memory`` and ``deep_search`` take the same filter arguments. FastMCP builds a tool's
JSON schema from its Python signature, so each tool still lists the arguments itself, but
types them with the aliases below (same names, types and descriptions) and hands them to
:func:`recall_filter`, the one place that validates them and builds the
:class:`brain.memory.RecallFilter`. The tools pass their ``locals()`` to :func:`recall_from`,
which picks the arguments by name: a tool missing one fails with a KeyError on its first call
instead of silently ignoring the caller's filter. tests/test_deep_search_filters.py checks
that both tools publish the same filter arguments with the same defaults.

Call :func:`recall_from` inside the tool's ``call(...)`` so that its ``InvalidArgument``
reaches the client as a typed tool error, like the checks ``MemoryService.build_filter``
makes on the same arguments.

:func:`search_notes` is search_memory's whole body, kept here so that ``bench.search_stages``
times and profiles the code the tool runs, not a copy of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import Field

from brain.embed_credential import query_vector, search_warnings
from brain.limits import MAX_AGE_DAYS
from brain.memory import RecallFilter
from brain.presentation import present, search_page
from mcp_surface.args import FilterRules, OptProject, Similarity, TagList

NoteKind = Literal[
    "mistake",
    "fix",
    "pattern",
    "research",
    "decision",
    "general",
    "open_thread",
    "session_summary",
    "project_context",
]

DEFAULT_TOP_K = 5  # search_memory without top_k (the band may return fewer)

# The filter arguments, in the order the tools list them.
FILTER_ARGS: tuple[str, ...] = (
    "project",
    "include_contextual",
    "include_fleeting",
    "note_kind",
    "tags",
    "max_age_days",
    "min_salience",
    "confidence_min",
    "fingerprint_match",
    "custom_filters",
    "include_siblings",
    "all_projects",
)

FilterProject = Annotated[
    OptProject,
    Field(description="Project to search; without one, the default project (see all_projects)"),
]
IncludeContextual = Annotated[
    bool,
    Field(description="Also return open_thread, session_summary and project_context notes"),
]
IncludeFleeting = Annotated[bool, Field(description="Also return fleeting (undistilled) notes")]
NoteKinds = Annotated[
    list[NoteKind] | None,
    Field(max_length=len(get_args(NoteKind)), description="Only notes of these kinds"),
]
Tags = Annotated[TagList, Field(description="Only notes carrying every one of these tags")]
MaxAgeDays = Annotated[
    float | None,
    Field(gt=0, le=MAX_AGE_DAYS, allow_inf_nan=False,
          description="Only notes created in the last N days"),
]
MinSalience = Annotated[
    float | None,
    Field(ge=0, le=1, allow_inf_nan=False, description="Only notes with at least this salience"),
]
ConfidenceMin = Annotated[
    Similarity | None, Field(description="Drop hits whose meaning similarity is below this")
]
FingerprintMatch = Annotated[
    bool,
    Field(description="Only notes embedded by the current model (false: every model's notes)"),
]
CustomFilters = Annotated[
    FilterRules,
    Field(
        description="Extra payload conditions, AND-combined: {key, value} | {key, any: [...]} "
        "| {key, gte/gt/lte/lt: number}; exclude with {key, none_of: [...]} or add not: true "
        "to any rule (e.g. {key: tags, value: draft, not: true})"
    ),
]
IncludeSiblings = Annotated[
    bool, Field(description="Also return private notes of your other agents (same user)")
]
AllProjects = Annotated[bool, Field(description="Search every project, not just one")]


def recall_filter(
    *,
    project: str | None,
    include_contextual: bool,
    include_fleeting: bool,
    note_kind: Sequence[str] | None,
    tags: Sequence[str] | None,
    max_age_days: float | None,
    min_salience: float | None,
    confidence_min: float | None,
    fingerprint_match: bool,
    custom_filters: Sequence[dict[str, Any]] | None,
    include_siblings: bool,
    all_projects: bool,
) -> RecallFilter:
    """The RecallFilter of a tool's filter arguments (see the module docstring)."""
    custom = tuple(custom_filters or ())
    return RecallFilter(
        project=project,
        include_fleeting=include_fleeting,
        include_contextual=include_contextual,
        note_kinds=tuple(note_kind or ()),
        tags=tuple(tags or ()),
        max_age_days=max_age_days,
        min_salience=min_salience,
        confidence_min=confidence_min,
        fingerprint_match=fingerprint_match,
        custom=custom,
        include_siblings=include_siblings,
        all_projects=all_projects,
    )


def recall_from(args: Mapping[str, Any]) -> RecallFilter:
    """:func:`recall_filter` of a tool's arguments (its ``locals()`` at entry): the filter
    arguments are picked by name, so the two tools do not list them a second time."""
    return recall_filter(**{name: args[name] for name in FILTER_ARGS})


def search_notes(b: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """search_memory's body on a brain, from the tool's arguments (all of them, by name)."""
    query, top_k = args["query"], args["top_k"] or DEFAULT_TOP_K
    rf = recall_from(args)
    qvec = query_vector(b.embedder, query)  # embedded once, used for both (None: BM25 only)
    hits = b.memory.search(query, top_k, rf, query_vector=qvec)
    out: dict[str, Any] = {"results": hits, "count": len(hits)}
    if args["include_files"]:
        out["files"] = b.files.search_with_vector(
            qvec, query, limit=min(top_k, 30), threshold=args["files_threshold"])
    out = search_page(out, b.settings.memory.relevance_band, explicit=args["top_k"] is not None,
                      warnings=search_warnings(b.embedder))
    return present(out, args["detail"], b.settings.memory.snippet_chars, query=query)
