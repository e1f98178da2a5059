"""What a search of notes may return: the per-request :class:`RecallFilter` and the store
filter built from it (project scope, note kinds, age, salience, tenancy, custom rules)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from brain.clock import parse_iso
from brain.errors import InvalidArgument
from brain.memory import salience
from brain.memory.core import NOTE_FILTER, NoteCore, require_enum
from brain.notes import CONTEXTUAL_KINDS, NOTE_KINDS
from brain.store import recall_key
from brain.trust import tenancy
from brain.trust.limits import (
    MAX_AGE_DAYS,
    MAX_FILTER_VALUES,
    MAX_FILTERS,
    check_filter_key,
    check_filter_value,
    check_number,
    check_tags,
)
from brain.vector_store import Filter, Match, MatchAny, Range


@dataclass(slots=True)
class RecallFilter:
    """Per-request narrowing of a search; every field is AND-combined."""

    project: str | None = None
    include_fleeting: bool = False
    include_contextual: bool = False
    note_kinds: Sequence[str] = ()
    tags: Sequence[str] = ()
    max_age_days: float | None = None
    min_salience: float | None = None
    confidence_min: float | None = None
    fingerprint_match: bool = True
    custom: Sequence[dict[str, Any]] = ()
    include_siblings: bool = False
    all_projects: bool = False
    # What the brain believed then: an ISO date or date-time (brain/memory/supersede.py).
    as_of: str | None = None
    branch: str = ""  # "": the caller's branch; "*": every branch; else that branch's view


def build_filter(m: NoteCore, rf: RecallFilter) -> Filter:
    must: list[Any] = []
    must_not: list[Any] = []
    # No search crosses projects unless asked: without a project, the default one.
    project = rf.project or (None if rf.all_projects else m.cfg.default_project)
    if project and not rf.all_projects:
        must.append(Match("project", project))
    types = ("permanent", "fleeting") if rf.include_fleeting else ("permanent",)
    contextual = rf.include_contextual or bool(set(rf.note_kinds) & set(CONTEXTUAL_KINDS))
    if rf.note_kinds:
        for k in rf.note_kinds:
            require_enum(k, NOTE_KINDS, "note_kind")
        must.append(MatchAny("note_kind", tuple(rf.note_kinds)))
    for tag in check_tags(list(rf.tags), "tags filter"):
        must.append(Match("tags", tag))
    if rf.max_age_days is not None:
        days = check_number(rf.max_age_days, "max_age_days", lo=0, hi=MAX_AGE_DAYS,
                            lo_open=True)
        since = m.clock.now() - timedelta(days=days)
        must.append(Range("created_ts", gte=since.timestamp()))
    if rf.min_salience is not None:
        floor = check_number(rf.min_salience, "min_salience", lo=0, hi=1)
        if floor > 0:  # every salience is >= 0
            must.append(salience_condition(m, floor))
    if rf.confidence_min is not None:  # applied after retrieval; checked here, before
        check_number(rf.confidence_min, "confidence_min", lo=-1, hi=1)
    as_of = as_of_conditions(m, rf.as_of, project or m.cfg.default_project)
    if as_of is not None:
        must.extend(as_of[0])
        must_not.extend(as_of[1])
    if len(rf.custom) > MAX_FILTERS:
        raise InvalidArgument(f"at most {MAX_FILTERS} custom filters", field="custom")
    for rule in rf.custom:  # a negated rule only narrows: it can never widen what is seen
        cond, negated = _custom_condition(rule)
        (must_not if negated else must).append(cond)
    must_not.extend(branch_conditions(m, rf, project))
    if rf.fingerprint_match and recall_key.complete(m.meta.data):
        # Kind, state, model, tenancy and session records in one indexed condition: each
        # condition is a check at every node of the HNSW walk (brain/store/recall_key.py).
        ident = m.identity
        key = recall_key.condition(ident.user_id, ident.agent_id, m.meta.model, types,
                                   contextual=contextual, siblings=rf.include_siblings,
                                   superseded=as_of is not None)
        return Filter(must=(key, *must), must_not=tuple(must_not))
    unkeyed = _unkeyed(m, rf, types, contextual).and_(*must).but_not(*must_not)
    # A superseded note (valid_to_ts > 0) leaves every search but an as_of one.
    return unkeyed if as_of is not None else unkeyed.but_not(Range("valid_to_ts", gt=0))


def as_of_conditions(m: NoteCore, as_of: str | None,
                     project: str = "") -> tuple[list[Any], list[Any]] | None:
    """(must, must_not) of the notes believed at ``as_of`` (an ISO date or date-time, or a
    commit of one of ``project``'s git sources: its commit time): written by then
    (``valid_from_ts`` for the current text of an updated note), and not superseded by
    then. None: no as_of."""
    if as_of is None:
        return None
    when = parse_iso(as_of.strip()) if isinstance(as_of, str) and len(as_of) <= 64 else None
    ts = when.timestamp() if when is not None else _commit_time(m, as_of, project)
    if ts is None:
        raise InvalidArgument(f"as_of={str(as_of)[:64]!r} is neither a date nor a commit of "
                              f"{project!r}'s sources: give an ISO date or date-time such as "
                              "2026-03-01 or 2026-03-01T12:00:00Z, or a commit id",
                              field="as_of")
    if ts > m.clock.now().timestamp():
        raise InvalidArgument("as_of is in the future: the brain believes nothing yet "
                              "there; leave it out for what it believes now", field="as_of")
    return ([Range("created_ts", lte=ts)],
            [Range("valid_from_ts", gt=ts), Range("valid_to_ts", gt=0, lte=ts)])


def _unkeyed(m: NoteCore, rf: RecallFilter, types: tuple[str, ...], contextual: bool) -> Filter:
    """The conditions a recall key stands for, asked one by one: a store whose backfill is
    not done, or a search across models (``fingerprint_match`` off)."""
    must: list[Any] = [MatchAny("memory_type", types)]
    if rf.fingerprint_match:
        must.append(Match("embed_model", m.meta.model))
    # Private notes of sibling agents stay invisible unless asked for.
    must.extend(tenancy.conditions(m.identity, siblings=rf.include_siblings))
    must_not = () if contextual else (MatchAny("note_kind", CONTEXTUAL_KINDS),)
    return Filter(must=NOTE_FILTER.must + tuple(must), must_not=NOTE_FILTER.must_not + must_not)


def _commit_time(m: NoteCore, ref: str, project: str) -> float | None:
    commit_time = getattr(m.citer, "commit_time", None)  # the citations' git, when on
    if commit_time is None or not isinstance(ref, str) or len(ref) > 64:
        return None
    try:
        t = commit_time(ref, project)
    except InvalidArgument:  # not a ref's shape
        return None
    return float(t) if t is not None else None

def branch_conditions(m: NoteCore, rf: RecallFilter, project: str | None) -> list[Filter]:
    """What the branch rule hides (brain/citations/branches.py): notes still open on a
    branch other than the one asked for (``rf.branch``, else the caller's). Nothing for
    ``"*"``, without git, or across projects (no one branch is current there)."""
    asked = rf.branch or ""
    if not isinstance(asked, str) or len(asked) > 200 or asked.startswith("-") or any(
            c.isspace() for c in asked):
        raise InvalidArgument(f"{str(asked)[:60]!r} is not a branch: pass a branch name, "
                              '"*" for every branch, or leave it out for yours',
                              field="branch")
    # Asked even for "*" or a named branch: the answer notices a merge or a deleted branch
    # (brain/citations/branches.py promotes or archives before this search runs).
    current = (m.branches.current(project) if m.branches is not None and project
               and not rf.all_projects else None)
    if asked == "*":
        return []
    open_ = Range("branch_open", gte=1)
    if not asked:
        if current is None:
            return []
        if not current:  # a detached HEAD: on no branch, so no branch's notes
            return [Filter(must=(open_,))]
        asked = current
    return [Filter(must=(open_,), must_not=(Match("branch", asked),))]


def on_another_branch(m: NoteCore, payload: dict[str, Any]) -> bool:
    """Whether ``payload`` is a note still open on a branch other than the caller's: what
    :func:`branch_conditions` hides from a search by default, for the reads that step from
    note to note (get_related, deep_search's hops) rather than search."""
    if not payload.get("branch_open"):
        return False
    project = payload.get("project")
    current = m.branches.current(project) if m.branches is not None and project else None
    # no git for the project: nothing hidden; a detached HEAD ("") is on no branch
    return current is not None and payload.get("branch") != current


def salience_condition(m: NoteCore, floor: float) -> Filter:
    """Notes whose salience now (it decays on read) is at least ``floor``: an exact, indexed
    range on their time-invariant ``salience_key`` (brain/memory/salience.py)."""
    now_ts = m.clock.now().timestamp()
    keyed = Range("salience_key", gte=salience.key_floor(floor, now_ts, m.half_life_s()))
    if m.meta.salience_half_life_days is not None:
        return Filter(must=(keyed,))
    # A store the decay worker has not keyed yet (one from before keys existed): its notes
    # without a key pass on their stored salience, as they did before.
    unkeyed = Filter(must=(Range("salience", gte=floor),),
                     must_not=(Range("salience_key", gte=-1e300),))
    return Filter(should=(keyed, unkeyed))


_RULE_FIELDS = frozenset({"key", "value", "any", "none_of", "not", "gte", "gt", "lte", "lt"})
_RULE_SHAPES = ("each custom filter is {key, value} | {key, any: [...]} | {key, none_of: [...]} "
                "| {key, gte/lte/gt/lt}, and any of them with not: true to exclude its matches")


def _custom_condition(rule: dict[str, Any]) -> tuple[Any, bool]:
    """The store condition of one rule and whether it excludes (``not``, ``none_of``)."""
    if not isinstance(rule, dict) or "key" not in rule or set(rule) - _RULE_FIELDS:
        raise InvalidArgument(_RULE_SHAPES, field="custom")
    key = check_filter_key(rule["key"])
    if key in ("kind", "forgotten", "user_id", recall_key.FIELD):
        raise InvalidArgument(f"custom filters cannot override {key!r}", field="custom")
    negated = rule.get("not", False)
    if not isinstance(negated, bool):
        raise InvalidArgument(f"custom filter on {key!r}: not must be true or false",
                              field="custom")
    if "none_of" in rule:
        if negated or {"value", "any"} & set(rule):
            raise InvalidArgument(f"custom filter on {key!r}: none_of stands alone (it is "
                                  "already a negation); " + _RULE_SHAPES, field="custom")
        return MatchAny(key, _values(rule["none_of"], key, "none_of")), True
    if "value" in rule:
        return Match(key, check_filter_value(rule["value"], key)), negated
    if "any" in rule:
        return MatchAny(key, _values(rule["any"], key, "any")), negated
    bounds: dict[str, float] = {}
    for bound in ("gte", "gt", "lte", "lt"):
        if bound in rule:
            bounds[bound] = check_number(rule[bound], f"custom filter {key!r} {bound}",
                                         lo=-1e300, hi=1e300)
    if bounds:
        return Range(key, **bounds), negated
    raise InvalidArgument(f"custom filter on {key!r} needs value, any, none_of, or a range "
                          "bound", field="custom")


def _values(values: Any, key: str, name: str) -> tuple[Any, ...]:
    if not isinstance(values, list) or not 0 < len(values) <= MAX_FILTER_VALUES:
        raise InvalidArgument(f"custom filter on {key!r}: {name} must be a list of 1 to "
                              f"{MAX_FILTER_VALUES} values", field="custom")
    return tuple(check_filter_value(v, key) for v in values)
