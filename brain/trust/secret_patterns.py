"""Every secret shape the brain redacts: the one list (tests/trust/test_redact.py has a positive and
a near-miss negative case per pattern). ``brain/trust/redact.py`` is the engine that applies it.

Two families:

- ``WHOLE``: the whole match is the secret (a token format with a recognisable prefix, a
  JWT, a PEM private-key block). Each starts with a literal so the regex engine can skip
  ahead with a fast substring scan; the fixed-width lookbehind after the literal plays the
  role of a leading ``\\b`` without defeating that scan.
- ``VALUE``: only group ``value`` is the secret and the rest stays readable (the key of an
  assignment, the user and host of a URL). These are written in lower case and run over the
  lowered text (a case-insensitive alternation is ~8x slower); an optional check then looks
  at the original value (e.g. its entropy) before it is redacted.

Bump ``VERSION`` when a change should make indexed sources be read again.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable

__all__ = ["KINDS", "NOT_SECRET", "VALUE", "VERSION", "WHOLE", "ValuePattern"]

VERSION = 3

KINDS = (
    "private_key",
    "putty_key",
    "aws_access_key",
    "aws_secret_key",
    "github_token",
    "gitlab_token",
    "slack_token",
    "stripe_key",
    "openai_key",
    "anthropic_key",
    "huggingface_token",
    "google_api_key",
    "npm_token",
    "sendgrid_key",
    "jwt",
    "url_password",
    "bearer_token",
    "connection_string_key",
    "password_assignment",
    "cli_password",
    "high_entropy_secret",
)

# An unterminated PEM block is redacted to the end of the text: better too much than a leak.
WHOLE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"[\s\S]*?(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)"
        ),
    ),
    # A PuTTY key file (.ppk): from its header to its MAC line (to the end when unterminated);
    # and a Private-Lines block on its own, when the header was cut off.
    (
        "putty_key",
        re.compile(
            r"PuTTY-User-Key-File-[0-9]{1,2}:[\s\S]*?(?:Private-MAC:[ \t]*[0-9A-Fa-f]{0,128}|\Z)"
        ),
    ),
    (
        "putty_key",
        re.compile(
            r"Private-Lines:[ \t]*[0-9]{1,3}[ \t]*\r?\n(?:[A-Za-z0-9+/=]{1,100}(?:\r?\n|\Z))++"
            r"(?:Private-MAC:[ \t]*[0-9A-Fa-f]{0,128})?"
        ),
    ),
    (
        "jwt",
        re.compile(
            r"eyJ(?<![A-Za-z0-9_-]...)[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,}"
        ),
    ),
    ("aws_access_key", re.compile(r"A[KS]IA(?<![A-Za-z0-9]....)[A-Z0-9]{16}(?![A-Za-z0-9])")),
    (
        "github_token",
        re.compile(r"gh[pousr]_(?<![A-Za-z0-9_]....)[A-Za-z0-9]{30,255}(?![A-Za-z0-9_])"),
    ),
    (
        "github_token",
        re.compile(r"github_pat_(?<![A-Za-z0-9_].{11})[A-Za-z0-9_]{22,255}(?![A-Za-z0-9_])"),
    ),
    ("gitlab_token", re.compile(r"gl(?:pat|dt|ptt|rt)-(?<![A-Za-z0-9_].{6})[A-Za-z0-9_-]{20,}")),
    ("slack_token", re.compile(r"xox[abprs]-(?<![A-Za-z0-9_].{5})[A-Za-z0-9-]{10,}")),
    (
        "slack_token",
        re.compile(
            r"hooks\.slack\.com/services/T[A-Za-z0-9]{6,}/B[A-Za-z0-9]{6,}/[A-Za-z0-9]{16,}"
        ),
    ),
    ("stripe_key", re.compile(r"[sr]k_(?:live|test)_(?<![A-Za-z0-9_].{8})[A-Za-z0-9]{16,}")),
    ("anthropic_key", re.compile(r"sk-ant-(?<![A-Za-z0-9_].{7})[A-Za-z0-9_-]{20,}")),
    # Requires a digit and a letter so prose like "sk-learn-is-a-great-library" survives.
    (
        "openai_key",
        re.compile(
            r"sk-(?<![A-Za-z0-9_]...)(?:proj-|svcacct-|admin-)?"
            r"(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}"
        ),
    ),
    ("huggingface_token", re.compile(r"hf_(?<![A-Za-z0-9_]...)[A-Za-z0-9]{30,}(?![A-Za-z0-9_])")),
    ("google_api_key", re.compile(r"AIza(?<![A-Za-z0-9_]....)[0-9A-Za-z_-]{35}")),
    ("google_api_key", re.compile(r"ya29\.(?<![A-Za-z0-9_].{5})[0-9A-Za-z_-]{20,}")),
    ("npm_token", re.compile(r"npm_(?<![A-Za-z0-9_]....)[A-Za-z0-9]{36}(?![A-Za-z0-9_])")),
    ("sendgrid_key", re.compile(r"SG\.(?<![A-Za-z0-9_]...)[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}")),
)

# Key names whose value is a secret. The keyword must end the key (optionally
# followed by _key/_value) so "max_tokens=512" or "token_limit: 10" are not secrets.
_KEYWORDS = (
    r"password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
)
# An unquoted value followed by "[" or "(" is code (os.environ[...], get()), not a secret.
_BARE = r"[^\s\"'`,;()\[\]]++(?![\[(])"
_QUOTED = r"\"[^\"\n]*\"|'[^'\n]*'"
# The same keywords as (literal, rest) groups: a pattern that starts with a literal is
# found by a fast substring scan, where a leading alternation is tried at every position
# (3-6x slower on text full of "token" and "secret", measured). Same order as _KEYWORDS.
_KEY_GROUPS = (
    ("pass", r"(?:word|wd|phrase)"),
    ("secret", ""),
    ("token", ""),
    ("api", r"[_-]?key"),
    ("access", r"[_-]?key"),
    ("private", r"[_-]?key"),
)
# A key may carry a qualifier after its keyword: SECRET_KEY_BASE, DB_PASSWORD_PROD,
# GITHUB_TOKEN_RO, API_KEY_2 (a closed list: "token_limit", "password_field" stay keys of no
# secret).
_QUALIFIERS = (
    r"base|prod|production|dev|development|stage|staging|test|qa|uat|local|live|ro|rw|"
    r"readonly|readwrite|read|write|admin|root|main|primary|secondary|old|new|prev|previous|"
    r"current|next|[0-9]{1,3}"
)
_TAIL_END = rf"(?:[_-]?(?:key|value))?(?:[_-](?:{_QUALIFIERS}))*(?![a-z0-9_])"
# The key's tail; whatever precedes the keyword (db_, aws_, client.) is kept as is.
_KEY_TAIL = rf"(?:{_KEYWORDS}){_TAIL_END}"
# Prose: "the secret key is X", "api key: X", "password was X". The value must look like a
# secret (see _secret_shaped) so "the password is required" stays.
_PROSE_GROUPS = (
    ("pass", r"(?:word|wd|phrase)"),
    ("secret", r"(?:[ \t]+access)?(?:[ \t]+key)?"),
    ("api", r"[ \t]+key"),
    ("access", r"[ \t]+key(?:[ \t]+id)?"),
    ("private", r"[ \t]+key"),
    ("token", ""),
    ("credential", "s?"),
)


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _secret_shaped(value: str) -> bool:
    """A word of prose is not a secret: ask for a letter and a digit, 8+ characters."""
    v = value.strip("\"'`.,;")
    return len(v) >= 8 and any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


def _wordy(value: str) -> bool:
    """Made of words: "Qwen/Qwen3-30B-A3B-Instruct-2507" is a name, not a secret."""
    return sum(len(w) >= 4 and w.isalpha() for w in re.split(r"[-/_.+]", value)) >= 2


def _high_entropy(value: str) -> bool:
    """Random-looking: 3+ each of upper, lower and digits (a camelCase name has few digits)
    and an entropy near the most its length allows. 0.8 x log2(length) keeps 99.5% of
    random base62 strings of 24-64 characters and rejects names like
    "all-MiniLM-L6-v2-quantized-int8" (measured)."""
    return (
        sum(c.isupper() for c in value) >= 3
        and sum(c.islower() for c in value) >= 3
        and sum(c.isdigit() for c in value) >= 3
        and _entropy(value) >= 0.8 * math.log2(len(value))
        and not _wordy(value)
    )


def _mixed_case(value: str) -> bool:
    """Upper, lower and a digit: an AWS secret after a bare "secret", not a 40-letter word."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
    )


