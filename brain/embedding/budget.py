"""The daily token budget of a paid embedding endpoint (seed 000: a daily cap pauses sync).

Tokens are counted per UTC day and persisted (numbers only) so a restart keeps the count.
Once the cap is reached, document embedding refuses with ``EmbeddingTokenCapReached`` until the
next UTC day: a source sync fails with that resumable error and keeps what it indexed, and the
next run after midnight converges. Queries are counted but never refused: a query is a few
tokens, and refusing it would take semantic search down for the rest of the day.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from brain.clock import Clock
from brain.errors import EmbeddingSpendCapReached, EmbeddingTokenCapReached

log = logging.getLogger(__name__)


class TokenBudget:
    """``cap``: tokens per UTC day (0: none). ``usd_cap`` (0: none) with ``price_per_mtok``
    (USD per million tokens; None: unpriced, counts nothing): priced spend per UTC day. The
    dollar cap stops every embedding once reached, queries too (seed 000: searches then answer
    from BM25, brain/embedding/credential.py)."""

    def __init__(self, cap: int, path: Path | None, clock: Clock | None = None, *,
                 usd_cap: float = 0.0, price_per_mtok: float | None = None) -> None:
        self.cap = max(0, cap)
        self.usd_cap = max(0.0, usd_cap)
        self.price = price_per_mtok
        self._path = path
        self._clock = clock or Clock()
        self._lock = threading.Lock()
        self._day, self._used, self._usd = self._load()
        self._refused = 0

    def _today(self) -> str:
        return self._clock.now().astimezone(dt.UTC).date().isoformat()

    def _roll_locked(self) -> None:
        today = self._today()
        if today != self._day:
            self._day, self._used, self._usd, self._refused = today, 0, 0.0, 0

    def _spent_locked(self) -> bool:
        return self.usd_cap > 0 and self._usd >= self.usd_cap

    def check_spend(self, model: str) -> None:
        """Refuse any embedding (queries included) once today's priced spend reaches the cap."""
        with self._lock:
            self._roll_locked()
            if not self._spent_locked():
                return
            self._refused += 1
            usd = self._usd
        raise EmbeddingSpendCapReached(
            f"the daily embedding spend cap of ${self.usd_cap:g} is reached (${usd:.4f} spent "
            f"today with {model}); embedding resumes at 00:00 UTC, or raise "
            "BRAIN__EMBEDDING__DAILY_USD_CAP (0 = no cap). Searches answer from keywords (BM25) "
            "meanwhile; what was indexed stays and the next sync carries on.",
            usd_today=round(usd, 6), daily_usd_cap=self.usd_cap,
        )

    def reached(self) -> bool:
        with self._lock:
            self._roll_locked()
            return self.cap > 0 and self._used >= self.cap

    def check(self, model: str) -> None:
        """Refuse document embedding once today's tokens (or priced spend) reach the cap."""
        self.check_spend(model)
        with self._lock:
            self._roll_locked()
            if not (self.cap > 0 and self._used >= self.cap):
                return
            self._refused += 1
            used = self._used
        raise EmbeddingTokenCapReached(
            f"the daily embedding token cap of {self.cap} is reached ({used} tokens used today "
            f"with {model}); embedding resumes at 00:00 UTC, or raise "
            "BRAIN__EMBEDDING__DAILY_TOKEN_CAP (0 = no cap). What was indexed stays; the next "
            "sync carries on from there.",
            tokens_today=used,
            daily_token_cap=self.cap,
        )

    def add(self, tokens: int) -> None:
        with self._lock:
            self._roll_locked()
            self._used += max(0, tokens)
            if self.price:
                self._usd += max(0, tokens) * self.price / 1e6
            self._save_locked()

    def status(self) -> dict[str, Any]:
        with self._lock:
            self._roll_locked()
            spent = self._spent_locked()
            paused = (self.cap > 0 and self._used >= self.cap) or spent
            return {
                "tokens_today": self._used,
                "daily_token_cap": self.cap,
                "usd_today": round(self._usd, 9),
                "daily_usd_cap": self.usd_cap,
                "price_per_mtok": self.price,
                "paused_by_cap": paused,
                "paused_by_usd_cap": spent,
                "refused_today": self._refused,
                "resumes_at": _next_midnight(self._day) if paused else None,
            }

    def _load(self) -> tuple[str, int, float]:
        today = self._today()
        if self._path is None or not self._path.exists():
            return today, 0, 0.0
        try:
            data = json.loads(self._path.read_text(encoding="utf-8"))
            if data.get("day") == today:
                return (today, max(0, int(data.get("tokens", 0))),
                        max(0.0, float(data.get("usd", 0.0))))
        except (OSError, ValueError, TypeError, AttributeError):
            log.warning("ignoring unreadable embedding usage file %s", self._path)
        return today, 0, 0.0

    def _save_locked(self) -> None:
        if self._path is None:
            return
        payload = json.dumps({"day": self._day, "tokens": self._used, "usd": self._usd})
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._path.parent, prefix=".embedding-usage-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(payload)
            os.replace(tmp, self._path)
        except OSError as error:  # a full disk must not stop embedding; the count is advisory
            log.warning("could not persist embedding usage to %s: %s", self._path, error)


def _next_midnight(day: str) -> str:
    nxt = dt.date.fromisoformat(day) + dt.timedelta(days=1)
    return f"{nxt.isoformat()}T00:00:00Z"
