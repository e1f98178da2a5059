"""The write path of notes: validate, redact, enrich, embed, store, link both ways.

Module functions over a :class:`~brain.memory.core.NoteCore` (``m``); MemoryService exposes
the public ones as its methods. Every store write holds ``m._write_lock``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from brain.errors import Conflict, InvalidArgument
from brain.memory import hype, supersede
from brain.memory.core import (
    NOTE_FILTER,
    NoteCore,
    WriteResult,
    merge_tags,
    require_enum,
    require_text,
)
from brain.memory.enrich import enrich
from brain.notes import (
    NEW_MEMORY_TYPES,
    NOTE_KINDS,
    RELATIONS,
    NewMemoryType,
    NoteKind,
    NotePayload,
    new_zk_id,
    point_id,
)
from brain.search.fusion import looks_like_code
from brain.trust import tenancy
from brain.trust.limits import check_tags
from brain.trust.redact import redact, redact_tags, redact_tree
from brain.vector_store import Match, Point


def prepare_content(m: NoteCore, content: str, name: str = "content") -> tuple[str, tuple[str, ...]]:
    content = require_text(content, name, m.cfg.max_content_chars)
    if not m.cfg.redact_secrets:
        return content, ()
    red = redact(content)
    return red.text, red.kinds


def new_payload(
    m: NoteCore,
    content: str,
    project: str | None = None,
    memory_type: str = "permanent",
    note_kind: str = "general",
    tags: Sequence[str] | None = None,
    pinned: bool = False,
    visibility: str = "shared",
    context: str | None = None,
    extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A validated, redacted, heuristically enriched note payload (zk_id not yet drawn),
    and the kinds of secrets redacted. Shared by add and the bulk importer."""
    project = m.project_of(project)
    # Checked against the enums of brain/notes.py, so the casts below only name what holds.
    mtype = cast(NewMemoryType, require_enum(memory_type, NEW_MEMORY_TYPES, "memory_type"))
    kind = cast(NoteKind, require_enum(note_kind, NOTE_KINDS, "note_kind"))
    shown_to = tenancy.check_visibility(visibility)
    tags = check_tags(tags)
    content, redacted = prepare_content(m, content)
    if tags and m.cfg.redact_secrets:  # a tag is stored, indexed and exported too
        tags, tag_kinds = redact_tags(list(tags))
        redacted = tuple(sorted(set(redacted) | set(tag_kinds)))
    if context is not None and context.strip():
        context, more = prepare_content(m, context, "context")
        redacted = tuple(sorted(set(redacted) | set(more)))
    else:
        context = None
    enr = enrich(content, note_kind, project)
    now, ts = m._now()
    ident = m.identity
    note: NotePayload = {
        "kind": "note",
        "zk_id": "",
        "title": enr.title,
        "content": content,
        "is_code": looks_like_code(content),
        "context": context or enr.context,
        "context_by": "caller" if context else "heuristic",
        "keywords": enr.keywords,
        "tags": merge_tags(list(tags or []), enr.tags),
        "links": [],
        "link_types": {},
        "memory_type": mtype,
        "note_kind": kind,
        "pinned": bool(pinned),
        "project": project,
        "created": now,
        "updated": now,
        "created_ts": ts,
        "updated_ts": ts,
        "access_count": 0,
        "last_accessed": "",
        "last_accessed_ts": 0.0,
        "user_id": ident.user_id,
        "agent_id": ident.agent_id,
        "visibility": shown_to,
        "salience": 1.0 if pinned else 0.5,
        "embed_model": m.meta.model,
        "enriched_by": "heuristic",
        "forgotten": False,
    }
    return m.keyed({**note, **(extra or {})}), redacted


