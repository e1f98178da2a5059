"""Secret redaction for text that is about to be stored or indexed.

``redact(text)`` replaces every secret-shaped span with ``[REDACTED:<kind>]`` and
reports which kinds it found. Patterns run in a fixed order, most specific first
(a PEM block before anything inside it, a GitHub token before the generic
``TOKEN=...`` assignment), and every later pattern skips text that is already a
marker, so a secret is counted once.

Assignments (``DB_PASSWORD='x'``, ``"api_key": "x"``, ``password: x``) keep their
key and quotes and lose only the value, so a note still reads
``DB_PASSWORD='[REDACTED:password_assignment]'``; a URL keeps its user and host
(``postgres://admin:[REDACTED:url_password]@db``). Prose such as "the password field is
required" or "token limit" is left alone: a prose value must look like a secret.

The patterns themselves live in ``brain/trust/secret_patterns.py``, the one list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from brain.trust.secret_patterns import KINDS, NOT_SECRET, VALUE, VALUE_ANYCASE, WHOLE

__all__ = [
    "KINDS",
    "SEAM",
    "Redaction",
    "multiline_secret_lines",
    "redact",
    "redact_head",
    "redact_mapped",
    "redact_tags",
    "redact_tail",
    "redact_tree",
]

_MARKER_PREFIX = "[REDACTED:"


@dataclass(frozen=True, slots=True)
class Redaction:
    text: str
    kinds: tuple[str, ...]
    count: int


# An edit of one redaction step: (start, end, length of what replaced text[start:end]).
Edit = tuple[int, int, int]
# The longest secret a pattern still needs whole to recognise (a token, a URL's user and
# password, an assignment's key and value): a window cut this far from its edge keeps every
# secret it shows whole.
SEAM = 1024
_PEM_END = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
# A bare value that is code, not a secret: a dotted name, a call, an index.
_CODE = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:\(.*|\[.*)?")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
# Words that make an identifier the name of a secret, not one: api_key, accessToken, new_pw.
_SECRET_NAMES = frozenset(
    [
        "token",
        "tokens",
        "password",
        "passwords",
        "passwd",
        "pwd",
        "pw",
        "pass",
        "passphrase",
        "secret",
        "secrets",
        "key",
        "keys",
        "apikey",
        "auth",
        "cred",
        "creds",
        "credential",
        "credentials",
    ]
)


def _marker(kind: str) -> str:
    return f"{_MARKER_PREFIX}{kind}]"


def _replacement(kind: str, secret: str, keep_lines: bool) -> str:
    # A multi-line secret (a PEM block) keeps its line breaks when asked, so the line
    # numbers of an indexed file still point at the right lines.
    return _marker(kind) + "\n" * secret.count("\n") if keep_lines else _marker(kind)


def _apply(text: str, spans: list[tuple[int, int, str]], edits: list[list[Edit]]) -> str:
    """``text`` with each (start, end, replacement) of ``spans`` (sorted, disjoint) applied;
    the step's edits are appended to ``edits`` (for mapping offsets, see redact_mapped)."""
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end, repl in spans:
        out += [text[pos:start], repl]
        pos = end
    out.append(text[pos:])
    edits.append([(start, end, len(repl)) for start, end, repl in spans])
    return "".join(out)


def _headless_pem(text: str) -> list[tuple[int, int]]:
    """Key bodies whose BEGIN line was cut off (a tail kept, a page boundary): the run of
    base64 words that ends at an ``-----END ... PRIVATE KEY-----`` line with no BEGIN.

    Walks back from each END over whitespace-separated words of the base64 alphabet (the
    one next to END may be short, the last line of a body; the others 16+ characters, as
    body lines are), so a public certificate or prose before it is left alone. Linear: each
    walk stops at the previous END, whose dashes are not base64."""
    found: list[tuple[int, int]] = []
    for m in _PEM_END.finditer(text):
        start = pos = m.start()
        first = True
        while pos > 0:
            end = pos
            while end > 0 and text[end - 1].isspace():
                end -= 1
            begin = end
            while begin > 0 and text[begin - 1] in _B64:
                begin -= 1
            word = end - begin
            if word == 0 or (begin > 0 and not text[begin - 1].isspace()):
                break
            if word < 16 and not (first and "\n" in text[end:pos]):
                break
            start = pos = begin
            first = False
        if start < m.start():
            found.append((start, m.end()))
    return found


