"""Redaction false positives on this repository's own tree (issue 52, item 6).

Every tracked text file is redacted as a source sync would (``keep_lines=True``); every
``[REDACTED:`` marker it leaves is a false positive unless the line holds a real secret, and
this repository holds none outside its secret corpora (the tests and fixtures that exist to
be redacted), which are counted apart. The plain identifier assignments among the rest
(``self.token = token``, ``api_key=api_key``) must be 0.

    .venv/bin/python -m bench.redaction_fp            # counts, one line per marker
    .venv/bin/python -m bench.redaction_fp --summary  # counts only

The secret corpus (tests/security/secret_corpus.py) is redacted beside it: every secret it
holds must be caught, or the figure means nothing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from brain.trust.redact import redact

ROOT = Path(__file__).resolve().parents[1]
# Files whose purpose is to hold secret-shaped text (the corpora, redaction's own tests and
# pattern list): their markers are meant, counted apart.
CORPUS_FILES = re.compile(
    r"^(?:tests/security/|tests/trust/test_redact|tests/trust/test_redaction|"
    r"tests/hooks/test_hooks\.py|tests/fixtures/hooks/|brain/trust/secret_patterns\.py|"
    r"brain/trust/redact\.py|tests/sources/test_source_filters\.py|tests/files/test_files|"
    r"tests/webui/test_webui_app\.py)"
)
_MARK = re.compile(r"\[REDACTED:([a-z_]+)\]")
# What a marker replaced, when it is a name in code (identifier, attribute, call, None, True,
# a number) and not a quoted literal: never a secret.
ASSIGNMENT_KINDS = frozenset({"password_assignment", "high_entropy_secret"})
_PLAIN = re.compile(r"(?:[A-Za-z_][\w.]*(?:\(.*)?|None|True|False|\d+)")


def tracked_files(root: Path = ROOT) -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    return [root / line for line in out.splitlines() if line]


def _value(old: str, new: str) -> str:
    """The text one marker replaced in ``old`` (empty when the line holds more than one)."""
    ms = list(_MARK.finditer(new))
    if len(ms) != 1:
        return ""
    m = ms[0]
    return old[m.start() : m.end() + len(old) - len(new)]


def plain_reference(old: str, new: str) -> bool:
    """The marker replaced a name in code, unquoted (``self.token = [REDACTED`` for
    ``token``)."""
    value = _value(old, new)
    at = old.find(value) if value else -1
    # a quoted literal, or inside a string (an .env line written by a test): text, not code
    quoted = at > 0 and (old[at - 1] in "\"'`" or any(old[:at].count(q) % 2 for q in "\"'"))
    return bool(value) and not quoted and bool(_PLAIN.fullmatch(value))


def markers(root: Path = ROOT) -> list[tuple[str, int, str, str, str]]:
    """(path, line number, kind, the original line, the redacted line) of every marker in
    the tracked tree that the file did not already hold."""
    found: list[tuple[str, int, str, str, str]] = []
    for path in tracked_files(root):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue  # binary
        text = data.decode("utf-8", "replace")
        red = redact(text, keep_lines=True).text
        if "[REDACTED:" not in red:
            continue
        old, new = text.splitlines(), red.splitlines()
        rel = str(path.relative_to(root))
        for i, line in enumerate(new):
            before = old[i] if i < len(old) else ""
            kinds = [m.group(1) for m in _MARK.finditer(line)]
            for kind in kinds[len(_MARK.findall(before)) :]:  # markers the file had are text
                found.append((rel, i + 1, kind, before, line))
    return found


def summarize(found: list[tuple[str, int, str, str, str]]) -> dict[str, int]:
    product = [f for f in found if not CORPUS_FILES.match(f[0])]
    plain = [f for f in found if f[2] in ASSIGNMENT_KINDS and plain_reference(f[3], f[4])]
    return {
        "markers": len(found),
        "in_corpus_files": len(found) - len(product),
        "elsewhere": len(product),
        "plain_identifier_assignments": len(plain),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--summary", action="store_true", help="counts only")
    args = ap.parse_args(argv)
    found = markers()
    if not args.summary:
        for rel, line, kind, text, red in found:
            if not CORPUS_FILES.match(rel):
                plain = " PLAIN" if kind in ASSIGNMENT_KINDS and plain_reference(text, red) else ""
                print(f"{rel}:{line}: {kind}{plain}: {text.strip()[:160]}")
    counts = summarize(found)
    by_kind = Counter(f[2] for f in found if not CORPUS_FILES.match(f[0]))
    print(" ".join(f"{k}={v}" for k, v in counts.items()), dict(by_kind.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
