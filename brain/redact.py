"""Secret redaction for text that is about to be stored or indexed.

``redact(text)`` replaces every secret-shaped span with ``[REDACTED:<kind>]`` and
reports which kinds it found. Patterns run in a fixed order, most specific first
(a PEM block before anything inside it, a GitHub token before the generic
``TOKEN=...`` assignment), and every later pattern skips text that is already a
marker, so a secret is counted once.

Assignments (``DB_PASSWORD='x'``, ``"api_key": "x"``, ``password: x``) keep their
key and quotes and lose only the value, so a note still reads
``DB_PASSWORD='[REDACTED:password_assignment]'``. Prose such as "the password field
is required" or "token limit" has no assignment operator and is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KINDS", "Redaction", "redact"]

KINDS = (
    "private_key",
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
    "jwt",
    "password_assignment",
)

_MARKER_PREFIX = "[REDACTED:"


@dataclass(frozen=True, slots=True)
class Redaction:
    text: str
    kinds: tuple[str, ...]
    count: int


def _marker(kind: str) -> str:
    return f"{_MARKER_PREFIX}{kind}]"


# Whole-match patterns: the entire match is the secret. Each starts with a literal so the
# regex engine can skip ahead with a fast substring scan; the fixed-width lookbehind after
# the literal plays the role of a leading \b without defeating that scan.
# An unterminated PEM block is redacted to the end of the text: better too much than a leak.
_WHOLE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"[\s\S]*?(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)"
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
    ("gitlab_token", re.compile(r"glpat-(?<![A-Za-z0-9_].{6})[A-Za-z0-9_-]{20,}")),
    ("slack_token", re.compile(r"xox[abprs]-(?<![A-Za-z0-9_].{5})[A-Za-z0-9-]{10,}")),
    ("stripe_key", re.compile(r"sk_live_(?<![A-Za-z0-9_].{8})[A-Za-z0-9]{16,}")),
    ("stripe_key", re.compile(r"rk_live_(?<![A-Za-z0-9_].{8})[A-Za-z0-9]{16,}")),
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
)

# Key names whose value is a secret. The keyword must end the key (optionally
# followed by _key/_value) so "max_tokens=512" or "token_limit: 10" are not secrets.
# These patterns are written in lower case and run case-sensitively over the lowered
# text (a case-insensitive alternation is ~8x slower); the spans then index the original.
_KEYWORDS = (
    r"password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
)
# The key's tail; whatever precedes the keyword (db_, aws_, client.) is kept as is.
_KEY_TAIL = rf"(?:{_KEYWORDS})(?:[_-]?(?:key|value))?(?![a-z0-9_])"
# An unquoted value followed by "[" or "(" is code (os.environ[...], get()), not a secret.
_BARE = r"[^\s\"',;()\[\]]++(?![\[(])"
_QUOTED = r"\"[^\"\n]*\"|'[^'\n]*'"

# Value-only patterns: group "value" is replaced, the key stays readable. Earlier wins.
_VALUE_SOURCES: tuple[tuple[str, str], ...] = (
    (
        "aws_secret_key",
        (
            r"aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?"
            r"(?P<value>[a-z0-9/+=]{40})(?![a-z0-9/+=])"
        ),
    ),
    # "password": "..." (JSON / dict literals)
    ("password_assignment", rf"{_KEY_TAIL}[\"']\s*:\s*(?P<value>{_QUOTED})"),
    # PASSWORD=..., export API_KEY=..., password = "..." (env, shell, ini, code)
    (
        "password_assignment",
        rf"{_KEY_TAIL}[\"']?[ \t]*=(?!=)[ \t]*(?P<value>{_QUOTED}|{_BARE})",
    ),
    # password: ... at the start of a line (YAML, headers, "Password: hunter2")
    (
        "password_assignment",
        (
            rf"(?m)^[ \t]*(?:-[ \t]*)?[a-z0-9_.-]*?{_KEY_TAIL}[ \t]*:[ \t]*"
            rf"(?P<value>{_QUOTED}|[^\s\"'#][^\n]*?)[ \t]*$"
        ),
    ),
)
_VALUE = tuple((kind, re.compile(src)) for kind, src in _VALUE_SOURCES)
# Fallback for the rare text whose length changes when lowered (e.g. "İ").
_VALUE_ANYCASE = tuple((kind, re.compile(src, re.IGNORECASE)) for kind, src in _VALUE_SOURCES)

# Values that are references or placeholders, not secrets.
_NOT_SECRET = re.compile(
    r"(?i)(?:|true|false|null|none|nil|\*+|x+|<[^>]*>|\$\{.*\}|\$\(.*\)|\$[A-Za-z_]\w*|\d{1,5}"
    r"|\{\{.*\}\}|%\(.*\)s|.*\(.*\).*|\[REDACTED:.*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)"
)


def _whole_sub(kind: str, hits: list[str]) -> Callable[[re.Match[str]], str]:
    marker = _marker(kind)

    def sub(m: re.Match[str]) -> str:
        hits.append(kind)
        return marker

    return sub


def _value_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of secret values in assignments, sorted, non-overlapping."""
    lowered = text.lower()
    same_length = len(lowered) == len(text)
    haystack, patterns = (lowered, _VALUE) if same_length else (text, _VALUE_ANYCASE)
    found: list[tuple[int, int, int, str]] = []
    for priority, (kind, pattern) in enumerate(patterns):
        for m in pattern.finditer(haystack):
            start, end = m.span("value")
            value = text[start:end]
            if value[:1] in "\"'" and len(value) >= 2:
                start, end = start + 1, end - 1
            if not _NOT_SECRET.fullmatch(text[start:end].strip()):
                found.append((start, priority, end, kind))
    found.sort()
    spans: list[tuple[int, int, str]] = []
    for start, _, end, kind in found:
        if not spans or start >= spans[-1][1]:
            spans.append((start, end, kind))
    return spans


def _redact_assignments(text: str, hits: list[str]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, kind in _value_spans(text):
        out.append(text[pos:start])
        out.append(_marker(kind))
        hits.append(kind)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact(text: str) -> Redaction:
    """Replace secret-shaped spans in ``text`` with ``[REDACTED:<kind>]`` markers."""
    hits: list[str] = []
    for kind, pattern in _WHOLE:
        text = pattern.sub(_whole_sub(kind, hits), text)
    text = _redact_assignments(text, hits)
    return Redaction(text=text, kinds=tuple(sorted(set(hits))), count=len(hits))