def add(
    m: NoteCore,
    content: str,
    project: str | None = None,
    memory_type: str = "permanent",
    note_kind: str = "general",
    tags: Sequence[str] | None = None,
    pinned: bool = False,
    visibility: str = "shared",
    extra: dict[str, Any] | None = None,
    links: Sequence[tuple[str, str]] = (),
    autolink: bool = True,
    context: str | None = None,
    cites: Sequence[str] = (),
    soft_cites: Sequence[str] = (),
    supersedes: Sequence[str] | None = None,
    detect: bool = True,
) -> WriteResult:
    """``cites``: code the note cites (each must resolve); ``soft_cites``: references kept
    when they resolve (close_session's key_files). See brain/citations. ``supersedes``:
    notes this one replaces; ``detect``: also look for notes it replaces unsaid (a
    permanent note; brain/memory/supersede.py)."""
    targets = []
    for target, relation in links:
        require_enum(relation, RELATIONS, "relation")
        targets.append(m.get_payload(target))
    # A note's context is its own: the caller's, or what enrichment derives from the note.
    # The note before it in the caller's session is at most a neighbour link (thread_prev,
    # scored by retrieval.neighbour_weight), recorded only with [memory] session_context:
    # consecutive notes of a coding agent are often unrelated (issue 52).
    thread = session_thread(m, project) if m.cfg.session_context else None
    previous = m.threads.previous(thread) if thread is not None else None
    if previous is not None:
        extra = {**(extra or {}), "thread_prev": previous[0]}
    payload, redacted = new_payload(
        m, content, project, memory_type, note_kind, tags, pinned, visibility, context, extra)
    if not all(tenancy.may_link(payload, t) for t in targets):
        raise InvalidArgument("a shared note cannot link to a private one (its readers "
                              "would learn the id); make this note private too",
                              field="visibility")
    if m.citer is not None:  # before the write: a citation that does not resolve refuses it
        m.citer.attach(payload, cites, soft_cites)
    project = payload["project"]
    olds = supersede.targets(m, payload, supersedes)  # checked before anything is written
    verdicts: list[supersede.Verdict] = []
    with m._write_lock:
        zk_id = _unused_id(m)
        payload["zk_id"] = zk_id
        dense, sparse = m._vectors(payload)
        if detect and payload["memory_type"] == "permanent":
            explicit = {o["zk_id"] for o in olds}
            verdicts = [v for v in supersede.detect(m, payload, dense) if v.zk_id not in explicit]
            proposed = [v.zk_id for v in verdicts if v.confidence == "proposed"]
            if proposed:
                payload["proposed_supersedes"] = proposed
        linked: list[dict[str, str]] = []
        for target, relation in links:
            payload["links"].append(target)
            payload["link_types"][target] = relation
        if memory_type == "permanent" and autolink:
            for hit in _link_candidates(m, dense, project, zk_id, visibility):
                z = hit.payload["zk_id"]
                if z not in payload["links"]:
                    payload["links"].append(z)
                    payload["link_types"][z] = "related"
        if payload["links"]:
            m.meta.mark_graph_dirty()
        m.store.upsert([Point(point_id(zk_id), payload, dense, sparse)])
        if payload["links"]:
            linked = _backlink(m, zk_id, payload)
        m.graph.upsert_node(zk_id)
        _sync_graph(m, zk_id, payload)
        detected = [v for v in verdicts if v.confidence == "applied"]
        if payload.get("proposed_supersedes"):
            supersede.propose(m, payload, payload["proposed_supersedes"])
        if olds or detected:
            found = {pt.payload["zk_id"]: pt.payload for pt in
                     m.store.retrieve([point_id(v.zk_id) for v in detected])}
            supersede.apply(m, payload, [*olds, *(found[v.zk_id] for v in detected
                                                 if v.zk_id in found)])
    if thread is not None:
        m.threads.advance(thread, zk_id, payload["content"])
    m._emit("added", payload)
    result = WriteResult(m.public(payload), redacted, linked)
    if olds or verdicts:
        result.supersession = {"superseded": [o["zk_id"] for o in olds]
                               + [v.zk_id for v in verdicts if v.confidence == "applied"],
                               "detected": [v.as_dict() for v in verdicts]}
    return result


def session_thread(m: NoteCore, project: str | None) -> tuple[str, str, str]:
    """The caller's session thread in ``project`` (the key of NoteCore.threads)."""
    ident = m.identity
    return (ident.user_id, ident.agent_id, m.project_of(project))


def begin_session(m: NoteCore, project: str) -> None:
    """open_session: the caller's next note in ``project`` starts a new thread."""
    if m.cfg.session_context:
        m.threads.begin(session_thread(m, project))


def _unused_id(m: NoteCore) -> str:
    while True:
        zk = new_zk_id()
        if not m.store.retrieve([point_id(zk)]):
            return zk


def _link_candidates(
    m: NoteCore, dense: Sequence[float], project: str, exclude: str, visibility: str = "shared"
) -> list[Any]:
    flt = NOTE_FILTER.and_(Match("project", project), Match("memory_type", "permanent"),
                           *m._tenancy(), *tenancy.linkable(visibility))
    hits = m.store.query_dense(dense, flt, m.cfg.link_candidates + 1)
    return [h for h in hits if h.payload.get("zk_id") != exclude
            and h.score >= m.cfg.link_threshold][: m.cfg.link_candidates]


