from __future__ import annotations

from pathlib import Path

import pytest

from brain.sources.categories import categorize, parse_frontmatter
from brain.sources.filters import SourceFilter, is_floored

GREEDY_INCLUDE = [".ssh/**", ".aws/**", ".env", "*.pem", "**/Login Data", "**/*"]


@pytest.mark.parametrize(
    "rel",
    [
        "node_modules/react/index.js",
        "web/node_modules/x/y.js",
        ".git/config",
        ".pnpm-store/v3/a",
        ".yarn/cache/pkg.zip",
        "pkg/.yarn/cache/pkg.zip",
        "dist/app.js",
        "build/out.o",
        "target/debug/x",
        ".venv/lib/site.py",
        "venv/bin/activate",
        "src/__pycache__/m.cpython-311.pyc",
        "m.pyc",
        ".mypy_cache/x.json",
        "package-lock.json",
        "sub/yarn.lock",
        "uv.lock",
        "Cargo.lock",
        ".env",
        "api/.env.production",
        "certs/server.pem",
        "server.key",
        "home/id_rsa",
        "id_ed25519.pub",
        "vault.kdbx",
    ],
)
def test_defaults_exclude(tmp_path: Path, rel: str) -> None:
    assert not SourceFilter(tmp_path, [], []).admits(rel)


@pytest.mark.parametrize("rel", ["src/app.py", "README.md", "docs/guide.md", ".github/x.yml"])
def test_ordinary_files_admitted(tmp_path: Path, rel: str) -> None:
    assert SourceFilter(tmp_path, [], []).admits(rel)


@pytest.mark.parametrize(
    "rel",
    [
        ".ssh/id_rsa",
        ".ssh/config",
        "home/alice/.ssh/known_hosts",
        ".aws/credentials",
        "u/.gnupg/pubring.kbx",
        ".azure/azureProfile.json",
        ".kube/config",
        ".docker/config.json",
        ".netrc",
        "h/.git-credentials",
        ".npmrc",
        "x/.pypirc",
        ".local/share/keyrings/login.keyring",
        "config/.local/share/keyrings/a",
        ".pki/nssdb/cert9.db",
        "h/.local/share/pki/nssdb/key4.db",
        ".config/gcloud/credentials.db",
        "sandbox/config/.config/gh/hosts.yml",
        ".config/rclone/rclone.conf",
        ".config/google-chrome/Default/Login Data",
        ".config/google-chrome/Default/Preferences",
        ".config/chromium/Default/Cookies",
        "AppData/Local/Google/Chrome/User Data/Default/History",
        "Library/Application Support/Chromium/Default/x",
        "backup/Default/Login Data",
        "backup/Local State",
        ".mozilla/firefox/abc.default-release/logins.json",
        "AppData/Roaming/Mozilla/Firefox/Profiles/x/prefs.js",
        "abc.default-release/prefs.js",
        "p/key4.db",
        "p/cookies.sqlite",
    ],
)
def test_floor_beats_include_and_negation(tmp_path: Path, rel: str) -> None:
    assert is_floored(rel)
    flt = SourceFilter(tmp_path, ["!.ssh", "!.aws/**", "!*"], GREEDY_INCLUDE)
    assert not flt.admits(rel)


@pytest.mark.parametrize("rel", [".ssh/id_rsa", ".aws/credentials", ".env", "keys/site.pem"])
def test_include_asking_for_secrets_still_excluded(tmp_path: Path, rel: str) -> None:
    flt = SourceFilter(tmp_path, [], [".ssh/**", ".aws/credentials", ".env", "*.pem"])
    assert not flt.admits(rel)


def test_floor_prunes_directories(tmp_path: Path) -> None:
    flt = SourceFilter(tmp_path, [], ["**/*"])
    for d in [".ssh", "a/.aws", ".config/google-chrome", ".mozilla/firefox", "node_modules"]:
        assert flt.is_excluded_dir(d), d
    assert not flt.is_excluded_dir("src")
    assert not flt.is_excluded_dir(".config")


def test_gitignore_root_and_nested(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.log\nsecret_dir/\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / ".gitignore").write_text("generated.py\n!keep.log\n")
    flt = SourceFilter(tmp_path, [], [])
    assert not flt.admits("app.log")
    assert not flt.admits("a/b/app.log")
    assert flt.is_excluded_dir("secret_dir")
    assert not flt.admits("pkg/generated.py")
    assert flt.admits("generated.py")
    assert flt.admits("pkg/keep.log")
    assert flt.admits("main.py")
    off = SourceFilter(tmp_path, [], [], use_gitignore=False)
    assert off.admits("app.log")


