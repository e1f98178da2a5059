"""Path policy (issue 13): a caller reaches only allowed roots, never a special filesystem,
the filesystem root or the brain's own data dir, and no symlink leads out of a source, at any
depth, through any path in (walk, watcher, targeted sync, grep) or out (fs_search's modes).

The suite runs with ``[paths] allowed_roots`` = the test's tmp_path (tests/conftest.py);
tests that need another policy set ``brain.settings.paths.allowed_roots`` themselves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain.app import Brain
from brain.errors import Forbidden, InvalidArgument, PathOutsideSource
from brain.sources.filters import SourceFilter
from brain.sources.grep import available_engines, grep
from brain.trust import paths
from brain.vector_store import Filter, Match, MatchAny, scroll_all
from tests.timing import HANG_S

SECRET = "zebracornish outside secret"  # the text of every file outside the source
MODES = ("semantic", "filter", "grep")


def _w(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _sync(brain: Brain, name: str, **kw: object) -> dict:
    job = brain.sources.sync(name, wait=True, timeout=60, **kw)
    assert job["status"] == "done", job
    return job["result"]


def _indexed(brain: Brain, name: str) -> set[str]:
    sid = brain.sources.get(name).id
    flt = Filter(must=(Match("source_id", sid), MatchAny("kind", ("file", "chunk"))))
    return {str(p.payload["path"]) for p in scroll_all(brain.store, flt)}


def _stored_text(brain: Brain) -> str:
    return "\n".join(json.dumps(p.payload) for p in scroll_all(brain.store, Filter()))


def _assert_never_found(brain: Brain, name: str) -> None:
    """The outside text comes back from no mode of fs_search and sits in no point."""
    for mode in MODES:
        query = "zebracornish" if mode != "filter" else ""
        res = brain.sources.search(query, mode, source=name, limit=50)
        for hit in res["results"]:
            assert "zebracornish" not in json.dumps(hit), (mode, hit)
    assert "zebracornish" not in _stored_text(brain)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside every source, holding the text that must never be indexed."""
    out = tmp_path / "outside"
    _w(out, "secret.txt", SECRET + "\n")
    _w(out, "deeper/more.md", "# note\n\n" + SECRET + "\n")
    return out


# ------------------------------------------------------------------ ingest_file
def test_ingest_of_a_symlink_to_etc_passwd_is_forbidden(brain: Brain, tmp_path: Path) -> None:
    link = tmp_path / "notes.txt"
    os.symlink("/etc/passwd", link)
    with pytest.raises(Forbidden) as err:
        brain.files.ingest(str(link))
    assert "BRAIN__PATHS__ALLOWED_ROOTS" in err.value.message
    assert brain.files.list() == []
    blobs = brain.home / "files" / "blobs"
    assert not blobs.exists() or not any(p.is_file() for p in blobs.rglob("*"))


def test_ingest_through_a_symlinked_folder_at_depth_is_forbidden(
    brain: Brain, tmp_path: Path
) -> None:
    mid = tmp_path / "docs" / "a"
    mid.mkdir(parents=True)
    os.symlink("/etc", mid / "b")  # docs/a/b -> /etc, then a plain name below it
    with pytest.raises(Forbidden):
        brain.files.ingest(str(mid / "b" / "hostname"))
    assert brain.files.list() == []


@pytest.mark.parametrize(
    "target", ["/proc/self/environ", "/proc/self/status", "/sys/kernel/osrelease"]
)
def test_ingest_of_a_special_filesystem_is_forbidden_even_under_an_allowed_root(
    brain: Brain, target: str
) -> None:
    brain.settings.paths.allowed_roots = ["/"]  # the special-filesystem rule holds on its own
    with pytest.raises(Forbidden):
        brain.files.ingest(target)
    assert brain.files.list() == []


def test_ingest_from_the_data_dir_is_forbidden(brain: Brain, tmp_path: Path) -> None:
    inside = _w(brain.home, "exported.md", "# notes\n\nkept by the brain\n")
    link = tmp_path / "innocent.md"
    os.symlink(inside, link)
    for path in (inside, link, brain.home / "sources.db"):
        with pytest.raises(Forbidden):
            brain.files.ingest(str(path))
    assert brain.files.list() == []