def _backlink(m: NoteCore, zk_id: str, payload: dict[str, Any]) -> list[dict[str, str]]:
    """Make every link of ``zk_id`` bidirectional (same relation on the way back for
    symmetric ones, ``related`` for directed ones)."""
    linked = []
    m.meta.mark_graph_dirty()
    targets = m.store.retrieve([point_id(z) for z in payload["links"]])
    for tgt in targets:
        p = tgt.payload
        relation = payload["link_types"].get(p["zk_id"], "related")
        linked.append({"zk_id": p["zk_id"], "relation": relation, "title": p.get("title", "")})
        if zk_id in p.get("links", []) or not tenancy.may_link(p, payload):
            continue
        back = relation if relation in ("related", "contradicts") else "related"
        new_links = [*p.get("links", []), zk_id]
        new_types = {**p.get("link_types", {}), zk_id: back}
        m.store.set_payload([tgt.id], {"links": new_links, "link_types": new_types})
        _sync_graph(m, p["zk_id"], {**p, "links": new_links, "link_types": new_types})
    return linked


def _sync_graph(m: NoteCore, zk_id: str, payload: dict[str, Any]) -> None:
    m.meta.mark_graph_dirty()
    m.graph.set_links(zk_id, list(payload.get("links", [])), dict(payload.get("link_types", {})))


def link(m: NoteCore, src: str, dst: str, relation: str = "related") -> None:
    """Add one typed link src -> dst (and the way back)."""
    require_enum(relation, RELATIONS, "relation")
    with m._write_lock:
        p = m.get_payload(src)
        if not tenancy.may_link(p, m.get_payload(dst)):
            return  # a shared note never names a private one
        links = list(p.get("links", []))
        types = dict(p.get("link_types", {}))
        if dst not in links:
            links.append(dst)
        types[dst] = relation
        m.meta.mark_graph_dirty()
        m.store.set_payload([point_id(src)], {"links": links, "link_types": types})
        new = {**p, "links": links, "link_types": types}
        _sync_graph(m, src, new)
        _backlink(m, src, new)


def update(m: NoteCore, zk_id: str, new_content: str | None,
           supersedes: Sequence[str] | None = None, keep_history: bool = False) -> WriteResult:
    """Correct a note. ``keep_history`` (update_memory): its earlier text is kept as a
    version note it supersedes (its ``history``); the brain's own rewrites (a repeated
    failure's merged text, a refined handoff) keep none. ``supersedes`` (confirms a proposal,
    and settles the rest): the notes it replaces; ``new_content`` None: only that."""
    if new_content is None:
        if supersedes is None:
            raise InvalidArgument("give new_content, supersedes, or both", field="new_content")
        return WriteResult(m.public(supersede.confirm(m, zk_id, supersedes)))
    content, redacted = prepare_content(m, new_content, "new_content")
    with m._write_lock:
        old = m.get_payload(zk_id)
        olds = supersede.targets(m, old, supersedes)
        if content == old.get("content") and supersedes is not None:
            return WriteResult(m.public(supersede.confirm(m, zk_id, supersedes)), redacted)
        enr = enrich(content, old.get("note_kind", "general"), old.get("project", ""))
        now, ts = m._now()
        changed = content != old.get("content")
        version = [_keep_version(m, old, now, ts)] if keep_history and changed else []
        payload = {
            **old,
            "content": content,
            "is_code": looks_like_code(content),
            "title": enr.title,
            "keywords": enr.keywords,
            "tags": merge_tags([t for t in old.get("tags", []) if t not in old.get("keywords", [])], enr.tags),
            "updated": now,
            "updated_ts": ts,
            "enriched_by": "heuristic",
            "embed_model": m.meta.model,
        }
        if version:  # its current text is believed from now on (an as_of search)
            payload.update(valid_from=now, valid_from_ts=ts)
        if m.citer is not None:  # the caller has read the code again: anchor to it now
            m.citer.reanchor(payload)
        dense, sparse = m._vectors(payload)
        m.store.upsert([Point(point_id(payload["zk_id"]), payload, dense, sparse)])
        if version or olds:
            supersede.apply(m, payload, [*version, *olds])
        if supersedes is not None and payload.get("proposed_supersedes"):
            payload["proposed_supersedes"] = []
            m.store.set_payload([point_id(payload["zk_id"])], {"proposed_supersedes": []})
        # Questions of the old content would find the new one: gone now, rewritten by the
        # "updated" job when a model is configured.
        hype.drop(m.store, [payload["zk_id"]])
        m.graph.upsert_node(payload["zk_id"])
    m._emit("updated", payload)
    return WriteResult(m.public(payload), redacted)


