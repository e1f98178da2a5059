"""Supersession: a newer note that replaces an older one's claim, and the history it keeps.

A note supersedes an older one explicitly (``add(..., supersedes=[...])``, or ``update``,
which keeps the text it replaces as a version note) or when the write path detects it
(:func:`judge`). The older note gets ``superseded_by`` (the newer id), ``valid_to`` and
``valid_to_ts`` (when it stopped being believed); the newer one lists it in ``supersedes``.
A superseded note leaves default search (its recall key's class is ``old``,
brain/store/recall_key.py), stays readable by id, is listed in the newer note's ``history``
and is found by an ``as_of`` search of a time it was valid. Forgetting the newer note
brings the older ones back (:func:`release`); restoring it supersedes them again.

Who may supersede whom (:func:`check_pair`): the same user and project, and the same
audience (a shared note supersedes shared ones only, a private one only its own agent's
private ones), so a supersession never names a note to someone who may not see it, nor
hides a note from someone who cannot see what replaced it.

Detection is lexical over a dense neighbourhood, no model needed. A candidate is a note of
the same project and audience at least ``PROPOSE_SIMILARITY`` similar. The two claims
(:func:`claim`: without a kind label like "Decision:", asides in parentheses, and the old
value a newer note's "from X to Y" names) are compared as sets of terms: the shared terms
are the subject, the terms only one side has are its values. A claim changed when both sides
have values of their own, few of them, on a shared subject; and only one kind of value
changed (numbers, or names, or words): a change of both a name and a number reads as another
subject's fact ("retry limit of the mailer is 3" against "... of the indexer is 5"), and a
changed term counts only where it stands as a value, after the text's last "is", "=",
"named", "to", "now", "key:" ... ("the billing module checks invoices" against "... checks
refunds" is two facts, and so are "step 2 of the build" and "step 3 of the build").
Confidence:

- **applied**: similarity >= ``APPLY_SIMILARITY`` and subject overlap >= ``APPLY_OVERLAP``;
  or exactly one value changed on each side, with that overlap and similarity >=
  ``SLOT_SIMILARITY`` (a changed value moves a short note's vector a lot: "the cache
  backend is redis" / "... memcached" are 0.6 to 0.75 similar in MiniLM); or a citation of
  the same code (path and symbol) with similarity >= ``PROPOSE_SIMILARITY``;
- **proposed**: otherwise, when similarity >= ``PROPOSE_SIMILARITY`` and overlap >=
  ``PROPOSE_OVERLAP``. A proposal changes no search: the newer note records it in
  ``proposed_supersedes``, the older in ``proposed_by``. ``forget_memory`` of the older
  note confirms it (:func:`settle`: superseded, not forgotten); ``update(newer, None,
  supersedes=[...])`` confirms the ids it lists and drops every other proposal
  (``supersedes=[]`` rejects them all); left alone, both notes stay current.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from brain.errors import InvalidArgument
from brain.memory.core import NOTE_FILTER, NoteCore
from brain.notes import point_id
from brain.trust import tenancy
from brain.trust.limits import MAX_ITEMS
from brain.vector_store import Filter, Match, Range
from brain.vector_store.base import Condition

APPLY_SIMILARITY = 0.80
APPLY_OVERLAP = 0.6
PROPOSE_SIMILARITY = 0.70
SLOT_SIMILARITY = 0.55  # one value changed on a shared subject: a lower similarity will do
PROPOSE_OVERLAP = 0.45
MAX_CHANGED_TERMS = 4  # per side: more reads as another claim, not a changed value
CANDIDATES = 5
MAX_HISTORY = 20

Confidence = Literal["applied", "proposed"]

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*[a-z%]*|[a-z_][a-z0-9_.\-/]*[a-z0-9_]|[a-z]", re.I)
_STOP_WORDS = (
    "a an the is are was were be been being now no longer new old instead of to from "
    "for in on at by with and or but not it its this that these those as we our us "
    "use used uses using set changed change changes raised lowered moved renamed "
    "since than then there here so also which what when where who will would should "
    "can could may might must has have had do does "
    "upgraded downgraded switched migrated bumped replaced increased decreased reduced "
    "updated "
)
_STOP = frozenset(_STOP_WORDS.split())
# What a claim is compared by, not its wording: a leading kind label ("Decision:", "Fix:"),
# an aside in parentheses ("... PostgreSQL 16 (14 is end of life)"), and in the newer note
# the old value a "from X to Y" names (:func:`claim`).
_LABEL = re.compile(r"^\s*(?:decision|decided|fix|fixed|mistake|note|update|context|pattern)"
                    r"\s*:\s*", re.I)
_ASIDE = re.compile(r"\([^()]*\)")
_FROM_TO = re.compile(r"\bfrom\s+((?:\S+\s+){0,2}?\S+)\s+(?=to\b)", re.I)


def _kind(token: str) -> str:
    if token[0].isdigit():
        return "number"
    if any(c in token for c in "_./-") or any(c.isdigit() for c in token):
        return "name"
    return "word"


def claim(text: str, replaced: set[str] | frozenset[str] = frozenset()) -> str:
    """The part of a note's text its claim is judged by: without a leading kind label or
    asides in parentheses, and, for a newer note, without the old values (``replaced``, the
    older note's terms) its "from X to Y" names: "We changed the queue from jobs to tasks"
    claims tasks. A word of X the rest of the claim repeats stays ("from PostgreSQL 14")."""
    text = _ASIDE.sub(" ", _LABEL.sub("", text))
    if not replaced:
        return text

    def drop(m: re.Match[str]) -> str:
        words = m.group(1).split()
        old = [w for w in words if w.lower().rstrip(".,") in replaced]
        if len(words) > 1:  # keep the words: "PostgreSQL" of "from PostgreSQL 14 to 16"
            old = [w for w in old if _kind(w.lower()) != "word"]
        kept = [w for w in words if w not in old]
        return " ".join(kept) + " " if kept else ""

    return _FROM_TO.sub(drop, text)


def terms(text: str) -> set[str]:
    """The terms a claim is compared by: lower-cased words, names and numbers, no stopwords."""
    return {t.lower().rstrip(".,") for t in _TOKEN.findall(text)} - _STOP - {""}


@dataclass(frozen=True, slots=True)
class Verdict:
    zk_id: str
    confidence: Confidence
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"zk_id": self.zk_id, "confidence": self.confidence, "why": self.why}


def _cite_keys(payload: dict[str, Any]) -> set[tuple[str, str]]:
    return {(str(c.get("path", "")), str(c.get("symbol") or c.get("lines") or ""))
            for c in payload.get("cites") or () if isinstance(c, dict) and c.get("symbol")}


_CUE = frozenset({"is", "are", "=", ":", "to", "now", "named", "called", "uses", "use",
                  "set", "became", "becomes", "be", "at"})


def _stated(text: str, changed: set[str]) -> bool:
    """Whether a changed word or name stands where a value does: within three words after
    the last "is", "=", "named", "to", "now", "key:" ... of the text ("the queue is now
    named tasks"; not "we set the login limit to 3", whose value is 3)."""
    raw = re.findall(r"[^\s`'\"()]+", text)
    words = [t.lower().strip(".,:=") for t in raw]
    cues = [i for i, (w, r) in enumerate(zip(words, raw, strict=True))
            if w in _CUE or r.endswith((":", "="))]
    if not cues:
        return False
    return any(w in changed for w in words[cues[-1] + 1:cues[-1] + 4])


def _subject_changed(text: str, changed: set[str]) -> bool:
    """Whether a changed term stands before the value, in the claim's subject: "the build 1
    uses cache tier 1" against "the build 0 uses cache tier 0" is another build's fact, and
    "the setting_6_2 limit is 62" another setting's, however alike the two read."""
    raw = re.findall(r"[^\s`'\"()]+", text)
    words = [t.lower().strip(".,:=") for t in raw]
    cues = [i for i, (w, r) in enumerate(zip(words, raw, strict=True))
            if w in _CUE or r.endswith((":", "="))]
    return bool(cues) and any(w in changed for w in words[:cues[-1]])


def judge(new: dict[str, Any], old: dict[str, Any], similarity: float) -> Verdict | None:
    """Whether ``new`` supersedes ``old`` (see the module docstring), and how surely."""
    if similarity < SLOT_SIMILARITY:
        return None
    old_text = claim(old.get("content", ""))
    b = terms(old_text)
    new_text = claim(new.get("content", ""), b)
    a = terms(new_text)
    mine, theirs, shared = a - b, b - a, a & b
    if not mine or not theirs or not shared:
        return None  # the same claim restated, or nothing in common
    if len(mine) > MAX_CHANGED_TERMS or len(theirs) > MAX_CHANGED_TERMS:
        return None
    if _subject_changed(new_text, mine) or _subject_changed(old_text, theirs):
        return None  # the changed term names what the claim is about: another subject
    kinds = {_kind(t) for t in mine | theirs}
    cited = bool(_cite_keys(new) & _cite_keys(old))
    if not cited and not _stated(new_text, mine):
        return None  # a changed term that is no setting's value: another subject ("note 2")
    if len(kinds) > 1 and not cited and kinds != {"word"}:
        return None  # a name and a number changed: another subject's fact
    overlap = len(shared) / min(len(a), len(b))
    why = (f"similarity {similarity:.2f}, shared terms {overlap:.2f}, changed "
           f"{'/'.join(sorted(kinds))}: {', '.join(sorted(theirs))} -> {', '.join(sorted(mine))}")
    if cited and similarity >= PROPOSE_SIMILARITY:
        return Verdict(old["zk_id"], "applied", why + ", same cited code")
    if len(mine) == len(theirs) == 1 and overlap >= APPLY_OVERLAP:
        return Verdict(old["zk_id"], "applied", why + ", one value changed")
    if similarity < PROPOSE_SIMILARITY:
        return None
    if similarity >= APPLY_SIMILARITY and overlap >= APPLY_OVERLAP:
        return Verdict(old["zk_id"], "applied", why)
    if overlap >= PROPOSE_OVERLAP:
        return Verdict(old["zk_id"], "proposed", why)
    return None


def detect(m: NoteCore, payload: dict[str, Any], dense: Sequence[float]) -> list[Verdict]:
    """The verdicts on the notes a new note (not yet stored) may supersede."""
    flt = NOTE_FILTER.and_(Match("project", payload["project"]),
                           Match("memory_type", payload["memory_type"]),
                           *tenancy.same_audience(payload), *m._tenancy(),
                           *_same_branch(payload))
    out = []
    for hit in m.store.query_dense(dense, flt, CANDIDATES):
        old = hit.payload
        if old.get("superseded_by") or old.get("zk_id") == payload.get("zk_id"):
            continue
        if not _same_audience(payload, old):
            continue
        verdict = judge(payload, old, hit.score)
        if verdict is not None:
            out.append(verdict)
    return out


def _same_branch(payload: dict[str, Any]) -> tuple[Condition | Filter, ...]:
    """Where a detected supersession may look (brain/citations/branches.py): a note still open
    on a branch supersedes notes open on that branch only (the project's fact stays true on
    the default branch until the branch merges); a project-wide note, project-wide ones."""
    open_ = Range("branch_open", gte=1)
    if payload.get("branch_open"):
        return (open_, Match("branch", payload.get("branch", "")))
    return (Filter(must_not=(open_,)),)


def _same_audience(new: dict[str, Any], old: dict[str, Any]) -> bool:
    if new.get("visibility", "shared") != old.get("visibility", "shared"):
        return False
    return new.get("visibility") != "private" or new.get("agent_id") == old.get("agent_id")


def check_pair(new: dict[str, Any], old: dict[str, Any]) -> None:
    """Refuse a supersession that would cross users, projects or audiences."""
    if old["zk_id"] == new.get("zk_id"):
        raise InvalidArgument("a note cannot supersede itself", field="supersedes")
    if new.get("user_id") != old.get("user_id") or new.get("project") != old.get("project"):
        raise InvalidArgument(f"{old['zk_id']} is in another project; a note supersedes "
                              "notes of its own project only", field="supersedes")
    if not _same_audience(new, old):
        raise InvalidArgument(
            f"{old['zk_id']} is {old.get('visibility', 'shared')}, this note "
            f"{new.get('visibility', 'shared')}: a note supersedes only notes of the same "
            "visibility (and, when private, of the same agent)", field="supersedes")


def targets(m: NoteCore, new: dict[str, Any], ids: Iterable[str] | None) -> list[dict[str, Any]]:
    """The notes ``new`` explicitly supersedes, each checked (unseen or forgotten ids are
    refused as not found, before anything is written)."""
    ids = list(ids or ())
    if len(ids) > MAX_ITEMS:
        raise InvalidArgument(f"supersedes takes at most {MAX_ITEMS} ids", field="supersedes")
    out: list[dict[str, Any]] = []
    for z in ids:
        old = m.get_payload(z)
        check_pair(new, old)
        if old["zk_id"] not in {o["zk_id"] for o in out}:
            out.append(old)
    return out


def apply(m: NoteCore, new: dict[str, Any], olds: Sequence[dict[str, Any]]) -> list[str]:
    """Mark ``olds`` superseded by the stored note ``new`` (caller holds the write lock);
    returns the ids newly superseded. The newer note's ``supersedes`` lists them."""
    now, ts = m._now()
    done = []
    for old in olds:
        if old.get("superseded_by") == new["zk_id"]:
            continue
        m.store.set_payload([point_id(old["zk_id"])], {
            "superseded_by": new["zk_id"], "valid_to": now, "valid_to_ts": ts})
        done.append(old["zk_id"])
    listed = list(dict.fromkeys([*new.get("supersedes", []), *(o["zk_id"] for o in olds)]))
    if listed != new.get("supersedes", []):
        new["supersedes"] = listed
        m.store.set_payload([point_id(new["zk_id"])], {"supersedes": listed})
    return done


def release(m: NoteCore, newer: dict[str, Any]) -> list[str]:
    """The newer note was forgotten: the notes it superseded are believed again (a version
    kept by update stays history: it was the same note's earlier text)."""
    back = []
    for pt in m.store.retrieve([point_id(z) for z in newer.get("supersedes", [])]):
        p = pt.payload
        if p.get("superseded_by") == newer["zk_id"] and not p.get("version_of"):
            m.store.set_payload([pt.id], {"superseded_by": "", "valid_to": "",
                                          "valid_to_ts": 0.0})
            back.append(p["zk_id"])
    return back


def reapply(m: NoteCore, newer: dict[str, Any]) -> list[str]:
    """The newer note was restored: it supersedes again what it superseded and what nothing
    superseded since."""
    olds = [pt.payload for pt in m.store.retrieve([point_id(z) for z in
                                                   newer.get("supersedes", [])])
            if not pt.payload.get("superseded_by") and not pt.payload.get("forgotten")]
    return apply(m, newer, olds) if olds else []


def propose(m: NoteCore, new: dict[str, Any], ids: Sequence[str]) -> None:
    """Record on each older note that ``new`` proposes to supersede it (``proposed_by``), so
    forgetting it confirms the proposal (:func:`settle`)."""
    for pt in m.store.retrieve([point_id(z) for z in ids]):
        by = list(dict.fromkeys([*pt.payload.get("proposed_by", []), new["zk_id"]]))
        m.store.set_payload([pt.id], {"proposed_by": by})


def settle(m: NoteCore, old: dict[str, Any]) -> str | None:
    """``forget_memory`` of a note a live note proposed to supersede: it is superseded by
    that note instead (kept as its history; forgetting it again forgets it). Returns the
    newer id, or None when no live proposal names it."""
    if old.get("superseded_by") or old.get("forgotten"):
        return None
    for pt in m.store.retrieve([point_id(z) for z in old.get("proposed_by", [])]):
        new = pt.payload
        if (new.get("kind") != "note" or new.get("forgotten") or not m.visible(new)
                or old["zk_id"] not in new.get("proposed_supersedes", [])):
            continue
        check_pair(new, old)
        apply(m, new, [old])
        left = [z for z in new["proposed_supersedes"] if z != old["zk_id"]]
        m.store.set_payload([pt.id], {"proposed_supersedes": left})
        m.store.set_payload([point_id(old["zk_id"])], {"proposed_by": []})
        return str(new["zk_id"])
    return None


def history(m: NoteCore, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """What the note replaced, newest first, transitively (at most :data:`MAX_HISTORY`),
    each as its id, text and validity; only notes the caller may see."""
    out: list[dict[str, Any]] = []
    seen = {payload["zk_id"]}
    frontier = [payload]
    while frontier and len(out) < MAX_HISTORY:
        ids = [z for p in frontier for z in p.get("supersedes", []) if z not in seen]
        seen.update(ids)
        frontier = []
        for pt in m.store.retrieve([point_id(z) for z in ids]):
            p = pt.payload
            if p.get("kind") != "note" or not m.visible(p) or p.get("forgotten"):
                continue
            if p.get("superseded_by") not in seen:
                continue  # released, or superseded by another note since
            frontier.append(p)
            out.append({"zk_id": p["zk_id"], "title": p.get("title", ""),
                        "content": p.get("content", ""),
                        "valid_from": p.get("valid_from") or p.get("created", ""),
                        "valid_to": p.get("valid_to", ""),
                        "superseded_by": p["superseded_by"],
                        "version": bool(p.get("version_of"))})
    out.sort(key=lambda h: h["valid_to"], reverse=True)
    return out[:MAX_HISTORY]


def confirm(m: NoteCore, zk_id: str, ids: Sequence[str]) -> dict[str, Any]:
    """``update_memory(zk_id, supersedes=ids)``: supersede ``ids`` and settle every
    proposal the note had (those not listed are rejected)."""
    with m._write_lock:
        new = m.get_payload(zk_id)
        olds = targets(m, new, ids)
        apply(m, new, olds)
        if new.get("proposed_supersedes"):
            new["proposed_supersedes"] = []
            m.store.set_payload([point_id(new["zk_id"])], {"proposed_supersedes": []})
    return new
