"""brain/app.py is the composition root: the only module below the command line that reads the
settings. Every other module is handed its collaborators and the values of its own settings
section, typed; none is handed the whole Brain as ``brain: Any`` (issue 19, part 1).

A module may name a section's class (``config.FilesSettings``) to type the section it is
handed; it may not load the settings, name the root ``Settings`` or read ``brain.settings``.

The checks walk every file under brain/ with the ast, so a new module is checked as soon as it
exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from brain.app import Brain

ROOT = Path(__file__).resolve().parents[2]

# Above the composition root: the command line loads the settings and hands them to Brain
# (and `brain restore` reads the store's location from them without opening a Brain); startup
# guesses the data dir when the settings themselves failed to load.
# brain/api.py is the scripting entry point (open_brain): it loads the settings to find the
# data dir and the caller, as the command line does.
ENTRY = ("brain/process/startup.py", "brain/api.py")
# Known and tracked, each to be removed by the change that fixes it (the test fails when an
# entry no longer offends, so this list cannot outlive its reason). Nothing may be added here.
KNOWN: set[tuple[str, str]] = set()


def _is_entry(rel: str) -> bool:
    first = rel.split("/")[1]
    return rel in ENTRY or first == "cli" or (first.startswith("cli") and first.endswith(".py"))


def _names_brain(node: ast.expr) -> bool:
    """``brain`` or ``<anything>.brain``: the whole application object."""
    return (isinstance(node, ast.Name) and node.id == "brain") or (
        isinstance(node, ast.Attribute) and node.attr == "brain"
    )


def _is_any(node: ast.expr | None) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        node = ast.parse(node.value, mode="eval").body
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any"
    )


def _section(name: str) -> bool:
    """A section's class (``FilesSettings``), not the root ``Settings`` nor a loader."""
    return name.endswith("Settings") and name != "Settings"


def offences(source: str) -> set[str]:
    """What in ``source`` reads the settings or takes the whole Brain untyped."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            if any(a.name.split(".")[0] == "config" for a in node.names):
                found.add("imports config")
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").split(".")[0] == "config":
                found |= {f"imports config.{a.name}" for a in node.names if not _section(a.name)}
        elif isinstance(node, ast.Name) and node.id == "Settings":
            found.add("references Settings")
        elif isinstance(node, ast.Attribute):
            if node.attr == "Settings":
                found.add("references Settings")
            elif node.attr == "settings" and _names_brain(node.value):
                found.add("settings read through the brain")
        elif isinstance(node, ast.arg) and node.arg == "brain" and _is_any(node.annotation):
            found.add("parameter brain: Any")
    return found


def test_only_the_composition_root_reads_the_settings() -> None:
    files = sorted((ROOT / "brain").rglob("*.py"))
    assert len(files) > 30
    found = set()
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel == "brain/app.py" or _is_entry(rel):
            continue
        found |= {(rel, what) for what in offences(path.read_text(encoding="utf-8"))}
    assert found - KNOWN == set(), "hand the service its settings section from brain/app.py"
    assert KNOWN - found == set(), "fixed: remove these entries from KNOWN"


def test_the_walk_sees_every_way_of_reading_the_settings() -> None:
    src = (
        "import config\n"
        "from config import load_settings, DEFAULT_HOME, Settings, FilesSettings\n"
        "from typing import Any\n"
        "def f(brain: Any, x: 'Any') -> None:\n"
        "    brain.settings.memory\n"
        "def g(self, brain: 'Any') -> None:\n"
        "    self.brain.settings.files\n"
        "    return Settings()\n"
        "def h(cfg: config.Settings) -> None:\n"
        "    pass\n"
    )
    assert offences(src) == {
        "imports config",
        "imports config.load_settings",
        "imports config.DEFAULT_HOME",
        "imports config.Settings",
        "parameter brain: Any",
        "settings read through the brain",
        "references Settings",
    }
    typed = (
        "from config import FilesSettings\n"
        "def f(brain: Brain, settings: object, cfg: FilesSettings) -> None:\n"
        "    x.settings\n"
    )
    assert offences(typed) == set()
    assert offences("from config2 import x\nimport configparser\n") == set()


def test_the_root_itself_is_seen_reading_them() -> None:
    """The root is skipped by choice, not because the walk is blind to it."""
    root = offences((ROOT / "brain" / "app.py").read_text(encoding="utf-8"))
    assert "imports config.Settings" in root and "references Settings" in root


def test_close_builds_no_service_that_was_never_used(brain: Brain) -> None:
    """Background services start at open; the others are built on first use, and closing
    the brain stops what was started without building the rest."""
    built = set(brain.__dict__)
    assert {"workers", "agentic", "sources", "files", "snapshots"} <= built
    assert not {"sessions", "mistakes", "maintenance"} & built
    assert brain.workers.running
    brain.close()
    assert not brain.workers.running
    assert not {"sessions", "mistakes", "maintenance"} & set(brain.__dict__)


def test_services_share_the_brains_collaborators(brain: Brain) -> None:
    """One store, one memory, one clock: what app.py hands each service is the brain's own."""
    for service in (brain.sessions, brain.mistakes, brain.decay, brain.maintenance):
        assert service.memory is brain.memory
        assert service.store is brain.store
        assert service.clock is brain.clock
    assert brain.maintenance.decay is brain.decay
    assert brain.agentic.memory is brain.memory and brain.agentic.store is brain.store


def test_the_offline_router_fails_as_an_unconfigured_model_router() -> None:
    """app.py hands the agentic service an OfflineRouter when no model is set (no HF import):
    it must answer like ModelRouter without a model, status and refusal alike."""
    from brain.agentic import OfflineRouter
    from brain.errors import LLMError
    from brain.llm.router import ModelRouter

    offline, unset = OfflineRouter("f", "h"), ModelRouter(fast_model="f", hard_model="h")
    assert offline.configured is unset.configured is False
    assert offline.status().keys() <= unset.status().keys()
    for router in (offline, unset):
        with pytest.raises(LLMError) as err:
            router.complete([{"role": "user", "content": "hi"}], "fast")
        assert err.value.code == "LLM_ERROR" and "No chat model configured" in err.value.message
