"""Logging for entry points: stderr plus a rotating file in the data dir. Never stdout.

The log file is private (0600, in a 0700 data dir): messages name notes, files and paths.
Every line, traceback included, goes through redaction on its way out: an exception message
that quoted a secret (an embedder error echoing its input, a parse error) is not logged."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

from brain.private import private_file, secure_home
from brain.trust.redact import redact

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    """A formatter whose output (message and traceback) has secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record)).text


def quiet_progress_bars() -> None:
    """No progress bars from the model libraries in a brain process (the server, the CLI).

    A stdio server's stderr belongs to its client, and is gone when the client is. A bar
    (transformers' "Loading weights") that failed writing there left tqdm's process-wide write
    lock taken: the next model load waited on it forever, and so did the interpreter's exit
    (tqdm.__del__), so a server whose client had quit never exited (seen with Claude Code, a
    fresh HOME exporting the ONNX model). transformers and huggingface_hub then use no tqdm
    at all. The environment variable covers the libraries imported after this call."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    hub = sys.modules.get("huggingface_hub.utils")
    if hub is not None:
        hub.disable_progress_bars()
    tf = sys.modules.get("transformers.utils.logging")
    if tf is not None:
        tf.disable_progress_bar()


def setup_logging(home: Path, level: str = "INFO", stderr_level: str | None = None) -> None:
    """Log records at ``level`` to ``<home>/brain.log`` and to stderr; ``stderr_level``, when
    higher, only to the file below it (the command line: its stderr is the user's terminal,
    where a start's INFO lines are noise; the server's stderr is its client's log)."""
    quiet_progress_bars()
    root = logging.getLogger()
    root.setLevel(level)
    for h in list(root.handlers):
        root.removeHandler(h)
    err = logging.StreamHandler(sys.stderr)
    if stderr_level is not None:
        err.setLevel(max(logging.getLevelName(level), logging.getLevelName(stderr_level)))
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
        root.warning("cannot write brain.log in %s (%s); logging to stderr only", home,
                     exc.strerror or exc)
    for noisy in ("httpx", "httpcore", "sentence_transformers", "huggingface_hub", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
