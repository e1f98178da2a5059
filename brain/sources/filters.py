"""Which files of a source may be indexed or searched.

Layers, checked in this order (the first that rejects wins):

1. ``FLOOR``: credential stores and browser profiles, matched as path shapes anywhere
   in the tree. Nothing lifts it: not an include rule, not a negated exclude.
2. ``SECRET_EXCLUDES``: .env files, key material and credential files. Built-in like the
   defaults, but a user's ``!pattern`` cannot negate them either. A service-account JSON
   under any name is caught by its content (``holds_credentials``, checked by the indexer
   and grep when they read a file).
3. ``DEFAULT_EXCLUDES`` + the user's exclude list, one gitignore spec (so a user may
   write ``!build/`` to index a ``build`` folder that holds real sources).
4. The source's own ``.gitignore`` files (root and nested, loaded lazily, cached).
5. The include allowlist: when non-empty, only matching files are admitted.

All patterns use gitignore syntax (``pathspec``), compiled by ``brain.trust.globs`` so that
no pattern can backtrack (issue 50: ``*a*a*...*b`` as an exclude froze the server); a line
of a ``.gitignore`` that is not a valid pattern is skipped with a warning. Paths are POSIX,
relative to the root.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path

from brain.trust.globs import compile_lenient, compile_spec
from brain.trust.secret_patterns import VERSION as REDACTION_VERSION

# 2: *.env, service-account JSON and more secret excludes; what a source stores is redacted.
FILTER_VERSION = 2

DEFAULT_EXCLUDES: tuple[str, ...] = (
    # VCS and package-manager stores
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    ".pnpm-store",
    "**/.yarn/cache",
    # build output
    "dist/",
    "build/",
    "out/",
    "target/",
    ".next/",
    ".nuxt/",
    # virtualenvs and caches (a plain ``env/`` is pruned only when it holds pyvenv.cfg)
    ".venv/",
    "venv/",
    "__pycache__/",
    ".tox/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".cache/",
    "coverage/",
    "*.pyc",
    # lockfiles
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "poetry.lock",
    "Cargo.lock",
    "uv.lock",
    "Pipfile.lock",
    "composer.lock",
    "Gemfile.lock",
)

SECRET_EXCLUDES: tuple[str, ...] = (
    ".env",
    ".env.*",
    "*.env",
    "*.env.*",
    ".envrc",
    # cloud service-account and OAuth client files (content is checked too: holds_credentials)
    "*service-account*.json",
    "*service_account*.json",
    "credentials.json",
    "client_secret*.json",
    # other credential-bearing files
    "secrets.yml",
    "secrets.yaml",
    "*.tfstate",
    "*.tfstate.*",
    ".htpasswd",
    ".boto",
    ".s3cfg",
    "*.ppk",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_ed25519*",
    "id_ecdsa*",
    "id_dsa*",
    "*.kdbx",
)

# Path shapes, not one machine's paths: a home directory and a sandbox /config look alike.
# Multi-component shapes carry ``**/`` because gitignore anchors patterns with a slash.
FLOOR: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    # login keyrings
    "**/.local/share/keyrings",
    "keyrings/",
    "**/Library/Keychains",
    "*.keychain",
    "*.keychain-db",
    # NSS certificate and private-key store, both locations
    ".pki",
    "**/.local/share/pki",
    # cloud / CLI credential trees
    "**/.config/gcloud",
    "**/.config/gh",
    "**/.config/rclone",
    # Chromium-family profiles
    "**/.config/chromium",
    "**/.config/google-chrome",
    "**/.config/google-chrome-beta",
    "**/.config/BraveSoftware",
    "**/.config/microsoft-edge",
    "**/Google/Chrome",
    "**/Chromium/User Data",
    "**/Application Support/Chromium",
    "Login Data",
    "Login Data-journal",
    "Login Data For Account",
    "Cookies",
    "Cookies-journal",
    "Local State",
    "Web Data",
    # Firefox profiles
    "**/.mozilla/firefox",
    "**/Firefox/Profiles",
    "*.default-release/",
    "*.default-esr/",
    "key3.db",
    "key4.db",
    "logins.json",
    "cookies.sqlite",
    "cert9.db",
)

# Directory names pruned only when they really are a virtualenv.
_VENV_NAMES = frozenset({"env"})


class _Matcher:
    """A gitignore spec; without negations its patterns fold into one regex (much faster)."""

    def __init__(self, lines: list[str] | tuple[str, ...], origin: str | None = None) -> None:
        # ``origin`` names a file nobody validated (a .gitignore): bad lines are skipped
        self.spec = compile_lenient(lines, origin) if origin else compile_spec(lines)
        active = [p for p in self.spec.patterns if p.include is not None]
        self._union: re.Pattern[str] | None = None
        if all(p.include for p in active) and all(p.regex is not None for p in active):
            parts = [p.regex.pattern.replace("(?P<ps_d>", "(?:") for p in active]  # type: ignore[union-attr]
            self._union = re.compile("|".join(f"(?:{x})" for x in parts) or r"(?!)")

    def match_file(self, rel: str) -> bool:
        if self._union is not None:
            return self._union.search(rel) is not None
        return self.spec.match_file(rel)

    def check_file(self, rel: str) -> bool | None:
        """True ignored, False re-included by a negation, None untouched."""
        if self._union is not None:
            return True if self._union.search(rel) else None
        return self.spec.check_file(rel).include


def _spec(lines: list[str] | tuple[str, ...], origin: str | None = None) -> _Matcher:
    return _Matcher(lines, origin)


_FLOOR_SPEC = _spec(FLOOR)
_SECRET_SPEC = _spec(SECRET_EXCLUDES)


_SERVICE_ACCOUNT = re.compile(r'"type"\s*:\s*"service_account"')
_PRIVATE_KEY_FIELD = re.compile(r'"private_key"\s*:')
# Enough of a file's head to see a service-account JSON's "type" and "private_key" fields.
CREDENTIAL_SNIFF_BYTES = 65536


def holds_credentials(rel_posix: str, text: str) -> bool:
    """True for a file whose content is a credential whatever its name: a cloud
    service-account JSON ("type": "service_account" with a "private_key")."""
    if not rel_posix.lower().endswith(".json"):
        return False
    head = text[:CREDENTIAL_SNIFF_BYTES]
    return bool(_SERVICE_ACCOUNT.search(head) and _PRIVATE_KEY_FIELD.search(head))


def file_holds_credentials(path: Path, rel_posix: str) -> bool:
    """``holds_credentials`` on the head of a file on disk (unreadable counts as not)."""
    if not rel_posix.lower().endswith(".json"):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(CREDENTIAL_SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return False
    return holds_credentials(rel_posix, head)


def _clean(patterns: list[str] | None) -> list[str]:
    return [p.strip() for p in patterns or [] if p.strip() and not p.strip().startswith("#")]


def is_floored(rel_posix: str) -> bool:
    """True when a path lies on the non-removable floor (a credential store or profile)."""
    rel = rel_posix.strip("/")
    return bool(rel) and (_FLOOR_SPEC.match_file(rel) or _FLOOR_SPEC.match_file(rel + "/"))


def is_secret_path(rel_posix: str) -> bool:
    """True for a path no rule may ever admit: the floor or a built-in secret exclude (a
    listing leaves it out entirely; a user's exclude only hides a file from sync)."""
    rel = rel_posix.strip("/")
    return is_floored(rel) or bool(rel) and _SECRET_SPEC.match_file(rel)


class SourceFilter:
    """The exclude/include rule of one source; cheap to call per path, safe across threads."""

    def __init__(
        self,
        root: Path,
        exclude: list[str] | None = None,
        include: list[str] | None = None,
        use_gitignore: bool = True,
    ) -> None:
        self.root = Path(root)
        self.exclude = _clean(exclude)
        self.include = _clean(include)
        self.use_gitignore = use_gitignore
        self._exclude_spec = _spec([*DEFAULT_EXCLUDES, *self.exclude])
        self._include_spec = _spec(self.include) if self.include else None
        self._gitignores: dict[str, _Matcher | None] = {}
        self._venvs: dict[str, bool] = {}
        self._lock = threading.Lock()

    # -- public checks -------------------------------------------------------------------

    def is_excluded_dir(self, rel_posix: str) -> bool:
        """True when a whole directory can be pruned from a walk (include never prunes)."""
        rel = rel_posix.strip("/")
        if not rel:
            return False
        as_dir = rel + "/"
        if _FLOOR_SPEC.match_file(as_dir) or _SECRET_SPEC.match_file(as_dir):
            return True
        if self._exclude_spec.match_file(as_dir):
            return True
        return self._in_virtualenv(rel, is_dir=True) or self._gitignored(rel, is_dir=True)

    def admits(self, rel_posix: str) -> bool:
        """True when a file may be indexed and returned by any search mode."""
        rel = rel_posix.strip("/")
        if not rel or is_floored(rel) or _SECRET_SPEC.match_file(rel):
            return False
        if self._exclude_spec.match_file(rel):
            return False
        if self._in_virtualenv(rel, is_dir=False) or self._gitignored(rel, is_dir=False):
            return False
        return self._include_spec is None or self._include_spec.match_file(rel)

    def config_hash(self) -> str:
        """Stable digest of everything that decides admission; a change forces a reconcile."""
        root_ignore = ""
        if self.use_gitignore:
            try:
                root_ignore = (self.root / ".gitignore").read_text("utf-8", errors="replace")
            except OSError:
                root_ignore = ""
        blob = json.dumps(
            {
                "v": FILTER_VERSION,
                "defaults": DEFAULT_EXCLUDES,
                "secrets": SECRET_EXCLUDES,
                "floor": FLOOR,
                "redaction": REDACTION_VERSION,
                "exclude": self.exclude,
                "include": self.include,
                "gitignore": self.use_gitignore,
                "root_gitignore": root_ignore,
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # -- rg / grep helpers ---------------------------------------------------------------

    def never_negatable_patterns(self) -> list[str]:
        """Floor + secret patterns: safe to pass to an external tool as plain excludes."""
        return [*FLOOR, *SECRET_EXCLUDES]

    def exclude_patterns(self) -> list[str]:
        """Defaults + user excludes, or [] when a user negation makes them order-sensitive."""
        if any(p.startswith("!") for p in self.exclude):
            return []
        return [*DEFAULT_EXCLUDES, *self.exclude]

    # -- internals -----------------------------------------------------------------------

    def _in_virtualenv(self, rel: str, *, is_dir: bool) -> bool:
        parts = rel.split("/")
        dirs = parts if is_dir else parts[:-1]
        for i, name in enumerate(dirs):
            if name in _VENV_NAMES:
                prefix = "/".join(dirs[: i + 1])
                hit = self._venvs.get(prefix)
                if hit is None:
                    hit = (self.root / prefix / "pyvenv.cfg").is_file()
                    self._venvs[prefix] = hit
                if hit:
                    return True
        return False

    def _gitignore_of(self, dir_rel: str) -> _Matcher | None:
        if dir_rel in self._gitignores:
            return self._gitignores[dir_rel]
        path = self.root / dir_rel / ".gitignore" if dir_rel else self.root / ".gitignore"
        spec = None
        try:
            if path.is_file():
                lines = path.read_text("utf-8", errors="replace").splitlines()
                spec = _spec(lines, origin=str(path))
        except (OSError, ValueError):
            spec = None
        with self._lock:
            self._gitignores[dir_rel] = spec
        return spec

    def _gitignored(self, rel: str, *, is_dir: bool) -> bool:
        if not self.use_gitignore:
            return False
        parts = rel.split("/")
        ignored = False
        # Deeper .gitignore files override shallower ones, as in git.
        for depth in range(len(parts)):
            spec = self._gitignore_of("/".join(parts[:depth]))
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            verdict = spec.check_file(sub)
            if verdict is not None:
                ignored = verdict
        return ignored
