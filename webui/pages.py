"""The pages (GET, read-only) and the JSON the graph page draws from.

Each handler parses its bounded query arguments, reads through ``UI.run`` (webui/app.py) and
renders a template. Adding a page here means adding its case to the tenancy test
(tests/webui/test_webui_tenancy.py enumerates these routes).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from brain.errors import InvalidArgument
from brain.notes import NOTE_KINDS
from brain.trust.limits import MAX_AGE_DAYS, MAX_QUERY_CHARS
from webui import data
from webui.app import ui_of
from webui.login import login_form, login_post, logout

KINDS = NOTE_KINDS
MAX_PAGE = 50
MAX_FIELD = 128


def _arg(request: Request, name: str, cap: int = MAX_FIELD) -> str:
    value = request.query_params.get(name, "").strip()
    if len(value) > cap:
        raise InvalidArgument(f"{name} is longer than {cap} characters", field=name)
    return value


def _page_no(request: Request) -> int:
    raw = request.query_params.get("page", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise InvalidArgument(f"page must be a number from 1 to {MAX_PAGE}", field="page")
    return int(raw)


def _number(request: Request, name: str, low: float, high: float) -> float | None:
    raw = _arg(request, name, 16)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not low < value <= high:  # nan fails too
        raise InvalidArgument(f"{name} must be a number above {low:g}, at most {high:g}",
                              field=name)
    return value


def _project(request: Request) -> str | None:
    return _arg(request, "project") or None


async def home(request: Request) -> Response:
    return RedirectResponse("/search", status_code=303)


async def search(request: Request) -> Response:
    ui = ui_of(request)
    q = _arg(request, "q", MAX_QUERY_CHARS)
    scope = request.query_params.get("scope", "all")
    if scope not in ("all", "notes", "files", "documents"):
        raise InvalidArgument("scope must be all, notes, files or documents", field="scope")
    kinds = [k for k in request.query_params.getlist("kind") if k]
    if any(k not in KINDS for k in kinds):
        raise InvalidArgument(f"kind must be one of {list(KINDS)}", field="kind")
    tags = [t.strip() for t in _arg(request, "tags", 1024).split(",") if t.strip()]
    project = _project(request)
    fleeting = request.query_params.get("fleeting") == "1"
    max_age = _number(request, "max_age_days", 0.0, MAX_AGE_DAYS)
    min_salience = _number(request, "min_salience", -1e-9, 1.0)
    form: dict[str, Any] = {"q": q, "scope": scope, "kinds": kinds, "tags": ", ".join(tags),
            "project": _project(request) or "",
            "include_fleeting": fleeting, "max_age_days": _arg(request, "max_age_days", 16),
            "min_salience": _arg(request, "min_salience", 16),
            # a person searches everything unless they name a project (the tools' default
            # project is an agent's working scope)
            "all_projects": not _project(request)}
    form["base"] = "/search?" + urlencode(
        [("q", q), ("scope", scope), ("project", form["project"]), ("tags", form["tags"]),
         ("max_age_days", form["max_age_days"]), ("min_salience", form["min_salience"]),
         *[("kind", k) for k in kinds], *([("fleeting", "1")] if fleeting else [])])
    page = _page_no(request)
    found = None
    if q:
        found = await ui.run(request, lambda s: data.search(
            s, q, project, kinds, tags, fleeting, project is None, scope, page, max_age,
            min_salience))
    return ui.page(request, "search.html", form=form, found=found, kinds=KINDS, page=page)


async def note(request: Request) -> Response:
    ui = ui_of(request)
    zk_id = request.path_params["zk_id"]
    shown = await ui.run(request, lambda s: data.note(s, zk_id))
    return ui.page(request, "note.html", done=_arg(request, "done"), **shown)


async def note_json(request: Request) -> Response:
    ui = ui_of(request)
    zk_id = request.path_params["zk_id"]
    return JSONResponse(await ui.run(request, lambda s: data.note(s, zk_id)))


async def graph(request: Request) -> Response:
    ui = ui_of(request)
    return ui.page(request, "graph.html", note=_arg(request, "note"),
                   project=_project(request) or "", depth=_depth(request))


def _depth(request: Request) -> int:
    raw = request.query_params.get("depth", "2")
    if raw not in ("1", "2", "3"):
        raise InvalidArgument("depth must be 1, 2 or 3", field="depth")
    return int(raw)


async def graph_json(request: Request) -> Response:
    ui = ui_of(request)
    zk_id, depth, project = _arg(request, "note"), _depth(request), _project(request)
    if zk_id:
        out: dict[str, Any] = await ui.run(request, lambda s: data.graph_note(s, zk_id, depth))
    else:
        out = await ui.run(request, lambda s: data.graph_project(s, project))
    return JSONResponse(out)


async def sessions(request: Request) -> Response:
    ui = ui_of(request)
    project, page = _project(request), _page_no(request)
    tab = request.query_params.get("tab", "sessions")
    if tab not in ("sessions", "mistakes"):
        raise InvalidArgument("tab must be sessions or mistakes", field="tab")
    fn = data.sessions if tab == "sessions" else data.mistakes
    shown = await ui.run(request, lambda s: fn(s, project, page))
    return ui.page(request, "sessions.html", tab=tab, project=project or "", shown=shown)


async def sources(request: Request) -> Response:
    ui = ui_of(request)
    page = _page_no(request)
    shown = await ui.run(request, lambda s: data.sources(s, page))
    return ui.page(request, "sources.html", **shown)


async def document(request: Request) -> Response:
    ui = ui_of(request)
    file_id, page = request.path_params["file_id"][:MAX_FIELD], _page_no(request)
    shown = await ui.run(request, lambda s: data.document(s, file_id, page))
    return ui.page(request, "document.html", nav_name="sources", **shown)


async def health(request: Request) -> Response:
    ui = ui_of(request)
    shown = await ui.run(request, data.health)
    return ui.page(request, "health.html", **shown)


async def health_json(request: Request) -> Response:
    ui = ui_of(request)
    return JSONResponse(await ui.run(request, data.health))


ROUTES = [
    Route("/", home),
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login_post, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/search", search),
    Route("/note/{zk_id}", note),
    Route("/api/note/{zk_id}", note_json),
    Route("/graph", graph),
    Route("/api/graph", graph_json),
    Route("/sessions", sessions),
    Route("/sources", sources),
    Route("/documents/{file_id}", document),
    Route("/health", health),
    Route("/api/health", health_json),
]
