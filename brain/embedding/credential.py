"""The embedding credential's state, and the keyword-only search it leaves when it fails.

Seed 000: a missing or rejected embedding credential never stops the server. The remote
embedder (brain/embedding/remote.py) keeps one :class:`CredentialGate`:

- ``ok``: calls go out as usual;
- ``missing``: no key is set; ``rejected``: the endpoint answered 401/403 to the key.

While it is not ``ok``, calls fail at once with the typed error naming the credential
(``EMBEDDING_CREDENTIAL_MISSING`` / ``EMBEDDING_CREDENTIAL_REJECTED``), without a request,
except one probe every ``retry_s`` seconds: the key is read again first (``key_source``:
the settings' own sources, so a key written to .env or brain.toml is picked up), and the
first call that succeeds turns the state back to ``ok``. Nothing is restarted.

Searches ask :func:`query_vector`: the query's vector, or None while the credential is not
usable, and then rank by BM25 alone (brain/search/policy.py); :func:`warnings` is what a
search page says about it. Writes that need a vector (a note, a sync) fail with the typed
error and change nothing: no other model embeds in its place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from brain.errors import (
    BrainError,
    EmbeddingCredentialMissing,
    EmbeddingCredentialRejected,
    EmbeddingSpendCapReached,
)

log = logging.getLogger(__name__)

OK, MISSING, REJECTED = "ok", "missing", "rejected"
CREDENTIAL_ERRORS = (EmbeddingCredentialMissing, EmbeddingCredentialRejected)


def setting_of(credential: str) -> str:
    """The environment variable of a credential id (``embedding.api_key`` ->
    ``BRAIN__EMBEDDING__API_KEY``; ``embedding.endpoint.<id>`` ->
    ``BRAIN__EMBEDDING__ENDPOINTS__<ID>__API_KEY``)."""
    parts = credential.split(".")
    if parts[:2] == ["embedding", "endpoint"] and len(parts) == 3:
        parts = ["embedding", "endpoints", parts[2], "api_key"]
    return "BRAIN__" + "__".join(p.upper() for p in parts)


class CredentialGate:
    def __init__(self, credential: str, has_key: bool, *, retry_s: float = 30.0,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.credential = credential
        self.retry_s = max(0.0, retry_s)
        self._now = now
        self._lock = threading.Lock()
        self.state = OK if has_key else MISSING
        self.reason = "" if has_key else "no key is set"
        self._last_try = now()
        self._since = time.time() if not has_key else None

    def usable(self) -> bool:
        """Whether a call may go out now: the credential is ok, or a probe is due (which
        this call then is)."""
        with self._lock:
            if self.state == OK:
                return True
            if self._now() - self._last_try < self.retry_s:
                return False
            self._last_try = self._now()
            return True

    def error(self, model: str) -> BrainError:
        """The typed error of a call refused while the credential is not usable."""
        with self._lock:
            state, reason = self.state, self.reason
        fix = (f"set {setting_of(self.credential)} (credential {self.credential}) in the "
               f"environment, .env or brain.toml; it is tried again every {self.retry_s:g} s "
               "without a restart")
        if state == MISSING:
            return EmbeddingCredentialMissing(
                f"embedding model {model} needs the credential {self.credential} and none is "
                f"set: {fix}. No other model is used in its place.",
                model=model, credential=self.credential)
        return EmbeddingCredentialRejected(
            f"the endpoint of {model} rejected the credential {self.credential} ({reason}): "
            f"{fix}.", model=model, credential=self.credential)

    def missing(self) -> None:
        self._set(MISSING, "no key is set")

    def rejected(self, reason: str) -> None:
        self._set(REJECTED, reason)

    def succeeded(self) -> None:
        with self._lock:
            was = self.state
            self.state, self.reason, self._since = OK, "", None
        if was != OK:
            log.warning("embedding credential %s works again: semantic search is back on",
                        self.credential)

    def _set(self, state: str, reason: str) -> None:
        with self._lock:
            was = self.state
            self.state, self.reason = state, reason
            self._last_try = self._now()
            if was == OK:
                self._since = time.time()
        if was == OK:
            log.warning("embedding credential %s is %s (%s): semantic search is off, searches "
                        "answer from keywords (BM25) only", self.credential, state, reason)

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {"dense": self.state == OK, "credential_state": self.state,
                    "credential_id": self.credential,
                    **({"dense_off_reason": self.reason, "dense_off_since": self._since}
                       if self.state != OK else {})}


def query_vector(embedder: Any, text: str) -> list[float] | None:
    """The query's dense vector, or None while the embedding credential is missing or
    rejected, or today's dollar cap is spent (the search then ranks by BM25 alone)."""
    try:
        return list(embedder.embed_query(text).tolist())
    except (*CREDENTIAL_ERRORS, EmbeddingSpendCapReached):
        return None


def search_warnings(embedder: Any) -> list[dict[str, str]]:
    """What a search page says while the dense legs are off (brain/search/presentation.py)."""
    status = getattr(embedder, "status", None)
    return warnings(status()) if callable(status) else []


def warnings(embedding: dict[str, Any]) -> list[dict[str, str]]:
    """The warnings of an embedding status (brain/embedding/remote.py's ``status()``)."""
    if embedding.get("paused_by_usd_cap"):
        return [{"code": "EMBEDDING_USD_CAP_REACHED", "credential": "",
                 "message": f"semantic search is off until 00:00 UTC: today's embedding spend "
                            f"reached the daily cap of ${embedding.get('daily_usd_cap')}; these "
                            "results come from keyword (BM25) search only "
                            "(BRAIN__EMBEDDING__DAILY_USD_CAP)."}]
    if embedding.get("dense", True):
        return []
    cred = str(embedding.get("credential_id", ""))
    state = str(embedding.get("credential_state", ""))
    code = "EMBEDDING_CREDENTIAL_MISSING" if state == MISSING else "EMBEDDING_CREDENTIAL_REJECTED"
    return [{"code": code, "credential": cred,
             "message": f"semantic search is off: the embedding credential {cred} is {state}; "
                        f"these results come from keyword (BM25) search only. Set "
                        f"{setting_of(cred)} to turn meaning search back on."}]
