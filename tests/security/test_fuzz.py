"""Every tool, driven through the MCP client with arguments generated from its own schema.

The tools are enumerated from the server (``list_tools``), so a new tool is fuzzed without
touching this file. For each call the test asserts:

- it answers within ``CALL_S`` (a hang fails the run, which then stops: the stuck worker
  thread cannot be cancelled and would starve every later call);
- it succeeds, or fails with a *typed* error: text ``[CODE] message`` where CODE is a code of
  brain/errors.py (or NOT_READY / UNAUTHORIZED of the tool layer), or the framework's
  argument validation error, recognised by pydantic's title for the tool's signature,
  ``N validation error(s) for call[<tool>]``, which fastmcp raises before the tool runs.
  Anything else (``Error calling tool ...``, a traceback, an exception's bare text) is an
  internal error and fails;
- a rejected call changes nothing: the store's points and payloads, the graph, the uploaded
  files and their blobs, the sources and their jobs are the same before and after;
- the server still answers afterwards (``brain_stats``);
- a path outside the user's home, or on a special filesystem, is never accepted by
  ``files(action="ingest")`` or ``sources(action="add")`` (issue 13: stdio's default allowed
  root is the home).

The folded admin tools (health, sources, changes, fs, files, model) are fuzzed one action at
a time, each action with its own arguments, as if each were a tool.

Each tool gets a deterministic sweep (every property once with each worst value of its kind,
schema_strategies.sweep) and then random calls. Failures are collected over all tools and
reported together, one line each (tool, arguments, what happened), so one run lists
everything outstanding. Hypothesis runs derandomized with a bounded ``max_examples`` per tool
and no shrinking (a shrink of a slow input would repeat it), so the run is reproducible and
stays near a minute.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, Phase, example, given, seed, settings

from brain.app import Brain
from brain.errors import BrainError
from brain.vector_store.base import scroll_all
from mcp_surface import files as files_tools
from mcp_surface import fs as fs_tools
from mcp_surface import health as health_tools
from mcp_surface import models as model_tools
from mcp_surface import sources as source_tools
from tests.security.schema_strategies import Known, arguments, base_arguments, sweep
from tests.timing import HANG_S

CALL_S = 5.0  # one call's bound; a loaded 2-core machine answers most in < 0.2 s
SETTLE_S = HANG_S  # how long work a successful call started may take before the next call
HEAVY = {"sources", "files", "consolidate_clusters", "deep_search"}
# Random calls per tool grow with its properties (each call makes one or two of them
# hostile), on top of the sweep (schema_strategies.sweep): near a minute in all on a loaded
# 2-core machine. FUZZ_SCALE (a factor) and FUZZ_SEED (an int; default derandomized) widen
# a run by hand; CI uses the defaults.
SCALE = float(os.environ.get("FUZZ_SCALE", "1"))
SEED = os.environ.get("FUZZ_SEED")


def examples(tool: dict[str, Any]) -> int:
    props = len(tool["schema"].get("properties", {}))
    n = min(3 + props // 2, 8) if tool["name"] in HEAVY else min(6 + props, 24)
    return max(1, int(n * SCALE))


OUTSIDE = ("/", "/etc", "/etc/passwd", "/etc/shadow", "/proc", "/proc/self/environ", "/sys",
           "/dev", "/dev/zero", "/dev/urandom", "/root", "/var/log")


def _codes() -> set[str]:
    seen, todo = set(), [BrainError]
    while todo:
        cls = todo.pop()
        seen.add(cls.code)
        todo.extend(cls.__subclasses__())
    return seen | {"NOT_READY", "UNAUTHORIZED"}  # mcp_server.py's and routing.py's own


CODES = _codes()
TYPED = re.compile(r"^\[([A-Z_]+)\] ")


def classify(tool: str, text: str) -> str | None:
    """None if ``text`` is a typed error; else why it is not."""
    if re.match(rf"^\d+ validation errors? for call\[{re.escape(tool)}\]\n", text):
        return None
    m = TYPED.match(text)
    if m is None:
        return "untyped error"
    if m.group(1) not in CODES:
        return f"unknown code {m.group(1)}"
    if "Traceback" in text:
        return "traceback in a typed error"
    return None


def _short(value: Any, n: int = 240) -> str:
    text = repr(value)
    return text if len(text) <= n else text[:n] + f"...<{len(text)} chars>"


# ------------------------------------------------------------------------------ the brain
def _populate(portal: BlockingPortal, client: Any, brain: Brain, root: Path) -> Known:
    folder = root / "src"
    (folder / "pkg").mkdir(parents=True)
    (folder / "README.md").write_text("# Deploy\nRun ops/deploy.sh after the tests pass.\n")
    (folder / "pkg" / "app.py").write_text("def handler(event):\n    return event['id']\n")
    doc = root / "runbook.txt"
    doc.write_text("Runbook: restart the ingest worker when the queue stalls.\n" * 20)

    def call(tool: str, args: dict[str, Any]) -> Any:
        return portal.call(client.call_tool, tool, args).structured_content

    ids = [call("add_memory", {"content": text, "project": "fuzz", "tags": ["seed"]})
           ["note"]["zk_id"] for text in (
               "Redis runs on port 6379 in dev", "Use pytest -x to stop at the first failure",
               "The deploy script is ops/deploy.sh")]
    ids.append(call("add_memory", {"content": "quick capture about caching",
                                   "memory_type": "fleeting"})["note"]["zk_id"])
    failure = call("record_failure", {"content": "ImportError: qdrant_edge", "project": "fuzz",
                                      "failure_signature": "pytest:ImportError"})
    ids.append(failure["note"]["zk_id"] if "note" in failure else failure.get("zk_id", ""))
    source = call("add_source", {"path": str(folder), "name": "fuzzsrc", "trigger": "manual"})
    file_rec = call("ingest_file", {"path": str(doc), "project": "fuzz"})
    brain.files.wait(file_rec["id"], timeout=60)
    brain.sources.wait_idle(60)
    strings = [*filter(None, ids), "fuzz", "fuzzsrc", source["source"]["id"],
               source["job"]["job_id"], file_rec["id"], str(folder), str(doc),
               str(folder / "pkg"), "pkg/app.py", "README.md", "**/*.py"]
    by_name = {"zk_id": ids[0], "failure_zk_id": ids[-1], "project": "fuzz",
               "source": "fuzzsrc", "file_id": file_rec["id"], "path": str(folder),
               "job_id": source["job"]["job_id"]}
    return Known(strings=strings, by_name=by_name)


def snapshot(brain: Brain) -> dict[str, Any]:
    """What a call could change, as seen from outside the tool layer."""
    brain.memory.flush_stamps()
    points = {p.id: p.payload for p in scroll_all(brain.store, None)}
    files_dir = brain.home / "files"
    return {
        "kinds": Counter(str(p.get("kind")) for p in points.values()),
        "points": points,
        "graph": sorted(brain.graph.edges()),
        "files": brain.files.list(),
        "blobs": sorted(str(p) for p in files_dir.rglob("*")) if files_dir.exists() else [],
        "sources": brain.sources.list(),
        "jobs": [(j["job_id"], j["status"]) for j in brain.sources.jobs()],
    }


def _diff(before: dict[str, Any], after: dict[str, Any]) -> str:
    parts = []
    for key in before:
        if before[key] != after[key]:
            if key == "points":
                changed = {k for k in before[key].keys() | after[key].keys()
                           if before[key].get(k) != after[key].get(k)}
                parts.append(f"points changed: {_short(sorted(changed), 120)}")
            else:
                parts.append(f"{key}: {_short(before[key], 100)} -> {_short(after[key], 100)}")
    return "; ".join(parts)


def _settle(brain: Brain, root: Path) -> list[str]:
    """Wait for work a successful call started. A source outside the test's root is reported
    and dropped, so a walk of / cannot starve the rest of the run; so is one holding the
    brain's own data dir (``~`` here), whose every write would start another sync and make
    the before/after comparison of later calls meaningless."""
    found = []
    for src in brain.sources.list():
        src_root = Path(src["root"]).resolve()
        outside = not src_root.is_relative_to(root)
        if outside or brain.home.resolve().is_relative_to(src_root):
            if outside:
                found.append(f"source outside the allowed root accepted: {src['root']!r}")
            brain.sources.cancel(source=src["id"])
            brain.sources.remove(src["id"], purge=True)
    brain.sources.wait_idle(SETTLE_S)
    deadline = time.monotonic() + SETTLE_S
    while any(f["status"] == "processing" for f in brain.files.list()):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return found


# ------------------------------------------------------------------------------ the run
class Run:
    def __init__(self, portal: BlockingPortal, client: Any, brain: Brain, root: Path) -> None:
        self.portal, self.client, self.brain, self.root = portal, client, brain, root
        self.failures: list[str] = []
        self.hung = False
        self.outcomes: dict[str, Counter[str]] = {}

    def call(self, tool: str, args: dict[str, Any]) -> tuple[bool, str, Any]:
        """(failed, error text, structured result); raises TimeoutError after CALL_S."""
        fut: concurrent.futures.Future[Any] = self.portal.start_task_soon(
            functools.partial(self.client.call_tool, tool, args, raise_on_error=False))
        try:
            res = fut.result(timeout=CALL_S)
        except concurrent.futures.TimeoutError:
            raise TimeoutError from None
        except Exception as exc:  # noqa: BLE001 - protocol-level errors are judged like tool errors
            return True, str(exc), None
        text = res.content[0].text if res.content and hasattr(res.content[0], "text") else ""
        return bool(res.is_error), text, res.structured_content

    def check(self, tool: str, args: dict[str, Any]) -> None:
        """One call and its properties; a failure is recorded, not raised (Hypothesis would
        replay a failing example, and replaying a hang costs another stuck thread)."""
        if self.hung:
            return
        where = f"{tool}({_short(args)})"
        before = snapshot(self.brain)
        try:
            failed, text, _ = self.call(tool, args)
        except TimeoutError:
            self.hung = True
            self.failures.append(f"{where}: no answer within {CALL_S} s")
            return
        outcome = "ok" if not failed else ("invalid" if " validation error" in text[:40]
                                           else text[1:text.find("]")] if text[:1] == "[" else "?")
        self.outcomes.setdefault(tool, Counter())[outcome] += 1
        if failed:
            why = classify(tool, text)
            if why:
                self.failures.append(f"{where}: {why}: {_short(text, 200)}")
            after = snapshot(self.brain)
            if after != before:
                self.failures.append(f"{where}: rejected call changed state: "
                                     f"{_diff(before, after)}")
        elif (tool, args.get("action")) in (("files", "ingest"), ("sources", "add")) and _outside(
                args.get("path"), self.root):
            self.failures.append(f"{where}: path outside the user's home accepted")
        settled = _settle(self.brain, self.root)
        if (tool, args.get("action")) != ("sources", "add"):  # reported just above
            self.failures.extend(f"{where}: {f}" for f in settled)
        failed, text, _ = self.call("brain_stats", {})
        if failed:
            self.failures.append(f"{where}: server no longer answers brain_stats: {text[:200]}")

    def fuzz(self, tool: dict[str, Any], known: Known) -> None:
        @settings(max_examples=examples(tool), deadline=None,
                  derandomize=SEED is None, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        @given(args=arguments(tool["schema"], known))
        def run(args: dict[str, Any]) -> None:
            self.check(tool["name"], args)

        if SEED is not None:
            run = seed(int(SEED))(run)
        for args in sweep(tool["schema"], known, per_kind=2 if tool["name"] in HEAVY else 99):
            run = example(args=args)(run)
        run()


def _outside(path: Any, root: Path) -> bool:
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        return False
    try:
        resolved = Path(os.path.expanduser(path)).resolve()
    except (OSError, ValueError, RuntimeError):
        return False
    return resolved.exists() and (str(resolved) in OUTSIDE or not resolved.is_relative_to(root))


# The folded admin tools' actions and the arguments each takes (mcp_surface/*.py): each
# action is fuzzed as a tool of its own, so every action gets its sweep and random calls.
ACTION_USES = {"health": health_tools.USES, "sources": source_tools.USES,
               "changes": fs_tools.CHANGE_USES, "fs": fs_tools.FS_USES, "files": files_tools.USES,
               "model": model_tools.USES}
DESTRUCTIVE_ACTIONS = {("sources", "remove"), ("sources", "repair_orphans"), ("files", "delete"),
                       ("changes", "revert"), ("health", "gc"), ("health", "repair"),
                       ("health", "rebuild_indexes"), ("health", "quantization")}


def _per_action(name: str, schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(action, the schema of that action alone) for a folded tool; [("", schema)] else."""
    uses = ACTION_USES.get(name)
    if uses is None:
        return [("", schema)]
    assert set(uses) == set(schema["properties"]["action"]["enum"]), name
    required = set(schema.get("required", []))
    out = []
    for action, names in uses.items():
        props = {k: v for k, v in schema["properties"].items() if k in names or k in required}
        props["action"] = {"type": "string", "enum": [action]}
        out.append((action, {**schema, "properties": props, "required": sorted(required)}))
    return out


