"""The actions that change a note: pin or unpin, forget, restore, edit tags.

Each is a POST carrying the session's CSRF token (``checked_form``) and runs the same
service method a tool would, as the session's caller (``UI.run``), so the same tenancy
checks, bounds and redaction apply. Without ``confirm=yes`` an action changes nothing: it
answers with a page that says what will happen and asks to confirm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from brain.errors import InvalidArgument
from brain.trust.limits import MAX_TAG_CHARS, MAX_TAGS
from mcp_surface.calls import Services
from webui.app import checked_form, ui_of

WHAT = {
    "pin": "Pin this note: it keeps its salience and is never archived.",
    "unpin": "Unpin this note: it decays and may be archived like any other.",
    "forget": "Forget this note: it is hidden everywhere at once and removed for good after "
              "the grace period; Restore brings it back until then.",
    "restore": "Restore this note: it comes back into searches.",
    "tags": "Set this note's tags to exactly the ones below (it is embedded again).",
}


def _tags(form: dict[str, str]) -> list[str]:
    tags = [t.strip() for t in form.get("tags", "").split(",") if t.strip()]
    if len(tags) > MAX_TAGS or any(len(t) > MAX_TAG_CHARS for t in tags):
        raise InvalidArgument(f"at most {MAX_TAGS} tags of at most {MAX_TAG_CHARS} characters",
                              field="tags")
    return tags


def _call(action: str, zk_id: str, form: dict[str, str]
          ) -> Callable[[Services], dict[str, Any]]:
    if action in ("pin", "unpin"):
        return lambda s: s.memory.pin(zk_id, action == "pin")
    if action == "forget":
        return lambda s: s.memory.forget(zk_id)
    if action == "restore":
        return lambda s: s.memory.restore(zk_id)
    tags = _tags(form)
    return lambda s: s.memory.set_tags(zk_id, tags)


async def act(request: Request) -> Response:
    ui = ui_of(request)
    form = await checked_form(request)
    action, zk_id = request.path_params["action"], request.path_params["zk_id"]
    if action not in WHAT:
        raise InvalidArgument(f"action must be one of {list(WHAT)}", field="action")
    fn = _call(action, zk_id, form)  # bad tags are refused before the confirmation too
    if form.get("confirm") != "yes":
        shown = await ui.run(request, lambda s: s.memory.public(
            s.memory.get_payload(zk_id, include_forgotten=True)))
        return ui.page(request, "confirm.html", nav="note", action=action, what=WHAT[action],
                       note=shown, tags=form.get("tags", ""))
    await ui.run(request, fn)
    return RedirectResponse(f"/note/{zk_id}?done={action}", status_code=303)


ROUTES = [Route("/note/{zk_id}/{action}", act, methods=["POST"])]
