"""What each page shows, read from the brain's services as the calling user.

Plain blocking functions of a :class:`~brain.app.Brain`; webui/run.py calls them in a worker
thread inside ``acting_as(caller)`` under the generation gate, the way every tool call runs
(mcp_server.create_server's ``call``). They reuse the services the tools call; the only
filters built here are lists of one kind of note, made of brain/trust/tenancy.py's conditions, as
the services build theirs. Everything is paged or capped: no page loads the whole store.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from brain.app import Brain
from brain.errors import BrainError, NoteNotFound
from brain.memory import RecallFilter
from brain.memory.salience import DAY, salience_now
from brain.trust import tenancy
from brain.vector_store import Filter, Match, MatchAny

PER_PAGE = 20
MAX_HITS = 100  # the tools' top_k bound: a search page goes no deeper
SCAN_CAP = 2000  # a timeline or list reads at most this many notes of one kind
GRAPH_NODES = 150  # notes on the project map
GRAPH_SCAN = 20_000  # linked nodes looked at to find them
CURVE_DAYS = 90


def _page(items: list[Any], page: int, per_page: int = PER_PAGE) -> dict[str, Any]:
    start = (page - 1) * per_page
    return {"items": items[start:start + per_page], "page": page,
            "more": len(items) > start + per_page, "total": len(items)}


def search(b: Brain, q: str, project: str | None, kinds: list[str], tags: list[str],
           include_fleeting: bool, all_projects: bool, scope: str, page: int,
           max_age_days: float | None = None, min_salience: float | None = None
           ) -> dict[str, Any]:
    """Hybrid search over notes, source files and documents, as search_memory, fs_search
    and search_files rank them; every hit says which leg found it (``matched``)."""
    rf = RecallFilter(project=project, include_contextual=True,
                      include_fleeting=include_fleeting, note_kinds=tuple(kinds),
                      tags=tuple(tags), max_age_days=max_age_days, min_salience=min_salience,
                      all_projects=all_projects)
    qvec = b.embedder.embed_query(q).tolist()
    out: dict[str, Any] = {"notes": None, "files": None, "documents": None}
    deep = min(MAX_HITS, page * PER_PAGE + 1)
    if scope in ("all", "notes"):
        hits = b.memory.search(q, deep if scope == "notes" else PER_PAGE + 1, rf, stamp=False,
                               query_vector=qvec)
        out["notes"] = _page(hits, page if scope == "notes" else 1)
    if scope in ("all", "files"):
        found = b.sources.search(q, "semantic", project=None if all_projects else project,
                                 limit=deep if scope == "files" else 6)
        out["files"] = _page(found["results"], page if scope == "files" else 1,
                             PER_PAGE if scope == "files" else 5)
        for hit in out["files"]["items"]:
            hit["freshness"] = _freshness(b, hit)
    if scope in ("all", "documents"):
        docs = b.files.search_with_vector(qvec, q, limit=deep if scope == "documents" else 6,
                                          project=None if all_projects else project)
        out["documents"] = _page(docs, page if scope == "documents" else 1,
                                 PER_PAGE if scope == "documents" else 5)
    return out


def _freshness(b: Brain, hit: dict[str, Any]) -> str:
    """Whether a file hit still says what the file says (fs_read's presence: synced,
    stale_indexed, ...): the disk is read, as fs_read reads it, for the shown hits only."""
    try:
        return str(b.fs.read(str(hit["source"]), str(hit["path"])).get("presence", "unknown"))
    except BrainError:
        return "unknown"


def note(b: Brain, zk_id: str) -> dict[str, Any]:
    """One note as get_note shows it (without stamping an access: looking at a note in
    the explorer is not an agent using it), its links in and out, and its salience curve."""
    m = b.memory
    p = m.get_payload(zk_id, include_forgotten=True)
    citer = getattr(m, "citer", None)  # the code the note cites (brain/citations), if any:
    if citer is not None:  # checked again when its file moved, as get_note checks it
        citer.refresh([p])
    shown = {**m.public(p), "forgotten": bool(p.get("forgotten")),
             "forgotten_at": p.get("forgotten_at", ""), "archived_at": p.get("archived_at", ""),
             "visibility": p.get("visibility", "shared"), "salience_ts": p.get("salience_ts")}
    links_out: list[dict[str, Any]] = []
    links_in: list[dict[str, Any]] = []
    if not p.get("forgotten"):
        out_ids = set(p.get("links", []))
        for r in m.related(p["zk_id"], 1)["related"]:
            if r["zk_id"] in out_ids:
                links_out.append(r)
            if p["zk_id"] in {link["zk_id"] for link in r["links"]}:  # it links here
                links_in.append(r)
    return {"note": shown, "links_out": links_out, "links_in": links_in,
            "curve": salience_curve(b, p)}


def salience_curve(b: Brain, p: dict[str, Any]) -> list[tuple[int, float]]:
    """(day, salience) from now on, as decay will lower it if nothing touches the note."""
    now = b.clock.now().timestamp()
    half = b.memory.half_life_s()
    return [(d, round(salience_now(p, now + d * DAY, half), 4))
            for d in range(0, CURVE_DAYS + 1, 3)]


def graph_note(b: Brain, zk_id: str, depth: int) -> dict[str, Any]:
    """The link neighbourhood of one note (get_related's walk: only notes the caller sees)."""
    rel = b.memory.related(zk_id, depth)
    nodes = [{**_node(rel["note"]), "root": True}] + [_node(n) for n in rel["related"]]
    ids = {n["id"] for n in nodes}
    return {"nodes": nodes, "edges": _edges(b, ids)}


def graph_project(b: Brain, project: str | None) -> dict[str, Any]:
    """The project at a glance: its most linked notes the caller may see, their links,
    clusters (label propagation) and hubs."""
    import networkx as nx

    m = b.memory
    picked: dict[str, dict[str, Any]] = {}
    hubs = b.graph.hubs()[:GRAPH_SCAN]
    for start in range(0, len(hubs), 256):
        batch = [z for z, _ in hubs[start:start + 256]]
        for pt in b.store.retrieve([_point(z) for z in batch]):
            p = pt.payload
            if (p.get("kind") == "note" and not p.get("forgotten") and m.visible(p)
                    and (project is None or p.get("project") == project)):
                picked[p["zk_id"]] = p
        if len(picked) >= GRAPH_NODES:
            break
    keep = picked
    ranked = [z for z, _ in hubs if z in keep][:GRAPH_NODES]
    ids = set(ranked)
    edges = _edges(b, ids)
    g = nx.Graph()
    g.add_nodes_from(ids)
    g.add_edges_from((e["source"], e["target"]) for e in edges)
    clusters = sorted(nx.algorithms.community.label_propagation_communities(g),
                      key=lambda c: (-len(c), min(c)))
    cluster_of = {z: i for i, c in enumerate(clusters) for z in c}
    nodes = [{**_node(m.public(keep[z])), "cluster": cluster_of.get(z, 0),
              "degree": g.degree(z)} for z in ranked]
    top = sorted(nodes, key=lambda n: (-n["degree"], n["id"]))[:10]
    return {"nodes": nodes, "edges": edges, "hubs": top,
            "clusters": sum(1 for c in clusters if len(c) > 1)}


def _point(zk_id: str) -> str:
    from brain.notes import point_id

    return point_id(zk_id)


def _node(n: dict[str, Any]) -> dict[str, Any]:
    return {"id": n["zk_id"], "label": (n.get("title") or n["zk_id"])[:60],
            "kind": n.get("note_kind"), "pinned": bool(n.get("pinned"))}


def _edges(b: Brain, ids: set[str]) -> list[dict[str, Any]]:
    return [{"source": s, "target": d, "relation": r} for s, d, r in b.graph.edges_among(ids)]


def _kind_filter(b: Brain, kinds: tuple[str, ...], project: str | None) -> Filter:
    must: list[Any] = [MatchAny("note_kind", kinds), *tenancy.conditions(b.memory.identity)]
    if project:
        must.append(Match("project", project))
    return Filter(must=tuple(must), must_not=(Match("forgotten", True),))


def _latest(b: Brain, kinds: tuple[str, ...], project: str | None) -> list[dict[str, Any]]:
    found = list(islice(b.memory.notes(_kind_filter(b, kinds, project)), SCAN_CAP))
    found.sort(key=lambda p: (-float(p.get("created_ts") or 0.0), p.get("zk_id", "")))
    return found


def sessions(b: Brain, project: str | None, page: int) -> dict[str, Any]:
    """The handoff timeline: session summaries and open threads, newest first."""
    shown = [b.memory.public(p) for p in _latest(b, ("session_summary", "open_thread"), project)]
    return _page(shown, page)


def mistakes(b: Brain, project: str | None, page: int) -> dict[str, Any]:
    """Mistakes with their fixes and how often each recurred, most recurrent first."""
    found = _latest(b, ("mistake",), project)
    found.sort(key=lambda p: -int(p.get("occurrences") or 1))
    out = _page(found, page)
    out["items"] = [{**b.memory.public(p), "occurrences": int(p.get("occurrences") or 1),
                     "fixes": b.mistakes.fixes_of(p["zk_id"])} for p in out["items"]]
    return out


def sources(b: Brain, page: int) -> dict[str, Any]:
    """Sources with their sync state and file counts, hot files, and uploaded documents."""
    srcs = b.sources.list()
    for s in srcs:
        s["files"] = b.store.count(Filter(must=(Match("kind", "file"),
                                                Match("source_id", s["id"]),
                                                *tenancy.conditions(b.memory.identity))))
    return {"sources": srcs, "hot": b.health.hot_files(), "documents": _page(b.files.list(), page)}


def document(b: Brain, file_id: str, page: int) -> dict[str, Any]:
    """One uploaded document (get_file: the caller's only) and a page of its chunks."""
    rec = b.files.get(file_id)
    flt = Filter(must=(Match("kind", "doc_chunk"), Match("file_id", rec["id"]),
                       *tenancy.conditions(b.memory.identity)))
    chunks: list[dict[str, Any]] = []
    offset: str | None = None
    while len(chunks) < SCAN_CAP:
        pts, offset = b.store.scroll(flt, limit=256, offset=offset)
        chunks.extend(p.payload for p in pts)
        if offset is None:
            break
    chunks.sort(key=lambda c: int(c.get("chunk_index") or 0))
    shown = [{"chunk": c.get("chunk_index"), "page": c.get("page"),
              "text": c.get("content", "")} for c in chunks]
    return {"file": rec, "chunks": _page(shown, page)}


def health(b: Brain) -> dict[str, Any]:
    """The health report (health_stats), the index state and counts (brain_stats), the
    queues and token budget (brain_capabilities) and the model (model_status)."""
    out: dict[str, Any] = {"health": b.health.stats(), "stats": b.stats()}
    try:
        out["capabilities"] = b.capabilities()
    except BrainError as exc:
        out["capabilities"] = {"error": exc.code, "message": exc.message}
    try:
        out["model"] = b.model_switch.status()
    except BrainError as exc:
        out["model"] = {"error": exc.code, "message": exc.message}
    return out


__all__ = ["NoteNotFound", "PER_PAGE", "document", "graph_note", "graph_project", "health",
           "mistakes", "note", "search", "sessions", "sources"]