def _keep_version(m: NoteCore, old: dict[str, Any], now: str, ts: float) -> dict[str, Any]:
    """Store the note's text before an update as a version note (its own id, vectors and
    validity; no links, so the graph and get_related stay as they were)."""
    pts = m.store.retrieve([point_id(old["zk_id"])], with_vectors=True)
    vid = _unused_id(m)
    version = {**old, "zk_id": vid, "version_of": old["zk_id"], "links": [], "link_types": {},
               "supersedes": [], "proposed_supersedes": [], "superseded_by": old["zk_id"],
               "valid_to": now, "valid_to_ts": ts,
               "valid_from": old.get("valid_from") or old.get("created", ""),
               "valid_from_ts": old.get("valid_from_ts") or old.get("created_ts", 0.0)}
    if pts and pts[0].dense is not None:
        dense, sparse = pts[0].dense, pts[0].sparse
    else:  # pragma: no cover - a store that gives no vectors back
        dense, sparse = m._vectors(version)
    m.store.upsert([Point(point_id(vid), m.keyed(version), dense, sparse)])
    return version


def apply_fields(m: NoteCore, zk_id: str, fields: dict[str, Any], reembed: bool) -> dict[str, Any]:
    """Overwrite some fields of a note (enrichment, evolution); re-embed when asked."""
    if m.cfg.redact_secrets:  # an LLM's title, context or tags are text entering too
        fields = redact_tree(fields)
    with m._write_lock:
        old = m.get_payload(zk_id, include_forgotten=True)
        now, ts = m._now()
        if "content" in fields:
            fields = {**fields, "is_code": looks_like_code(str(fields["content"]))}
        payload = {**old, **fields, "updated": now, "updated_ts": ts}
        if reembed:
            dense, sparse = m._vectors(payload)
            payload["embed_model"] = m.meta.model
            m.store.upsert([Point(point_id(old["zk_id"]), payload, dense, sparse)])
        else:
            m.store.set_payload([point_id(old["zk_id"])], {**fields, "updated": now,
                                                            "updated_ts": ts})
        if "title" in fields:
            m.graph.upsert_node(old["zk_id"])
    return payload


def set_tags(m: NoteCore, zk_id: str, tags: Sequence[str]) -> dict[str, Any]:
    """Make a note's tags exactly ``tags`` (checked and redacted like add's); tags are in
    the keyword vector, so the note is embedded again."""
    clean = list(check_tags(tags) or [])
    if clean and m.cfg.redact_secrets:
        clean, _ = redact_tags(clean)
    m.get_payload(zk_id)  # a forgotten or unseen note is refused before anything is written
    payload = apply_fields(m, zk_id, {"tags": list(dict.fromkeys(clean))}, reembed=True)
    return m.public(payload)


def distill(m: NoteCore, zk_id: str) -> WriteResult:
    with m._write_lock:
        p = m.get_payload(zk_id)
        if p["memory_type"] != "fleeting":
            raise Conflict(f"note {p['zk_id']} is {p['memory_type']}, not fleeting: only "
                           "fleeting notes are distilled", zk_id=p["zk_id"])
        enr = enrich(p["content"], p["note_kind"], p["project"])
        fields = {"memory_type": "permanent", "title": enr.title, "keywords": enr.keywords,
                  "tags": merge_tags(p.get("tags", []), enr.tags), "enriched_by": "heuristic"}
        payload = apply_fields(m, p["zk_id"], fields, reembed=True)
        dense = m.embed_notes([payload])[0].tolist()
        links = list(payload.get("links", []))
        types = dict(payload.get("link_types", {}))
        for hit in _link_candidates(m, dense, payload["project"], p["zk_id"],
                                    payload.get("visibility", "shared")):
            z = hit.payload["zk_id"]
            if z not in links:
                links.append(z)
                types[z] = "related"
        linked: list[dict[str, str]] = []
        if links != payload.get("links", []):
            m.meta.mark_graph_dirty()
            m.store.set_payload([point_id(p["zk_id"])], {"links": links, "link_types": types})
            payload = {**payload, "links": links, "link_types": types}
            _sync_graph(m, p["zk_id"], payload)
            linked = _backlink(m, p["zk_id"], payload)
    m._emit("distilled", payload)
    return WriteResult(m.public(payload), (), linked)