def _ordered(tools: list[Any]) -> list[dict[str, Any]]:
    """Destructive tools (and actions) last, so the others still find the seeded notes, file
    and source."""
    out = []
    for t in tools:
        for action, schema in _per_action(t.name, t.input_schema):
            destructive = ((t.name, action) in DESTRUCTIVE_ACTIONS if action
                           else bool(t.annotations and t.annotations.destructive_hint))
            out.append({"name": t.name, "action": action, "schema": schema,
                        "destructive": destructive})
    return sorted(out, key=lambda t: (t["destructive"], t["name"], t["action"]))


@pytest.fixture(autouse=True)
def _home_is_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """stdio's default allowed root is the user's home: the test's files live under it. Set
    before the brain is built, in case the path policy reads the home at start."""
    monkeypatch.setenv("HOME", str(tmp_path))


def test_every_tool_answers_hostile_arguments_with_success_or_a_typed_error(
    brain: Brain, tmp_path: Path
) -> None:
    from fastmcp import Client

    from mcp_server import create_server

    started = time.monotonic()
    with start_blocking_portal() as portal:
        client = portal.wrap_async_context_manager(Client(create_server(profile="full", brain=brain)))
        with client as c:
            known = _populate(portal, c, brain, tmp_path)
            tools = _ordered(portal.call(c.list_tools))
            assert len({t["name"] for t in tools}) >= 29, [t["name"] for t in tools]
            run = Run(portal, c, brain, tmp_path.resolve())
            for tool in tools:
                run.fuzz(tool, known)
                if run.hung:
                    break
    lines = sorted(set(run.failures))
    report = "\n".join(lines)
    if run.hung:
        report += "\n(run stopped at the hang: later tools were not fuzzed)"
    print(f"fuzzed {len(tools)} tools in {time.monotonic() - started:.0f} s")
    for name, counts in sorted(run.outcomes.items()):
        print(f"  {name}: {dict(counts)}")
    assert not lines, f"{len(lines)} failures:\n{report}"