def _code_reference(text: str, key_at: int, start: int, end: int, value: str) -> bool:
    """A bare (unquoted) value that names something in code: ``self.token = token``,
    ``Client(api_key=api_key)``, ``token = secrets.token_urlsafe(32)``, ``info, token =
    owner``, ``KEY = API_KEY``. A quoted value is a literal: never code."""
    if start > 0 and text[start - 1] in "\"'`":
        return False
    if value.startswith("#") and (start == 0 or text[start - 1].isspace()):
        return True  # KEY=   # a comment, the value left empty
    if not _CODE.fullmatch(value):
        return False
    if not _IDENT.fullmatch(value):
        return True  # a dotted name, a call, an index
    if {w.lower() for w in _WORDS.findall(value)} & _SECRET_NAMES:
        return True  # api_key, accessToken, new_password: the name of a secret
    digits = any(c.isdigit() for c in value)
    if value.isupper() and not digits:
        return True  # a constant: KEY, API_KEY
    i = key_at
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
        i -= 1
    before = text[max(0, i - 300) : i].rstrip(" \t")
    if before.endswith("."):
        return True  # an attribute is assigned: self.token = token
    if digits:
        return False
    operator = text[key_at:start]
    spaced = " =" in operator or "= " in operator or " :" in operator
    after = text[end : end + 1]
    # x = y with spaces (code, not an .env line), f(token=tok), a, token = b
    return spaced or after in (",", ")") or before.endswith((",", "("))


def _value_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of secret values in assignments, sorted, non-overlapping."""
    lowered = text.lower()
    same_length = len(lowered) == len(text)
    haystack, patterns = (lowered, VALUE) if same_length else (text, VALUE_ANYCASE)
    found: list[tuple[int, int, int, str]] = []
    for priority, (kind, pattern, check) in enumerate(patterns):
        for m in pattern.finditer(haystack):
            start, end = m.span("value")
            value = text[start:end]
            if value[:1] in "\"'" and len(value) >= 2:
                start, end = start + 1, end - 1
            value = text[start:end].strip()
            if NOT_SECRET.fullmatch(value) or (check is not None and not check(value)):
                continue
            if kind in _CODE_KINDS and _code_reference(text, m.start(), start, end, value):
                continue
            found.append((start, priority, end, kind))
    found.sort()
    spans: list[tuple[int, int, str]] = []
    for start, _, end, kind in found:
        if not spans or start >= spans[-1][1]:
            spans.append((start, end, kind))
    return spans


_CODE_KINDS = frozenset({"password_assignment", "high_entropy_secret"})


def _redact(text: str, keep_lines: bool, edits: list[list[Edit]]) -> Redaction:
    hits: list[str] = []
    for kind, pattern in WHOLE:
        spans = [(m.start(), m.end(), _replacement(kind, m.group(), keep_lines))
                 for m in pattern.finditer(text)]  # fmt: skip
        hits += [kind] * len(spans)
        text = _apply(text, spans, edits)
    if "-----END" in text:
        spans = [(a, b, _replacement("private_key", text[a:b], keep_lines))
                 for a, b in _headless_pem(text)]  # fmt: skip
        hits += ["private_key"] * len(spans)
        text = _apply(text, spans, edits)
    values = _value_spans(text)
    hits += [kind for _, _, kind in values]
    text = _apply(text, [(a, b, _marker(kind)) for a, b, kind in values], edits)
    return Redaction(text=text, kinds=tuple(sorted(set(hits))), count=len(hits))


def redact(text: str, *, keep_lines: bool = False) -> Redaction:
    """Replace secret-shaped spans in ``text`` with ``[REDACTED:<kind>]`` markers.

    ``keep_lines``: a redacted multi-line secret leaves its line breaks behind (for files
    whose results cite line numbers)."""
    return _redact(text, keep_lines, [])


def _map(offsets: list[int], steps: list[list[Edit]]) -> list[int]:
    """Each offset of the original text moved through every step's edits: an offset inside
    a redacted span lands at the end of its marker. Linear in offsets + edits."""
    order = sorted(range(len(offsets)), key=offsets.__getitem__)
    now = list(offsets)
    for edits in steps:
        shift = j = 0
        for i in order:
            o = now[i]
            while j < len(edits) and edits[j][1] <= o:
                start, end, length = edits[j]
                shift += length - (end - start)
                j += 1
            if j < len(edits) and edits[j][0] < o:  # inside a redacted span
                now[i] = edits[j][0] + edits[j][2] + shift
            else:
                now[i] = o + shift
    return now


def redact_mapped(text: str, offsets: list[int]) -> tuple[Redaction, list[int]]:
    """``text`` redacted whole (a secret that crosses a page boundary is still one secret),
    and each of ``offsets`` (positions in ``text``, e.g. page starts and ends) moved to the
    same place in the redacted text."""
    steps: list[list[Edit]] = []
    red = _redact(text, False, steps)
    return red, _map(offsets, steps)


def _trim_marker(text: str, *, head: bool) -> str:
    """A cut through a marker leaves half of it: drop the half."""
    if head:
        cut = text.rfind(_MARKER_PREFIX[:1])
        return text[:cut] if cut >= 0 and "]" not in text[cut:] else text
    close = text.find("]")
    return text[close + 1 :] if close >= 0 and "[" not in text[:close] else text


def redact_head(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text`` redacted, redacting before the cut: the
    window redacted reaches SEAM characters past what is kept, so a secret across the cut is
    whole when its pattern runs (an unterminated key block goes to the end)."""
    if len(text) <= limit:
        shown = redact(text).text  # a marker may be longer than the secret it replaced
        return shown if len(shown) <= limit else _trim_marker(shown[:limit], head=True)
    window = text[: limit + SEAM]
    red, (safe,) = redact_mapped(window, [limit if len(window) < len(text) else len(window)])
    return _trim_marker(red.text[: min(limit, safe)], head=True)


