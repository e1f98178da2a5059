"""What each page shows, read from the brain's services as the calling user.

Plain blocking functions of the services (mcp_surface/calls.py's ``Services``, which the
Brain is); webui/app.py's ``UI.run`` calls them in a worker thread inside
``acting_as(caller)`` under the generation gate, the way every tool call runs
(mcp_server.create_server's ``call``). They ask the services the tools call, never the store
or the graph, and build no filter of their own: every read keeps to what the caller may see
where the service makes it. Everything is paged or capped: no page loads the whole store.
"""

from __future__ import annotations

from typing import Any

from brain.errors import BrainError, NoteNotFound
from brain.memory import RecallFilter
from brain.memory.salience import DAY, salience_now
from mcp_surface.calls import Services

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


def search(s: Services, q: str, project: str | None, kinds: list[str], tags: list[str],
           include_fleeting: bool, all_projects: bool, scope: str, page: int,
           max_age_days: float | None = None, min_salience: float | None = None
           ) -> dict[str, Any]:
    """Hybrid search over notes, source files and documents, as search_memory, fs_search
    and search_files rank them; every hit says which leg found it (``matched``)."""
    rf = RecallFilter(project=project, include_contextual=True,
                      include_fleeting=include_fleeting, note_kinds=tuple(kinds),
                      tags=tuple(tags), max_age_days=max_age_days, min_salience=min_salience,
                      all_projects=all_projects)
    qvec = s.embedder.embed_query(q).tolist()
    out: dict[str, Any] = {"notes": None, "files": None, "documents": None}
    deep = min(MAX_HITS, page * PER_PAGE + 1)
    if scope in ("all", "notes"):
        hits = s.memory.search(q, deep if scope == "notes" else PER_PAGE + 1, rf, stamp=False,
                               query_vector=qvec)
        out["notes"] = _page(hits, page if scope == "notes" else 1)
    if scope in ("all", "files"):
        found = s.sources.search(q, "semantic", project=None if all_projects else project,
                                 limit=deep if scope == "files" else 6)
        out["files"] = _page(found["results"], page if scope == "files" else 1,
                             PER_PAGE if scope == "files" else 5)
        for hit in out["files"]["items"]:
            hit["freshness"] = _freshness(s, hit)
    if scope in ("all", "documents"):
        docs = s.files.search_with_vector(qvec, q, limit=deep if scope == "documents" else 6,
                                          project=None if all_projects else project)
        out["documents"] = _page(docs, page if scope == "documents" else 1,
                                 PER_PAGE if scope == "documents" else 5)
    return out


def _freshness(s: Services, hit: dict[str, Any]) -> str:
    """Whether a file hit still says what the file says (fs_read's presence: synced,
    stale_indexed, ...): the disk is read, as fs_read reads it, for the shown hits only."""
    try:
        return str(s.fs.read(str(hit["source"]), str(hit["path"])).get("presence", "unknown"))
    except BrainError:
        return "unknown"


def note(s: Services, zk_id: str) -> dict[str, Any]:
    """One note as get_note shows it (without stamping an access: looking at a note in
    the explorer is not an agent using it), its links in and out, and its salience curve."""
    m = s.memory
    p = m.get_payload(zk_id, include_forgotten=True)
    citer = m.citer  # the code the note cites (brain/citations), if any:
    if citer is not None:  # checked again when its file moved, as get_note checks it
        citer.refresh([p])
    shown = {**m.public(p), "forgotten": bool(p.get("forgotten")),
             "forgotten_at": p.get("forgotten_at", ""), "archived_at": p.get("archived_at", ""),
             "visibility": p.get("visibility", "shared"), "salience_ts": p.get("salience_ts"),
             "history": m.history(p) if p.get("supersedes") else []}
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
            "curve": salience_curve(s, p)}