def test_include_narrows_and_exclude_wins(tmp_path: Path) -> None:
    flt = SourceFilter(tmp_path, ["src/legacy/"], ["*.py", "docs/"])
    assert flt.admits("src/app.py")
    assert flt.admits("docs/guide.md")
    assert not flt.admits("README.md")
    assert not flt.admits("src/legacy/old.py")
    assert flt.is_excluded_dir("src/legacy")


def test_user_negation_lifts_a_plain_default_but_not_secrets(tmp_path: Path) -> None:
    flt = SourceFilter(tmp_path, ["!build/"], [])
    assert flt.admits("build/generator.py")
    assert not SourceFilter(tmp_path, ["!.env"], []).admits(".env")


def test_env_dir_pruned_only_when_virtualenv(tmp_path: Path) -> None:
    (tmp_path / "env").mkdir()
    flt = SourceFilter(tmp_path, [], [])
    assert flt.admits("env/settings.py")
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    flt = SourceFilter(tmp_path, [], [])
    assert flt.is_excluded_dir("env")
    assert not flt.admits("env/lib/x.py")


def test_config_hash(tmp_path: Path) -> None:
    base = SourceFilter(tmp_path, ["a"], ["b"]).config_hash()
    assert base == SourceFilter(tmp_path, ["a"], ["b"]).config_hash()
    assert base != SourceFilter(tmp_path, ["a", "c"], ["b"]).config_hash()
    assert base != SourceFilter(tmp_path, ["a"], []).config_hash()
    assert base != SourceFilter(tmp_path, ["a"], ["b"], use_gitignore=False).config_hash()
    (tmp_path / ".gitignore").write_text("*.tmp\n")
    assert base != SourceFilter(tmp_path, ["a"], ["b"]).config_hash()


# -- categories ----------------------------------------------------------------------------

FM = "---\nid: deploy\nname: Deploy helper\ndescription: Ships it\nrequiredFeatures: [net]\n---\n"


@pytest.mark.parametrize(
    ("rel", "text", "category"),
    [
        ("skills/deploy/SKILL.md", "# x", "skills"),
        (".claude/skills/deploy/SKILL.md", "# x", "skills"),
        ("skills/deploy/reference.md", "# x", "skills"),
        (".cursor/rules/style.mdc", "x", "rules"),
        ("rules/style.md", FM, "rules"),
        ("rules/style.md", "# no frontmatter", "docs"),
        (".claude/agents/reviewer.md", FM, "agents"),
        ("agents/reviewer.md", "plain", "docs"),
        ("x/reviewer.agent.md", FM, "agents"),
        ("x/reviewer.agent.md", "plain", "docs"),
        (".opencode/command/ship.md", "# x", "commands"),
        ("commands/ship.md", "# x", "commands"),
        ("AGENTS.md", "", "contribution"),
        ("pkg/CLAUDE.md", "", "contribution"),
        ("GEMINI.md", "", "contribution"),
        (".cursorrules", "", "contribution"),
        (".windsurfrules", "", "contribution"),
        (".github/copilot-instructions.md", "", "contribution"),
        ("CONTRIBUTING.md", "", "contribution"),
        ("docs/guide.md", "# guide", "docs"),
        ("docs/notes.txt", "x", "docs"),
        ("README.rst", "x", "docs"),
        ("README", "x", "docs"),
        ("logs/session.jsonl", None, "conversation"),
        ("events.ndjson", None, "conversation"),
        ("pyproject.toml", None, "config"),
        (".github/workflows/ci.yml", None, "config"),
        ("Dockerfile", None, "config"),
        ("Makefile", None, "config"),
        ("settings.json", None, "config"),
        ("src/app.py", None, "code"),
        ("web/App.tsx", None, "code"),
        ("image.png", None, "other"),
        ("notes.txt", None, "other"),
    ],
)
def test_categorize(rel: str, text: str | None, category: str) -> None:
    assert categorize(rel, text)[0] == category


def test_frontmatter_capture_is_whitelisted() -> None:
    text = "---\nid: deploy\nname: Deploy\ntoken: hunter2\ncredential_ids:\n  - gh\n---\nbody"
    category, capture = categorize(".claude/agents/deploy.md", text)
    assert category == "agents"
    assert capture == {"id": "deploy", "name": "Deploy", "credential_ids": ["gh"]}
    _, capture = categorize("rules/x.md", FM)
    assert capture["required_features"] == ["net"]
    assert capture["description"] == "Ships it"


@pytest.mark.parametrize(
    "text",
    [
        "---\nname: [unclosed\n---\n",
        "---\n: : :\n\t- x\n---\n",
        "---\nno closing fence",
        "---\n- a list\n---\n",
        "",
        None,
        "\x00\x01binary",
    ],
)
def test_bad_frontmatter_never_crashes(text: str | None) -> None:
    assert isinstance(parse_frontmatter(text), dict)
    category, _ = categorize("agents/x.md", text)
    assert category in ("agents", "docs")