def _string_props(schema: dict[str, Any]) -> list[tuple[str, Any]]:
    """(property, a lone-surrogate value of its shape) for each property that takes text."""
    out = []
    for name, prop in sorted(schema.get("properties", {}).items()):
        for branch in prop.get("anyOf") or [prop]:
            if branch.get("type") == "string":
                out.append((name, "ok \ud800"))
            elif branch.get("type") == "array" and branch.get("items", {}).get("type") in (
                    "string", "object"):
                item = "\udfff" if branch["items"]["type"] == "string" else {"key": "\udfff"}
                out.append((name, ["fine", item]))
    return out


async def test_every_tool_refuses_a_lone_surrogate_before_it_runs(client: Any,
                                                                  brain: Brain) -> None:
    """In-process and forwarded calls can carry a lone surrogate (the wire's JSON parsers
    refuse one); every tool answers INVALID_ARGUMENT and stores nothing."""
    await client.call_tool("add_memory", {"content": "Redis runs on port 6379"})
    before = snapshot(brain)
    tried = 0
    for tool in await client.list_tools():
        base = base_arguments(tool.input_schema, Known())
        for name, value in _string_props(tool.input_schema):
            res = await client.call_tool(tool.name, {**base, name: value}, raise_on_error=False)
            text = res.content[0].text if res.content else ""
            assert res.is_error and text.startswith("[INVALID_ARGUMENT] "), (
                tool.name, name, text[:300])
            assert "surrogate" in text and name in text
            tried += 1
    assert tried > 40
    assert snapshot(brain) == before