def test_ingest_outside_the_allowed_roots_and_relative_paths_are_forbidden(
    brain: Brain, tmp_path: Path
) -> None:
    with pytest.raises(Forbidden):
        brain.files.ingest("/etc/hostname")
    _w(tmp_path, "doc.md", "# fine\n\nan ordinary document\n")
    with pytest.raises(Forbidden) as err:
        brain.files.ingest("doc.md")  # relative: tool callers must pass absolute paths
    assert "absolute" in err.value.message
    # A path outside the roots is refused before its existence is looked at (no oracle).
    with pytest.raises(Forbidden):
        brain.files.ingest("/etc/no-such-file-here")
    assert brain.files.list() == []
    assert brain.files.ingest(str(tmp_path / "doc.md"))["status"] == "processing"


def test_ingest_of_a_fifo_is_refused_without_blocking(brain: Brain, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    refused: list[Exception] = []

    def ingest() -> None:
        try:
            brain.files.ingest(str(fifo))
        except (Forbidden, InvalidArgument) as exc:
            refused.append(exc)

    t = threading.Thread(target=ingest, daemon=True)  # opening a FIFO to read blocks for good
    t.start()
    t.join(HANG_S)
    assert not t.is_alive() and len(refused) == 1
    assert brain.files.list() == []


# ------------------------------------------------------------------ add_source / update_source
@pytest.mark.parametrize("target", ["/", "/proc", "/proc/self", "/sys", "/dev"])
def test_add_source_of_the_root_or_a_special_filesystem_is_forbidden(
    brain: Brain, target: str
) -> None:
    brain.settings.paths.allowed_roots = ["/"]  # even when everything else is allowed
    with pytest.raises(Forbidden):
        brain.sources.add(target, name="x", sync=False)
    assert brain.sources.registry.list() == []


def test_add_source_outside_roots_relative_or_the_data_dir_is_forbidden(
    brain: Brain, tmp_path: Path
) -> None:
    relative = os.path.relpath("/etc", os.getcwd())  # ../../../etc from the test's cwd
    assert relative.startswith("..")
    for target in ("/etc", relative, "../../etc", str(brain.home), str(brain.home / "files")):
        with pytest.raises(Forbidden) as err:
            brain.sources.add(target, name="x", sync=False)
        assert err.value.code == "FORBIDDEN"
    assert brain.sources.registry.list() == []


def test_stdio_default_root_is_the_users_home(
    brain: Brain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(user_home))
    brain.settings.paths.allowed_roots = []
    _w(user_home, "proj/a.md", "# a\n")
    _w(tmp_path, "elsewhere/b.md", "# b\n")
    with pytest.raises(Forbidden) as err:
        brain.sources.add(str(tmp_path / "elsewhere"), name="e", sync=False)
    assert (
        str(user_home) in err.value.message and "BRAIN__PATHS__ALLOWED_ROOTS" in err.value.message
    )
    assert brain.sources.add(str(user_home / "proj"), name="p", sync=False)["source"]["name"] == "p"


def test_http_callers_without_configured_roots_reach_nothing(brain: Brain, tmp_path: Path) -> None:
    _w(tmp_path, "proj/a.md", "# a\n\nplain text\n")
    _w(tmp_path, "doc.md", "# doc\n")
    brain.sources.add(str(tmp_path / "proj"), name="local", sync=False)  # a local caller's
    brain.settings.paths.allowed_roots = []
    with paths.via("http"):
        with pytest.raises(Forbidden) as err:
            brain.sources.add(str(tmp_path / "proj"), name="p", sync=False)
        assert "BRAIN__PATHS__ALLOWED_ROOTS" in err.value.message
        with pytest.raises(Forbidden):
            brain.files.ingest(str(tmp_path / "doc.md"))
        with pytest.raises(Forbidden):
            brain.sources.update("local", exclude=["*.log"])
        with pytest.raises(Forbidden):
            brain.sources.search("plain", "grep", source="local")
        assert brain.sources.list() == []
        assert brain.sources.search("plain", "grep")["count"] == 0
    assert [r.name for r in brain.sources.registry.list()] == ["local"]
    assert brain.files.list() == []
    # With the folder configured, the same HTTP caller may add it.
    brain.settings.paths.allowed_roots = [str(tmp_path)]
    with paths.via("http"):
        brain.files.ingest(str(tmp_path / "doc.md"))


@pytest.mark.parametrize("bad", ["\0", "nul\0inside", "\ud800", "a" * 300, "a/" * 2100])
def test_malformed_paths_get_a_typed_error_and_change_nothing(
    brain: Brain, tmp_path: Path, bad: str
) -> None:
    path = f"{tmp_path}/{bad}"
    with pytest.raises((InvalidArgument, Forbidden)):
        brain.sources.add(path, name="x", sync=False)
    with pytest.raises((InvalidArgument, Forbidden)):
        brain.files.ingest(path)
    assert brain.sources.registry.list() == [] and brain.files.list() == []
    _w(tmp_path, "proj/a.md", "# a\n")
    brain.sources.add(str(tmp_path / "proj"), name="p", sync=False)
    for folder in (path, bad):  # fs_search's folder, absolute and relative to the source
        with pytest.raises((InvalidArgument, PathOutsideSource)):
            brain.sources.search("a", "grep", source="p", folder=folder)


# ------------------------------------------------------------------ symlinks in a source
@pytest.fixture
def escaping_source(brain: Brain, tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "proj"
    _w(root, "README.md", "# proj\n\nthe real project text\n")
    _w(root, "a/b/code.py", "def real():\n    return 1\n")
    os.symlink(outside, root / "link1")  # depth 1: a folder link out
    os.symlink(outside, root / "a" / "b" / "link3")  # depth 3
    os.symlink(outside / "secret.txt", root / "a" / "b" / "leak.txt")  # a file link out
    os.symlink("/etc", root / "etc")
    brain.sources.add(str(root), name="proj", sync=False)
    return root


def test_symlinked_folders_out_of_a_source_are_not_indexed_at_any_depth(
    brain: Brain, escaping_source: Path
) -> None:
    _sync(brain, "proj")
    got = _indexed(brain, "proj")
    assert "README.md" in got and "a/b/code.py" in got  # the sync did run
    assert not {p for p in got if "link" in p or "leak" in p or p.startswith("etc")}
    _assert_never_found(brain, "proj")


def test_targeted_sync_of_paths_through_a_link_or_dotdot_indexes_nothing(
    brain: Brain, escaping_source: Path
) -> None:
    _sync(brain, "proj")
    escapes = [
        "link1/secret.txt",
        "link1/deeper/more.md",
        "a/b/link3/secret.txt",
        "a/b/leak.txt",
        "etc/hostname",
        "../outside/secret.txt",
        "a/../../outside/secret.txt",
    ]
    _sync(brain, "proj", paths=escapes)  # sync_source(paths=...) is a tool argument
    sid = brain.sources.get("proj").id
    brain.sources._on_changes(sid, set(escapes), False)  # what the watcher would send
    assert brain.sources.wait_idle(30)
    got = _indexed(brain, "proj")
    assert not {p for p in got if "link" in p or "leak" in p or ".." in p or "etc" in p}
    _assert_never_found(brain, "proj")


def test_a_link_made_after_the_source_was_added_is_not_indexed_by_the_watcher(
    brain: Brain, tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "watched"
    _w(root, "a.md", "# first\n")
    brain.sources.add(str(root), name="w", trigger="auto")
    assert brain.sources.wait_idle(30)
    time.sleep(0.5)  # let the watcher arm
    (root / "deep" / "er").mkdir(parents=True)
    os.symlink(outside, root / "late")
    os.symlink(outside, root / "deep" / "er" / "late3")
    # The watch restarts (another auto source, an update, a server restart) and now starts
    # with the links in place: the OS watcher walks into their targets.
    _w(tmp_path, "other/o.md", "# other\n")
    brain.sources.add(str(tmp_path / "other"), name="o", trigger="auto")
    assert brain.sources.wait_idle(30)
    time.sleep(0.5)
    # Touch the outside files (seen through the links by the OS watcher) and add a real file.
    _w(outside, "secret.txt", SECRET + " again\n")
    _w(outside, "new.md", SECRET + "\n")
    _w(root, "deep/er/real.md", "the quokka lives here\n")
    deadline = time.monotonic() + HANG_S
    while "deep/er/real.md" not in _indexed(brain, "w") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "deep/er/real.md" in _indexed(brain, "w")  # the watcher did pick changes up
    time.sleep(1.0)
    assert brain.sources.wait_idle(30)
    assert not {p for p in _indexed(brain, "w") if "late" in p}, _indexed(brain, "w")
    _assert_never_found(brain, "w")
    _sync(brain, "w")  # and a full sync after the fact
    got = _indexed(brain, "w")
    assert not {p for p in got if "late" in p}, got
    _assert_never_found(brain, "w")


@pytest.mark.parametrize("engine", available_engines())
def test_grep_engines_never_follow_links_out(escaping_source: Path, engine: str) -> None:
    flt = SourceFilter(escaping_source, [], [], True)
    res = grep([(escaping_source, flt)], "zebracornish", engine=engine)
    assert res.hits == [], [(h.path, h.text) for h in res.hits]
    assert grep([(escaping_source, flt)], "real project", engine=engine).hits  # it searches


def test_links_that_stay_inside_the_source_are_fine(brain: Brain, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    _w(root, "docs/real.md", "# real\n\nthe wombat digs burrows\n")
    os.symlink(root / "docs" / "real.md", root / "alias.md")
    os.symlink("docs", root / "docsdir")  # a folder link inside: its target is walked anyway
    brain.sources.add(str(root), name="proj", sync=False)
    _sync(brain, "proj")
    got = _indexed(brain, "proj")
    assert {"docs/real.md", "alias.md"} <= got
    assert brain.sources.search("wombat", "grep", source="proj")["count"] >= 1
    assert brain.sources.search("wombat", "semantic", source="proj")["count"] >= 1


def test_a_link_is_judged_by_its_target_too(brain: Brain, tmp_path: Path) -> None:
    """A link inside the source to its own .env, or to the data dir inside it, is not a way
    around the excludes."""
    root = tmp_path  # holds the data dir (tmp_path/home), which the source excludes
    _w(root, "proj/.env", "API_TOKEN=zebracornish-env-value\n")
    _w(brain.home, "notes.txt", SECRET + "\n")
    _w(root, "proj/readme.md", "# the real readme\n")
    os.symlink(root / "proj" / ".env", root / "proj" / "notes.txt")
    os.symlink(brain.home / "notes.txt", root / "proj" / "brain-notes.txt")
    brain.sources.add(str(root), name="all", sync=False)
    _sync(brain, "all")
    sid = brain.sources.get("all").id
    brain.sources._on_changes(sid, {"proj/notes.txt", "proj/brain-notes.txt"}, False)
    assert brain.sources.wait_idle(30)
    got = _indexed(brain, "all")
    assert "proj/readme.md" in got
    assert not {p for p in got if "notes" in p or p.startswith("home/")}, got
    _assert_never_found(brain, "all")


def test_a_source_whose_path_became_a_link_is_no_longer_read(
    brain: Brain, tmp_path: Path, outside: Path
) -> None:
    parent = tmp_path / "work"
    _w(parent, "proj/a.md", "# a\n\nthe real project\n")
    brain.sources.add(str(parent / "proj"), name="proj", sync=False)
    _sync(brain, "proj")
    # Swap a folder of the recorded path for a link to another tree with the same shape.
    os.rename(parent, tmp_path / "work-moved")
    _w(outside, "proj/stolen.md", SECRET + "\n")
    os.symlink(outside, parent)
    job = brain.sources.sync("proj", wait=True, timeout=60)
    assert "skipped" in job["result"], job
    with pytest.raises(Forbidden):
        brain.sources.search("zebracornish", "grep", source="proj")
    assert brain.sources.search("zebracornish", "grep")["count"] == 0
    assert "zebracornish" not in _stored_text(brain)


@pytest.mark.parametrize(
    ("root", "roots"), [("/etc", None), ("/proc", ["/"]), ("/", ["/"]), ("/sys/kernel", ["/"])]
)
def test_a_source_recorded_before_the_policy_is_never_read(
    brain: Brain, root: str, roots: list[str] | None
) -> None:
    """A dangerous source already in the registry (added by an older version) is not synced
    and not grepped, whatever the caller."""
    from brain.sources.registry import SourceRecord, new_source_id

    if roots is not None:
        brain.settings.paths.allowed_roots = roots
    ident = brain.settings.identity  # old rows belong to the settings identity (migrated)
    rec = SourceRecord(
        id=new_source_id(),
        name="old",
        root=root,
        project="general",
        trigger="auto",
        user_id=ident.user_id,
        agent_id=ident.agent_id,
    )
    brain.sources.registry.save(rec)
    assert rec.id not in {w.source_id for w in brain.sources._watched()}  # not even watched
    job = brain.sources.queue.submit(rec.id, rec.project, "sync", reason="test")
    assert job.done.wait(60)
    assert "skipped" in job.result, job.result
    with pytest.raises(Forbidden):
        brain.sources.search("root", "grep", source=rec.id)
    assert brain.sources.search("root", "grep")["count"] == 0
    flt = Filter(must=(Match("source_id", rec.id),))
    assert brain.store.count(flt) == 0


def test_reading_a_walked_file_never_follows_a_folder_swapped_for_a_link(
    tmp_path: Path, outside: Path
) -> None:
    """The race between the walk and the read: a folder replaced by a link meanwhile."""
    from brain.sources.walker import read_text_capped, walk_source

    root = tmp_path / "proj"
    _w(root, "sub/secret.txt", "the project's own text\n")
    entry = next(e for e in walk_source(root, SourceFilter(root, [], [], True)).files)
    assert read_text_capped(entry.path, root=root)[0] == "the project's own text\n"
    os.rename(root / "sub", root / "sub-old")
    os.symlink(outside, root / "sub")
    with pytest.raises(OSError):
        read_text_capped(entry.path, root=root)


# ------------------------------------------------------------------ procfs mounted elsewhere
@pytest.fixture
def proc_mount(tmp_path: Path) -> Iterator[Path]:
    """procfs mounted inside an allowed folder (needs mount rights; skipped without them)."""
    root = tmp_path / "proj"
    _w(root, "a.md", "# a\n\nplain project text\n")
    point = root / "pm"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "proc", "proc", str(point)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount procfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_procfs_mounted_elsewhere_is_refused_and_never_walked(
    brain: Brain, proc_mount: Path
) -> None:
    with pytest.raises(Forbidden):
        brain.sources.add(str(proc_mount), name="pm", sync=False)
    with pytest.raises(Forbidden):
        brain.files.ingest(str(proc_mount / "self" / "environ"))
    root = proc_mount.parent
    brain.sources.add(str(root), name="proj", sync=False)
    _sync(brain, "proj")
    got = _indexed(brain, "proj")
    assert "a.md" in got and not {p for p in got if p.startswith("pm/")}, got
    assert brain.files.list() == []


# ------------------------------------------------------------------ real processes
async def test_http_proxy_to_a_stdio_owner_gets_the_http_policy(tmp_path: Path) -> None:
    """A stdio server owns the brain; an HTTP server on the same data dir forwards to it.
    The HTTP caller is refused (no roots configured), the stdio caller is not (its home)."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
    from fastmcp.exceptions import ToolError

    from brain.process import owner as own
    from tests.process import test_http as th

    user, home = tmp_path / "user", tmp_path / "brainhome"
    _w(user, "proj/a.md", "# a\n\nthe platypus lays eggs\n")
    env = {k: v for k, v in th._env(home).items() if k != "BRAIN__PATHS__ALLOWED_ROOTS"}
    env["HOME"] = str(user)  # the local default root
    stdio = Client(
        StdioTransport(
            command=sys.executable,
            args=["-m", "brain.cli", "serve"],
            env=env,
            cwd=str(th.ROOT),
            keep_alive=False,
        ),
        timeout=60,
    )
    async with stdio:
        await stdio.call_tool("brain_stats", {})  # the owner is up
        port = th._free_port()
        with open(tmp_path / "http.err", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "brain.cli", "serve", "--http", "--port", str(port)],
                env=env,
                cwd=str(th.ROOT),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        server = th.Server(proc, home, port, tmp_path / "http.err")
        try:
            deadline = time.monotonic() + th.START_TIMEOUT_S
            while "Uvicorn running" not in server.output():
                assert proc.poll() is None and time.monotonic() < deadline, server.output()
                time.sleep(0.1)
            info = own.read_info(home)
            assert info is not None and info.kind == "stdio"  # the HTTP server is a proxy
            async with Client(
                StreamableHttpTransport(server.url, auth=th._token(server)), timeout=60
            ) as http:
                for name, args in (
                    ("add_source", {"path": str(user / "proj"), "name": "h"}),
                    ("ingest_file", {"path": str(user / "proj" / "a.md")}),
                ):
                    with pytest.raises(ToolError, match="FORBIDDEN"):
                        await http.call_tool(name, args)
                added = await stdio.call_tool(
                    "add_source", {"path": str(user / "proj"), "name": "s", "trigger": "manual"}
                )
                assert added.structured_content["source"]["name"] == "s"
                listed = await http.call_tool("list_sources", {})
                assert listed.structured_content["count"] == 0
                files = await http.call_tool("list_files", {})
                assert files.structured_content["count"] == 0
        finally:
            th._stop(server)
