"""A failed command's signature: its *shape* (what was run, without the arguments that change
from run to run, and never a secret: an option's glued value and long token-like words are
dropped) plus its *error class*, so the same failure again counts an occurrence and a
later success of the same shape can be matched to it.

``pytest tests/test_a.py -k x`` and ``pytest tests/test_b.py -k y`` have one shape
(``pytest -k``); ``cd app && npm run build 2>&1 | tail`` has the shape ``npm run build``.
"""

from __future__ import annotations

import re
import shlex

MAX_WORDS = 4  # program + subcommands kept in a shape
_WRAPPERS = frozenset({"sudo", "time", "nice", "env", "command", "exec", "nohup", "timeout"})
_SETUP = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "true"})
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_:+-]{0,39}$")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_NUMBER = re.compile(r"^\d+[smh]?$")
# A long word with digits is a value (a token, an id), not a subcommand: never in a shape,
# which the hook state keeps as it is.
_TOKENISH = re.compile(r"^(?=.{16})(?=.*\d)").match

# Error classes, most specific first; each yields a short stable name.
_PY_EXC = re.compile(r"\b((?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Z][A-Za-z0-9]*(?:Error|Exception|Exit))\b")
_CLASSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"command not found|not found: \S+|No such file or directory.*exec", re.I),
     "command not found"),
    (re.compile(r"\berror\[(E\d{4})\]"), r"rustc \1"),
    (re.compile(r"\berror (TS\d{3,5})\b"), r"tsc \1"),
    (re.compile(r"npm ERR! code (\S+)"), r"npm \1"),
    (re.compile(r"\bSyntaxError\b"), "SyntaxError"),
    (re.compile(r"Permission denied", re.I), "permission denied"),
    (re.compile(r"No such file or directory", re.I), "no such file"),
    (re.compile(r"Connection refused", re.I), "connection refused"),
    (re.compile(r"\btimed? ?out\b", re.I), "timeout"),
    (re.compile(r"\b\d+ failed\b|\bFAILED\b"), "tests failed"),
    (re.compile(r"\berror: ", re.I), "error"),
)
_EXIT = re.compile(r"^Exit code (\d+)", re.M)


def _segments(command: str) -> list[str]:
    """The command's steps: split on ``&&``, ``||``, ``;`` and newlines; each step's pipe
    head (``pytest | tail`` is ``pytest``)."""
    steps = re.split(r"&&|\|\||;|\n", command)
    return [s.split("|", 1)[0].strip() for s in steps if s.strip()]


def _tokens(step: str) -> list[str]:
    try:
        return shlex.split(step, comments=True)
    except ValueError:  # an unbalanced quote: whitespace split is good enough for a shape
        return step.split()


def shape(command: str) -> str:
    """Program, subcommand words and option names of the command's main step (the last one
    that is not setup such as ``cd`` or ``export``)."""
    main: list[str] = []
    for step in _segments(command or ""):
        toks = [t for t in _tokens(step) if not _ENV_ASSIGN.match(t)]
        while toks and (toks[0] in _WRAPPERS or _NUMBER.match(toks[0])):
            toks = toks[1:]
        if toks and toks[0] not in _SETUP:
            main = toks
    if not main:
        return ""
    words = [main[0].rsplit("/", 1)[-1]]
    flags: list[str] = []
    prev = ""
    for tok in main[1:]:
        runs_module = prev == "-m" and words[0].startswith("python") and _WORD.match(tok)
        prev = tok
        if runs_module:  # `python -m pytest`: the module is what runs
            words.append(tok)
        elif tok.startswith("-"):
            name = tok.split("=", 1)[0]
            if not name.startswith("--") and len(name) > 3:
                name = name[:2]  # `-pS3cret`, `-uadmin:pw`: a short option with its value glued
            if len(name) <= 40 and name not in flags:
                flags.append(name)
        elif len(words) < MAX_WORDS and not flags and _WORD.match(tok) and not _TOKENISH(tok):
            words.append(tok)  # subcommands come before options: `git commit -m msg`
    return " ".join(words + sorted(flags))


def error_class(output: str, exit_code: int | None = None) -> str:
    """A short stable name for what went wrong, read from the error output."""
    text = output or ""
    found = _PY_EXC.findall(text)
    if found:  # the last exception in a traceback is the one that was raised
        return found[-1].rsplit(".", 1)[-1]
    for pattern, name in _CLASSES:
        m = pattern.search(text)
        if m:
            return m.expand(name) if "\\" in name else name
    code = exit_code if exit_code is not None else exit_code_of(text)
    return f"exit {code}" if code is not None else "failed"


def exit_code_of(text: str) -> int | None:
    """Claude Code reports a failed command as ``Exit code N`` followed by its output."""
    m = _EXIT.search(text or "")
    return int(m.group(1)) if m else None


def signature(command: str, output: str, exit_code: int | None = None) -> tuple[str, str, str]:
    """``(shape, error class, signature)``; the signature is what record_failure keys on."""
    sh = shape(command) or "command"
    err = error_class(output, exit_code)
    return sh, err, f"cmd:{sh}:{err}"[:256]


def looks_failed(output: str) -> bool:
    """Error output without an exit code (a tool that exits 0 on failure)."""
    return bool(re.search(r"^Traceback \(most recent call last\)|command not found", output or "",
                          re.M))
