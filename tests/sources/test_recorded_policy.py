"""The brain's path policy lives with the brain (issue 51, item 3): allowed roots and the
user's consent are kept in the data dir, so every process on it agrees; a source a process
cannot reach is reported (fs_search, stats, the explorer), never a silent empty page."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError
from starlette.testclient import TestClient

from brain.app import Brain
from brain.errors import Forbidden
from brain.trust import paths
from brain.trust.identity import Identity
from config import ConfigInvalid, load_settings

ROOT = Path(__file__).resolve().parents[2]


def _w(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _policy(home: Path) -> dict:
    return json.loads((home / "policy.json").read_text())


# ------------------------------------------------------------------ the setting's forms
@pytest.mark.parametrize(("given", "roots"), [
    ("/srv/code", ["/srv/code"]),
    (f"/srv/code{os.pathsep}/data/x", ["/srv/code", "/data/x"]),
    ('["/srv/a", "/srv/b"]', ["/srv/a", "/srv/b"]),
    ("~/proj", ["~/proj"]),
])
def test_allowed_roots_take_a_path_a_path_list_or_json(
    home: Path, monkeypatch: pytest.MonkeyPatch, given: str, roots: list[str]
) -> None:
    monkeypatch.setenv("BRAIN__PATHS__ALLOWED_ROOTS", given)
    assert load_settings().paths.allowed_roots == roots


@pytest.mark.parametrize(("given", "says"), [
    ("srv/code", "not an absolute path"),
    ('["/srv/a"', "not a JSON list"),
    ("[1, 2]", "a JSON list of path strings"),
])
def test_a_bad_allowed_roots_is_one_clear_error(
    home: Path, monkeypatch: pytest.MonkeyPatch, given: str, says: str
) -> None:
    monkeypatch.setenv("BRAIN__PATHS__ALLOWED_ROOTS", given)
    with pytest.raises(ConfigInvalid) as err:
        load_settings()
    assert says in str(err.value) and "BRAIN__PATHS__ALLOWED_ROOTS" in str(err.value)
    assert not (home / "policy.json").exists()


# ------------------------------------------------------------------ recorded in the data dir
def test_roots_a_process_was_given_are_recorded_for_the_ones_given_none(
    brain: Brain, tmp_path: Path
) -> None:
    assert brain.paths.roots() == (str(tmp_path),)  # the suite's setting (tests/conftest.py)
    assert _policy(brain.home)["allowed_roots"] == [str(tmp_path)]
    brain.settings.paths.allowed_roots = None  # a process started with no setting
    with paths.via("http"):
        assert brain.paths.roots() == (str(tmp_path),)  # it agrees, whatever the transport


def test_consent_opens_a_folder_to_local_callers_and_goes_with_its_source(
    brain: Brain, tmp_path: Path
) -> None:
    brain.settings.paths.allowed_roots = [str(tmp_path / "allowed")]
    outside = tmp_path / "srv" / "code"
    _w(outside, "main.py", "def zebracorn():\n    return 1\n")
    with pytest.raises(Forbidden):  # without consent the roots rule holds
        brain.sources.add(str(outside), name="code", sync=False)
    with paths.via("http"), pytest.raises(Forbidden):  # an HTTP caller's is no consent
        brain.sources.add(str(outside), name="code", sync=False, consent=True)
    assert brain.sources.registry.list() == [] and not _policy(brain.home).get("granted")
    res = brain.sources.add(str(outside), name="code", sync=False, consent=True)
    assert res["granted_root"] == str(outside)
    assert _policy(brain.home)["granted"][0]["root"] == str(outside)
    assert brain.sources.search("zebracorn", "grep", source="code")["count"] == 1
    with paths.via("http"):  # consent is the local user's, never an HTTP caller's
        assert str(outside) not in brain.paths.roots()
    brain.sources.remove("code")
    assert not _policy(brain.home)["granted"]
    assert str(outside) not in brain.paths.roots()


def test_floors_hold_even_with_consent(brain: Brain) -> None:
    for target in ("/", "/proc", str(brain.home)):
        with pytest.raises(Forbidden):
            brain.sources.add(target, name="x", sync=False, consent=True)
    assert brain.sources.registry.list() == []
    assert not _policy(brain.home).get("granted")


# ------------------------------------------------------------------ reported, never silent
def test_a_source_out_of_reach_is_reported_by_fs_search_stats_and_the_explorer(
    brain: Brain, tmp_path: Path
) -> None:
    from webui.auth import Logins
    from webui.site import create_app

    _w(tmp_path / "kept", "a.md", "# kept\n\nzebracorn kept\n")
    _w(tmp_path / "far", "b.md", "# far\n\nzebracorn far\n")
    _w(tmp_path / "gone", "c.md", "# gone\n\nzebracorn gone\n")
    for name in ("kept", "far", "gone"):
        brain.sources.add(str(tmp_path / name), name=name, sync=False)
    shutil.rmtree(tmp_path / "gone")
    brain.settings.paths.allowed_roots = [str(tmp_path / "kept"), str(tmp_path / "gone")]

    res = brain.sources.search("zebracorn", "grep")
    assert res["sources"] == ["kept"] and res["count"] == 1
    why = {u["name"]: u for u in res["unreachable"]}
    assert set(why) == {"far", "gone"}
    assert why["far"]["kind"] == "policy" and "BRAIN__PATHS__ALLOWED_ROOTS" in why["far"]["reason"]
    assert why["gone"]["kind"] == "missing"
    assert str(tmp_path / "far") not in why["far"]["reason"]  # known by name, no path shown

    stats = brain.stats()["sources_unreachable"]
    assert {u["name"]: u["kind"] for u in stats} == {"far": "policy", "gone": "missing"}

    ident = Identity(brain.settings.identity.user_id, brain.settings.identity.agent_id)
    logins = Logins(tmp_path / "ui", ident)
    c = TestClient(create_app(SimpleNamespace(brain=brain), logins),
                   base_url="http://127.0.0.1:8766")
    assert c.get(f"/login?token={logins.issue_link()}", follow_redirects=False).status_code == 303
    page = c.get("/sources").text
    table = page[page.index('id="unreachable"'):]
    assert "far" in table and "gone" in table and "outside the folders" in table
    assert "No source" not in page


# ------------------------------------------------------------------ every process agrees
def _env(home: Path, user: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN__")}
    return {**env, "BRAIN__HOME": str(home), "HOME": str(user), "HF_HUB_OFFLINE": "1",
            "BRAIN__EMBEDDING__MODEL": "offline/hash-384"}


def _cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "brain.cli", *argv], env=env, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=300)


async def test_a_source_the_cli_registered_outside_home_is_searched_by_a_plain_server(
    tmp_path: Path,
) -> None:
    home, user, code = tmp_path / "brain", tmp_path / "user", tmp_path / "srv" / "code"
    user.mkdir()
    _w(code, "billing.py", "def zebracorn_invoice():\n    return 42\n")
    env = _env(home, user)  # no allowed roots anywhere: only $HOME, and /srv is outside it

    added = _cli(env, "source", "add", str(code), "--name", "code")
    assert added.returncode == 0, added.stderr[-2000:]
    assert f"allowed {code}" in added.stderr
    synced = _cli(env, "sync", "code")
    assert synced.returncode == 0, synced.stderr[-2000:]
    stats = _cli(env, "stats")
    assert stats.returncode == 0 and json.loads(stats.stdout)["sources_unreachable"] == []

    transport = StdioTransport(command=sys.executable, args=[str(ROOT / "mcp_server.py")],
                               env=env, cwd=str(tmp_path))
    async with Client(transport) as client:
        res = (await client.call_tool("fs_search", {"query": "zebracorn_invoice",
                                                    "search_mode": "grep"})).structured_content
        assert res["sources"] == ["code"] and res["count"] == 1, res
        assert "unreachable" not in res
        sem = (await client.call_tool("fs_search", {"query": "zebracorn invoice",
                                                    "limit": 5})).structured_content
        assert any(r["path"] == "billing.py" for r in sem["results"]), sem
        stats = (await client.call_tool("brain_stats", {})).structured_content
        assert stats["sources_unreachable"] == []


def test_a_damaged_policy_file_widens_nothing_and_two_writers_keep_both_grants(
    tmp_path: Path,
) -> None:
    from brain.trust.recorded import RecordedPolicy

    home = tmp_path / "data"
    one, two = RecordedPolicy(home), RecordedPolicy(home)  # two processes on one data dir
    one.grant("/srv/a", "src-a")
    two.grant("/srv/b", "src-b")
    assert {g["root"] for g in one.grants()} == {"/srv/a", "/srv/b"}
    (home / "policy.json").write_text("{not json")
    assert one.roots() is None and one.grants() == []
    one.revoke("src-a")  # nothing recorded to revoke: the damaged file is left for a human
    assert (home / "policy.json").read_text() == "{not json"


async def test_the_sources_tool_is_no_consent(
    brain: Brain, client: Client, tmp_path: Path
) -> None:
    """An agent's tool call is not the user's consent (an instruction hidden in a file could
    ask for /etc): outside the roots the tool is refused, naming the command that is consent,
    and nothing is recorded."""
    brain.settings.paths.allowed_roots = [str(tmp_path / "allowed")]
    outside = tmp_path / "opt" / "proj"
    _w(outside, "a.py", "ZEBRACORN = 1\n")
    with pytest.raises(ToolError, match=r"FORBIDDEN.*brain source add"):
        await client.call_tool("sources", {"action": "add", "path": str(outside)})
    recorded = _policy(brain.home) if (brain.home / "policy.json").exists() else {}
    assert recorded.get("granted", []) == []
    assert brain.sources.list(None) == []