def redact_tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text`` redacted, redacting before the cut: SEAM
    characters more are redacted and dropped (a token across the window's edge), and a key
    body whose BEGIN line fell outside is caught by its END line."""
    if len(text) <= limit:
        shown = redact(text).text
        return shown if len(shown) <= limit else _trim_marker(shown[-limit:], head=False)
    window = text[-(limit + SEAM) :]
    red, (safe,) = redact_mapped(window, [SEAM])
    out = red.text
    return _trim_marker(out[max(safe, len(out) - limit) :], head=False)


def redact_tags(tags: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """Each tag redacted like content (a tag that is not secret-shaped is returned as is, so
    tag filters keep working); the kinds found."""
    out: list[str] = []
    kinds: set[str] = set()
    for tag in tags:
        red = redact(tag)
        out.append(red.text)
        kinds.update(red.kinds)
    return out, tuple(sorted(kinds))


def redact_tree(value: Any, kinds: set[str] | None = None) -> Any:
    """Every string inside ``value`` (dicts, lists, nested) redacted; the kinds found are
    added to ``kinds``. For whole payloads that arrive from outside (an import)."""
    found = kinds if kinds is not None else set()
    if isinstance(value, str):
        red = redact(value)
        found.update(red.kinds)
        return red.text
    if isinstance(value, dict):
        return {k: redact_tree(v, found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v, found) for v in value]
    return value


def multiline_secret_lines(text: str) -> set[int]:
    """1-based numbers of the lines a multi-line secret (a PEM or PuTTY private key, a key
    body whose BEGIN line is missing) covers.

    A grep hit is one line: a line in the middle of a key block has no marker of its own,
    so the caller asks which lines of the file lie inside one."""
    lines: set[int] = set()
    spans = [m.span() for kind, p in WHOLE if kind in ("private_key", "putty_key")
             for m in p.finditer(text)]  # fmt: skip
    if "-----END" in text:
        spans += _headless_pem(text)
    for start, end in spans:
        first = text.count("\n", 0, start) + 1
        lines.update(range(first, first + text.count("\n", start, end) + 1))
    return lines