def salience_curve(s: Services, p: dict[str, Any]) -> list[tuple[int, float]]:
    """(day, salience) from now on, as decay will lower it if nothing touches the note."""
    now = s.memory.clock.now().timestamp()
    half = s.memory.half_life_s()
    return [(d, round(salience_now(p, now + d * DAY, half), 4))
            for d in range(0, CURVE_DAYS + 1, 3)]


def graph_note(s: Services, zk_id: str, depth: int) -> dict[str, Any]:
    """The link neighbourhood of one note (get_related's walk: only notes the caller sees)."""
    rel = s.memory.related(zk_id, depth)
    nodes = [{**_node(rel["note"]), "root": True}] + [_node(n) for n in rel["related"]]
    ids = {n["id"] for n in nodes}
    return {"nodes": nodes, "edges": _edges(s, ids)}


def graph_project(s: Services, project: str | None) -> dict[str, Any]:
    """The project at a glance: its most linked notes the caller may see, their links,
    clusters (label propagation) and hubs."""
    import networkx as nx

    m = s.memory
    keep = {p["zk_id"]: p for p in m.hub_notes(project, GRAPH_NODES, GRAPH_SCAN)}
    ranked = list(keep)
    ids = set(ranked)
    edges = _edges(s, ids)
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


def _node(n: dict[str, Any]) -> dict[str, Any]:
    return {"id": n["zk_id"], "label": (n.get("title") or n["zk_id"])[:60],
            "kind": n.get("note_kind"), "pinned": bool(n.get("pinned"))}


def _edges(s: Services, ids: set[str]) -> list[dict[str, Any]]:
    return [{"source": a, "target": d, "relation": r} for a, d, r in s.memory.links_among(ids)]


def sessions(s: Services, project: str | None, page: int) -> dict[str, Any]:
    """The handoff timeline: session summaries and open threads, newest first."""
    found = s.memory.latest(("session_summary", "open_thread"), project, SCAN_CAP)
    return _page([s.memory.public(p) for p in found], page)


def mistakes(s: Services, project: str | None, page: int) -> dict[str, Any]:
    """Mistakes with their fixes and how often each recurred, most recurrent first."""
    found = s.memory.latest(("mistake",), project, SCAN_CAP)
    found.sort(key=lambda p: -int(p.get("occurrences") or 1))
    out = _page(found, page)
    out["items"] = [{**s.memory.public(p), "occurrences": int(p.get("occurrences") or 1),
                     "fixes": s.mistakes.fixes_of(p["zk_id"])} for p in out["items"]]
    return out


def sources(s: Services, page: int) -> dict[str, Any]:
    """Sources with their sync state and file counts, hot files, and uploaded documents."""
    srcs = s.sources.list()
    for src in srcs:
        src["files"] = s.sources.file_count(src["id"])
    return {"sources": srcs, "unreachable": s.sources.unreachable(), "hot": s.health.hot_files(),
            "documents": _page(s.files.list(), page)}


def document(s: Services, file_id: str, page: int) -> dict[str, Any]:
    """One uploaded document (get_file: the caller's only) and a page of its chunks."""
    rec = s.files.get(file_id)
    shown = [{"chunk": c.get("chunk_index"), "page": c.get("page"),
              "text": c.get("content", "")} for c in s.files.chunks(rec["id"], SCAN_CAP)]
    return {"file": rec, "chunks": _page(shown, page)}


def health(s: Services) -> dict[str, Any]:
    """The health report (health_stats), the index state and counts (brain_stats), the
    queues and token budget (brain_capabilities) and the model (model_status)."""
    out: dict[str, Any] = {"health": s.health.stats(), "stats": s.stats()}
    try:
        out["capabilities"] = s.capabilities()
    except BrainError as exc:
        out["capabilities"] = {"error": exc.code, "message": exc.message}
    try:
        out["model"] = s.model_switch.status()
    except BrainError as exc:
        out["model"] = {"error": exc.code, "message": exc.message}
    return out


__all__ = ["NoteNotFound", "PER_PAGE", "document", "graph_note", "graph_project", "health",
           "mistakes", "note", "search", "sessions", "sources"]
