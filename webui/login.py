"""Logging in and out: a one-time link from ``brain ui``, or a ``brain serve --http`` token.

The login form has no session yet, so its CSRF check is a double submit: a random value in
a SameSite=Strict cookie that the form must repeat.
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from webui.app import checked_form, cross_site, ui_of
from webui.auth import COOKIE, SESSION_TTL_S, same

LOGIN_COOKIE = "brain_ui_login"


def _with_session(request: Request, identity: object) -> Response:
    ui = ui_of(request)
    sid, _ = ui.logins.open_session(identity)  # type: ignore[arg-type]
    res = RedirectResponse("/search", status_code=303)
    res.set_cookie(COOKIE, sid, max_age=int(SESSION_TTL_S), httponly=True, samesite="strict",
                   path="/")
    res.delete_cookie(LOGIN_COOKIE, path="/login")
    return res


def _form(request: Request, error: str = "", status: int = 200) -> Response:
    ui = ui_of(request)
    nonce = secrets.token_urlsafe(18)
    res = ui.page(request, "login.html", status, nav="login", login_csrf=nonce, error=error)
    res.set_cookie(LOGIN_COOKIE, nonce, max_age=900, httponly=True, samesite="strict",
                   path="/login")
    return res


async def login_form(request: Request) -> Response:
    token = request.query_params.get("token", "")
    if token:
        identity = ui_of(request).logins.use_link(token[:256])
        if identity is not None:
            return _with_session(request, identity)
        return _form(request, "That login link was used already or has expired: run "
                              "`brain ui` again for a new one.", 401)
    return _form(request)


async def login_post(request: Request) -> Response:
    if cross_site(request):
        return Response("cross-site request refused", status_code=403)
    form = await request.form(max_files=0, max_fields=4, max_part_size=4096)
    if not same(str(form.get("csrf") or ""), request.cookies.get(LOGIN_COOKIE)):
        return _form(request, "The form expired; try again.", 403)
    identity = await ui_of(request).logins.bearer_identity(str(form.get("token") or "").strip())
    if identity is None:
        return _form(request, "That token is not one of this brain's HTTP tokens.", 401)
    return _with_session(request, identity)


async def logout(request: Request) -> Response:
    await checked_form(request)
    ui_of(request).logins.close_session(request.cookies.get(COOKIE))
    res = RedirectResponse("/login", status_code=303)
    res.delete_cookie(COOKIE, path="/")
    return res
