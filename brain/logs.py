"""Logging for entry points: stderr plus a rotating file in the data dir. Never stdout.

The log file is private (0600, in a 0700 data dir): messages name notes, files and paths.
Every line, traceback included, goes through redaction on its way out: an exception message
that quoted a secret (an embedder error echoing its input, a parse error) is not logged."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from brain.private import private_file, secure_home
from brain.redact import redact

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    """A formatter whose output (message and traceback) has secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record)).text


def setup_logging(home: Path, level: str = "INFO") -> None:
    root = logging.getLogger()
    root.setLevel(level)
    for h in list(root.handlers):
        root.removeHandler(h)
    err = logging.StreamHandler(sys.stderr)
    err.setFormatter(RedactingFormatter(FORMAT))
    root.addHandler(err)
    try:
        secure_home(home)
        fh = logging.handlers.RotatingFileHandler(
            home / "brain.log", maxBytes=5_000_000, backupCount=3, encoding="utf-8"
        )
        private_file(home / "brain.log")
        fh.setFormatter(RedactingFormatter(FORMAT))
        root.addHandler(fh)
    except OSError as exc:
        root.warning("cannot write the log file in %s: %s", home, exc)
    for noisy in ("httpx", "httpcore", "sentence_transformers", "huggingface_hub", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
