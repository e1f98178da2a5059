"""The explorer's app without a browser: a brain that is not open yet, static files, the
vendored graph library and its licence."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from starlette.testclient import TestClient

from brain.trust.identity import Identity
from webui.app import HERE
from webui.auth import Logins
from webui.site import create_app


def test_a_brain_still_starting_is_a_503_not_a_crash(tmp_path: Path) -> None:
    logins = Logins(tmp_path, Identity("default", "default"))
    c = TestClient(create_app(SimpleNamespace(brain=None), logins),
                   base_url="http://127.0.0.1:8766")
    assert c.get(f"/login?token={logins.issue_link()}", follow_redirects=False).status_code == 303
    res = c.get("/search?q=anything")
    assert res.status_code == 503 and "NOT_READY" in res.text
    assert c.get("/api/health").json()["error"] == "NOT_READY"


def test_static_files_are_served_with_the_policy(tmp_path: Path) -> None:
    c = TestClient(create_app(SimpleNamespace(brain=None),
                              Logins(tmp_path, Identity("default", "default"))),
                   base_url="http://localhost:8766")
    res = c.get("/static/vendor/cytoscape.min.js")
    assert res.status_code == 200 and "cytoscape" in res.text[:2000]
    assert res.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in res.headers["content-security-policy"]
    assert "Cytoscape Consortium" in (HERE / "static/vendor/cytoscape.LICENSE").read_text()
    # the page links the element Cytoscape looks for before injecting an inline style
    assert "__________cytoscape_stylesheet" in (HERE / "templates/graph.html").read_text()
