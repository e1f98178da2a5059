"""What every page of the explorer shares: the security layer every request passes (Guard),
the CSRF check of a form, and the runner (:class:`UI`). webui/site.py puts the pages and
this layer together into the app over ``state.brain`` (the owner's live Brain, the object
the tools read: never a second store). Pages are in webui/pages.py, the
actions that change a note in webui/actions.py; both read through :meth:`UI.run`, which runs
a service call the way a tool call runs (acting as the session's caller, in a worker thread,
under the generation gate).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import jinja2
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp

from brain.errors import BrainError, Conflict, FileNotFound, InvalidArgument, NoteNotFound
from brain.trust.identity import acting_as
from mcp_surface.calls import BrainHolder, Services
from webui.auth import COOKIE, Logins, Session

T = TypeVar("T")
HERE = Path(__file__).resolve().parent
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
PUBLIC = ("/login", "/static/")
MAX_BODY = 64 * 1024  # the largest form (tags) is a few KB  # reachable without a session
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
STATUS = {NoteNotFound: 404, FileNotFound: 404, InvalidArgument: 400, Conflict: 409}


class NotReady(BrainError):
    code = "NOT_READY"


class UI:
    """What the handlers share: the live brain's holder, the logins, the templates."""

    def __init__(self, state: BrainHolder, logins: Logins) -> None:
        self.state = state
        self.logins = logins
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                                 autoescape=True)  # every value escaped, in every template
        self.templates = Jinja2Templates(env=env)

    async def run(self, request: Request, fn: Callable[[Services], T]) -> T:
        brain = self.state.brain
        if brain is None:
            raise NotReady("the brain is still starting; reload in a moment")
        session: Session = request.state.session

        def gated() -> T:
            with brain.gate.shared():
                return fn(brain)

        with acting_as(session.identity):  # the worker thread inherits it (anyio copies it)
            return await anyio.to_thread.run_sync(functools.partial(gated))

    def page(self, request: Request, name: str, status: int = 200, **ctx: Any) -> Response:
        session = getattr(request.state, "session", None)
        ctx.setdefault("nav", name.split(".")[0])
        return self.templates.TemplateResponse(
            request, name, {"session": session, "csrf": session.csrf if session else "", **ctx},
            status_code=status)

    def error(self, request: Request, exc: BrainError) -> Response:
        status = next((s for cls, s in STATUS.items() if isinstance(exc, cls)), 503
                      if isinstance(exc, NotReady) else 400)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.code, "message": exc.message}, status_code=status)
        return self.page(request, "error.html", status, code=exc.code, message=exc.message)


def ui_of(request: Request) -> UI:
    ui: UI = request.app.state.ui
    return ui


class Guard(BaseHTTPMiddleware):
    """Every request: a loopback Host (no DNS rebinding), no cross-site state change, a
    session outside /login, and the strict headers (CSP: only this origin's scripts and
    styles, nothing inline, no frames, no requests elsewhere)."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        super().__init__(app)
        self.hosts = frozenset(hosts)

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        res = await self._check(request, call_next)
        res.headers["Content-Security-Policy"] = CSP
        res.headers["X-Content-Type-Options"] = "nosniff"
        res.headers["Referrer-Policy"] = "same-origin"  # no-referrer makes Origin "null"
        res.headers["X-Frame-Options"] = "DENY"
        res.headers["Cross-Origin-Opener-Policy"] = "same-origin"
        res.headers["Cross-Origin-Resource-Policy"] = "same-origin"
        if not request.url.path.startswith("/static/"):
            res.headers["Cache-Control"] = "no-store"
        return res

    async def _check(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        host = request.headers.get("host", "").rsplit(":", 1)[0]
        if host not in self.hosts:
            return Response("unknown host", status_code=421)
        if request.method not in ("GET", "HEAD"):
            if cross_site(request):
                return Response("cross-site request refused", status_code=403)
            size = request.headers.get("content-length", "")
            if not size.isdigit():  # every form a browser posts says its length
                return Response("a request body needs its Content-Length", status_code=411)
            if int(size) > MAX_BODY:
                return Response(f"request body over {MAX_BODY} bytes", status_code=413)
        ui = ui_of(request)
        request.state.session = ui.logins.session(request.cookies.get(COOKIE))
        if request.state.session is None and not request.url.path.startswith(PUBLIC):
            if request.url.path.startswith("/api/") or request.method != "GET":
                return JSONResponse({"error": "UNAUTHORIZED", "message": "log in first"},
                                    status_code=401)
            return RedirectResponse("/login", status_code=303)
        try:
            return await call_next(request)
        except BrainError as exc:
            return ui.error(request, exc)


def cross_site(request: Request) -> bool:
    """A request another site made the browser send: Sec-Fetch-Site says so, or its
    Origin is not this server's."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return False
    return origin != f"{request.url.scheme}://{request.headers.get('host', '')}"


async def checked_form(request: Request) -> dict[str, str]:
    """The form of a state-changing request, refused without the session's CSRF token."""
    from webui.auth import same

    form = await request.form(max_files=0, max_fields=16, max_part_size=64 * 1024)
    session: Session | None = request.state.session
    given = str(form.get("csrf") or "")
    if session is None or not same(given, session.csrf):
        raise Forbidden("the form's CSRF token is missing or stale; reload the page")
    return {k: str(v) for k, v in form.items()}


class Forbidden(BrainError):
    code = "CSRF_REFUSED"


STATUS[Forbidden] = 403


__all__ = ["CSP", "HERE", "LOOPBACK_HOSTS", "UI", "Guard", "checked_form", "cross_site", "ui_of"]
