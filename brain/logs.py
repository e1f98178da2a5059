"""Logging for entry points: stderr plus a rotating file in the data dir. Never stdout."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(home: Path, level: str = "INFO") -> None:
    root = logging.getLogger()
    root.setLevel(level)
    for h in list(root.handlers):
        root.removeHandler(h)
    err = logging.StreamHandler(sys.stderr)
    err.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(err)
    try:
        home.mkdir(parents=True, exist_ok=True)
        fh = logging.handlers.RotatingFileHandler(
            home / "brain.log", maxBytes=5_000_000, backupCount=3, encoding="utf-8"
        )
        fh.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(fh)
    except OSError as exc:
        root.warning("cannot write the log file in %s: %s", home, exc)
    for noisy in ("httpx", "httpcore", "sentence_transformers", "huggingface_hub", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