ValuePattern = tuple[str, re.Pattern[str], Callable[[str], bool] | None]

_VALUE_SOURCES: tuple[tuple[str, str, Callable[[str], bool] | None], ...] = (
    # scheme://user:password@host -- the user and host stay readable. Starts at the "://"
    # literal (a leading scheme class would be tried at every position: 10x slower).
    (
        "url_password",
        r"://(?<=[a-z0-9]://)[^\s:/@\"'<>]{0,128}:(?P<value>[^\s@/\"'<>]{1,256})@[^\s@]",
        None,
    ),
    # Azure / service-bus connection strings.
    *(
        ("connection_string_key", rf"{lit}[ \t]*=[ \t]*(?P<value>[a-z0-9+/=]{{16,}})", None)
        for lit in ("accountkey", "sharedaccesskey", "sharedsecretvalue")
    ),
    ("bearer_token", r"bearer(?<![a-z0-9_]bearer)[ \t]+(?P<value>[a-z0-9._~+/-]{16,}=*)", None),
    (
        "bearer_token",
        r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+(?P<value>[a-z0-9+/]{12,}=*)",
        None,
    ),
    (
        "aws_secret_key",
        (
            r"aws[ \t_-]?secret[ \t_-]?(?:access[ \t_-]?)?key(?:[ \t_-]?id)?[\"']?[ \t]*"
            r"(?:[:=]|\bis\b|\bwas\b)[ \t]*[:=]?[ \t]*[\"'`]?"
            r"(?P<value>[a-z0-9/+=]{40})(?![a-z0-9/+=])"
        ),
        None,
    ),
    # "aws secret <40 characters>", "secret Zr8v...": a key name, a space, the value (no
    # "=" or ":"); the value must look like one (upper, lower and digits).
    (
        "aws_secret_key",
        (
            r"secret(?<![a-z0-9]secret)(?:[ \t_-]?access)?(?:[ \t_-]?key)?[ \t]+[\"'`]?"
            r"(?P<value>[a-z0-9/+=]{40})(?![a-z0-9/+=])"
        ),
        _mixed_case,
    ),
    # Passwords on a command line: mysql -pPW, curl -u user:PW, docker login -p PW.
    (
        "cli_password",
        (
            r"mysql(?:dump|admin|import|sh|slap|check)?(?![a-z0-9_])[^\n|;&]{0,300}?"
            r"[ \t]-p(?P<value>[^\s\"'`;|&]{1,256})"
        ),
        None,
    ),
    (
        "cli_password",
        (
            r"curl(?![a-z0-9_])[^\n|;&]{0,300}?[ \t](?:-u|--user)[ \t=]*[\"']?"
            r"[^\s:\"']{0,128}:(?P<value>[^\s\"'`;|&]{1,256})"
        ),
        None,
    ),
    (
        "cli_password",
        (
            r"(?:docker|podman|helm|nerdctl)[ \t]+(?:registry[ \t]+)?login(?![a-z0-9_])"
            r"[^\n|;&]{0,300}?[ \t](?:-p|--password)(?:[ \t]+|=)[\"']?"
            r"(?P<value>[^\s\"'`;|&]{1,256})"
        ),
        None,
    ),
    # "password": "..." (JSON / dict literals)
    *(
        ("password_assignment", rf"{lit}{rest}{_TAIL_END}[\"']\s*:\s*(?P<value>{_QUOTED})", None)
        for lit, rest in _KEY_GROUPS
    ),
    # PASSWORD=..., export API_KEY=..., password = "..." (env, shell, ini, code)
    *(
        (
            "password_assignment",
            rf"{lit}{rest}{_TAIL_END}[\"']?[ \t]*=(?!=)[ \t]*(?P<value>{_QUOTED}|{_BARE})",
            None,
        )
        for lit, rest in _KEY_GROUPS
    ),
    # password: ... at the start of a line (YAML, headers, "Password: hunter2")
    (
        "password_assignment",
        (
            rf"(?m)^[ \t]*(?:-[ \t]*)?[a-z0-9_.-]*?{_KEY_TAIL}[ \t]*:[ \t]*"
            rf"(?P<value>{_QUOTED}|[^\s\"'#][^\n]*?)[ \t]*$"
        ),
        None,
    ),
    # Prose: "the db password is Tr0ub4dor&3", "secret key: x9..." anywhere in a line.
    *(
        (
            "password_assignment",
            (
                rf"{lit}(?<![a-z0-9_]{lit}){rest}[ \t]*(?:[:=]|\bis\b|\bwas\b)[ \t]*[\"'`]?"
                r"(?P<value>[^\s\"'`]{7,255}[^\s\"'`.,;:!?)])"
            ),
            _secret_shaped,
        )
        for lit, rest in _PROSE_GROUPS
    ),
    # Any key = a long random-looking value (API_CREDENTIAL_X = "Zr8vQ2mN..."); anchored
    # on the operator, not the key, for speed.
    (
        "high_entropy_secret",
        (r"[:=][ \t]{0,3}[\"']?(?P<value>[a-z0-9+/_=-]{24,512})(?![a-z0-9+/_=-])"),
        _high_entropy,
    ),
)
VALUE: tuple[ValuePattern, ...] = tuple(
    (kind, re.compile(src), check) for kind, src, check in _VALUE_SOURCES
)
# Fallback for the rare text whose length changes when lowered (e.g. "İ").
VALUE_ANYCASE: tuple[ValuePattern, ...] = tuple(
    (kind, re.compile(src, re.IGNORECASE), check) for kind, src, check in _VALUE_SOURCES
)

# Values that are references or placeholders, not secrets.
NOT_SECRET = re.compile(
    r"(?i)(?:|true|false|null|none|nil|\*+|x+|<[^>]*>|\$\{.*\}|\$\(.*\)|\$[A-Za-z_]\w*|\d{1,5}"
    r"|\{\{.*\}\}|\{[A-Za-z_]\w*\}|%\(.*\)s|%s|.*\(.*\).*|\[REDACTED:.*"
    # a placeholder in docs: "sk-...", "..."
    r"|[\w-]{0,16}(?:\.\.\.|\u2026)"
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
    # type annotations in code: "password: str", "token: SecretStr | None = None"
    r"|(?:str|bytes|int|bool|float|any|secretstr|optional\[.*)(?:\s*\|\s*none)?(?:\s*=.*)?)"
)
