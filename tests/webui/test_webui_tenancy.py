"""The explorer over HTTP is as tenant-tight as the tools, and refuses forged requests.

alice/a1 keeps notes, a handoff, a mistake and its fix, a source and a document; bob/b1 logs
in with his own `brain token add` token (the same tokens and verifier as `brain serve
--http`) and visits every page and JSON endpoint the app registers, with alice's ids where a
route takes one: nothing of alice's may show. The cases are keyed by route, and the test
fails when a route is registered without one. Positive control: alice sees her data on the
same URLs. CSRF: a cross-site form post, a post without the session's token, and a foreign
Host are refused and change nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Mount, Route

from brain.process import owner as own
from brain.trust.identity import Identity, acting_as
from brain.trust.limits import MAX_QUERY_CHARS
from tests.webui_support import live_ui, make_brain, seed
from webui.site import create_app

WORD = "hmkalice"
ALICE, BOB = Identity("alice", "a1"), Identity("bob", "b1")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, _empty_shard: Path) -> Iterator[Any]:
    base = tmp_path_factory.mktemp("webui-tenancy")
    b, settings = make_brain(base, _empty_shard)
    ids = seed(b, base, WORD, ALICE)
    with acting_as(BOB):  # bob has a note of his own: his pages are not merely empty
        ids["bob_note"] = b.memory.add("bobnote about queues", "shop").note["zk_id"]
    tokens = {"alice": own.add_token(settings.home, "alice", "a1"),
              "bob": own.add_token(settings.home, "bob", "b1")}
    try:
        with live_ui(b, settings) as host:
            yield {"brain": b, "host": host, "ids": ids, "tokens": tokens}
    finally:
        b.close()


def _login(base: str, token: str) -> tuple[httpx.Client, str]:
    """A client logged in with an HTTP token through the login form; returns its CSRF."""
    c = httpx.Client(base_url=base, timeout=30)
    form = c.get("/login").text
    nonce = re.search(r'name="csrf" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
    res = c.post("/login", data={"csrf": nonce, "token": token})
    assert res.status_code == 303, res.text
    page = c.get("/search").text
    return c, re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def clients(world: Any) -> Iterator[dict[str, tuple[httpx.Client, str]]]:
    base = world["host"].base_url
    out = {name: _login(base, tok) for name, tok in world["tokens"].items()}
    yield out
    for c, _ in out.values():
        c.close()


# Every registered route -> the GET URLs that exercise it with alice's ids ({hub} etc.).
GET_CASES: dict[str, list[str]] = {
    "/": ["/"],
    "/login": ["/login"],
    # queries without the marker word (a page echoes its query), matching alice's data
    "/search": ["/search?q=caching+decision+redis", "/search?q=eviction+redis&scope=notes",
                "/search?q=redis+cache+ttl&scope=files",
                "/search?q=cache+tier+eviction&scope=documents",
                "/search?q=caching+decision&project=shop&fleeting=1&kind=decision"
                "&max_age_days=30&min_salience=0"],
    "/note/{zk_id}": ["/note/{hub}", "/note/{mistake}"],
    "/api/note/{zk_id}": ["/api/note/{hub}"],
    "/graph": ["/graph", "/graph?project=shop", "/graph?note={hub}"],
    "/api/graph": ["/api/graph", "/api/graph?project=shop", "/api/graph?note={hub}&depth=3"],
    "/sessions": ["/sessions", "/sessions?project=shop", "/sessions?tab=mistakes"],
    "/sources": ["/sources"],
    "/documents/{file_id}": ["/documents/{file_id}"],
    "/health": ["/health"],
    "/api/health": ["/api/health"],
}
POST_CASES: dict[str, list[str]] = {
    "/login": [],  # no session yet: its double-submit check is tested below
    "/logout": ["/logout"],
    "/note/{zk_id}/{action}": ["/note/{hub}/pin", "/note/{hub}/forget", "/note/{hub}/restore",
                               "/note/{hub}/tags"],
}


def test_every_route_has_a_tenancy_case(world: Any) -> None:
    app = create_app(None, world["host"].logins)
    gets, posts = set(), set()
    for route in app.routes:
        if isinstance(route, Mount):
            assert route.path == "/static"  # files shipped with the package, no data
            continue
        assert isinstance(route, Route)
        methods = route.methods or set()
        (posts if "POST" in methods else gets).add(route.path)
    assert gets == set(GET_CASES), "a page without a tenancy case"
    assert posts == set(POST_CASES), "an action without a tenancy case"


def _urls(cases: dict[str, list[str]], ids: dict[str, Any]) -> list[str]:
    return [u.format(**ids) for urls in cases.values() for u in urls]


def _alice_ids(ids: dict[str, Any]) -> list[str]:
    return [str(ids[k]) for k in ("hub", "other", "third", "mistake", "file_id")]


def test_bob_sees_nothing_of_alice_on_any_page(world: Any, clients: Any) -> None:
    bob, _ = clients["bob"]
    ids = world["ids"]
    for url in _urls(GET_CASES, ids):
        res = bob.get(url, follow_redirects=True)
        text = res.text
        assert WORD not in text, f"{url} shows alice's data to bob"
        for zk in _alice_ids(ids):
            if zk not in url:  # an id bob typed may be echoed in a not-found message
                assert zk not in text, f"{url} names alice's {zk} to bob"
        if "{" in next(k for k, v in GET_CASES.items() if any(u.format(**ids) == url
                                                            for u in v)):
            assert res.status_code == 404, f"{url}: {res.status_code}"
    assert ids["bob_note"] in bob.get("/search?q=about+queues").text  # he sees his own


def test_alice_sees_her_data_on_the_same_pages(world: Any, clients: Any) -> None:
    alice, _ = clients["alice"]
    ids = world["ids"]
    for url in ("/note/{hub}", "/api/note/{hub}",
                "/api/graph?project=shop", "/api/graph?note={hub}", "/sessions?project=shop",
                "/sessions?tab=mistakes", "/sources", "/documents/{file_id}"):
        res = alice.get(url.format(**ids))
        assert res.status_code == 200 and (WORD in res.text or ids["hub"] in res.text), url
    for url in _urls({"/search": GET_CASES["/search"]}, ids):  # the queries bob ran find hers
        assert WORD in alice.get(url).text, url
    assert ids["bob_note"] not in alice.get("/search?q=about+queues").text


def test_bobs_actions_on_alices_note_fail_as_if_it_did_not_exist(world: Any,
                                                                 clients: Any) -> None:
    bob, csrf = clients["bob"]
    ids, b = world["ids"], world["brain"]
    for url in _urls(POST_CASES, ids):
        if url == "/logout":
            continue
        res = bob.post(url, data={"csrf": csrf, "confirm": "yes", "tags": "x"})
        assert res.status_code == 404 and WORD not in res.text, url
    with acting_as(ALICE):
        note = b.memory.get_payload(ids["hub"])
    assert not note.get("pinned") and not note.get("forgotten") and "x" not in note["tags"]


def test_a_cross_site_form_post_is_refused(world: Any, clients: Any) -> None:
    alice, csrf = clients["alice"]
    ids, b = world["ids"], world["brain"]
    url = f"/note/{ids['hub']}/pin"
    forged = alice.post(url, data={"csrf": csrf, "confirm": "yes"},
                        headers={"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
    assert forged.status_code == 403
    same_site = alice.post(url, data={"csrf": csrf, "confirm": "yes"},
                           headers={"Sec-Fetch-Site": "same-site"})
    assert same_site.status_code == 403
    no_token = alice.post(url, data={"confirm": "yes"})
    assert no_token.status_code == 403
    stale = alice.post(url, data={"csrf": "not-the-token", "confirm": "yes"})
    assert stale.status_code == 403
    huge = alice.post(url, data={"csrf": csrf, "confirm": "yes", "tags": "x" * 70_000})
    assert huge.status_code == 413
    with acting_as(ALICE):
        assert not b.memory.get_payload(ids["hub"]).get("pinned")
    ok = alice.post(url, data={"csrf": csrf, "confirm": "yes"})  # the real form does work
    assert ok.status_code == 303
    with acting_as(ALICE):
        assert b.memory.get_payload(ids["hub"]).get("pinned") is True
        b.memory.pin(ids["hub"], False)


def test_every_post_route_refuses_a_missing_csrf_token(world: Any, clients: Any) -> None:
    alice, _ = clients["alice"]
    for url in _urls(POST_CASES, world["ids"]):
        assert alice.post(url, data={"confirm": "yes"}).status_code == 403, url
    login = alice.post("/login", data={"token": world["tokens"]["bob"]})  # no double submit
    assert login.status_code == 403


def test_headers_host_and_one_time_links(world: Any, clients: Any) -> None:
    alice, _ = clients["alice"]
    res = alice.get("/search")
    csp = res.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert alice.get("/search", headers={"Host": "evil.example"}).status_code == 421
    base = world["host"].base_url
    link = world["host"].login_url()
    with httpx.Client(timeout=30) as c:
        assert c.get(link).status_code == 303  # logs in once
    with httpx.Client(timeout=30) as c:
        assert c.get(link).status_code == 401  # and never again
        assert c.get(base + "/api/health").status_code == 401
        assert c.get(base + "/search").status_code == 303  # to /login


def test_bad_arguments_are_typed_errors(world: Any, clients: Any) -> None:
    alice, _ = clients["alice"]
    for url in ("/search?q=x&max_age_days=abc", "/search?q=x&min_salience=2",
                "/search?q=x&page=0", "/search?q=x&scope=everything", "/search?q=x&kind=nope",
                "/note/not-an-id", "/api/graph?depth=9", "/sessions?tab=other",
                "/search?q=" + "x" * (MAX_QUERY_CHARS + 1)):
        res = alice.get(url)
        assert res.status_code == 400 and ("INVALID_ARGUMENT" in res.text
                                           or "CONTENT_TOO_LARGE" in res.text), url[:80]
