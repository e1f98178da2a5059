"""Who a browser is: one-time login links, sessions, and the CSRF token of each session.

The explorer acts as a caller exactly as the tools do (brain/trust/identity.py): a login link made
by ``brain ui`` acts as the settings identity (the one the home HTTP token and stdio act as);
a bearer token pasted at /login is checked by the very verifier of ``brain serve --http``
(mcp_surface/http_tokens.py), so it acts as the user and agent its tool calls act as.
Sessions live in memory only: a restart asks for a new login. Every state-changing request
carries the session's CSRF token (checked in webui/security.py).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from brain.process import owner as own
from brain.trust.identity import Identity

LINK_TTL_S = 600.0  # a login link works once, within ten minutes
SESSION_TTL_S = 12 * 3600.0
MAX_SESSIONS = 256  # the oldest is dropped past this: memory stays bounded
MAX_TOKEN_CHARS = 256
COOKIE = "brain_ui"


@dataclass
class Session:
    identity: Identity
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    expires: float = field(default_factory=lambda: time.monotonic() + SESSION_TTL_S)


class Logins:
    """One-time login links and the sessions they open."""

    def __init__(self, home: Path, default: Identity) -> None:
        self.home = Path(home)
        self.default = default
        self._links: dict[str, tuple[Identity, float]] = {}
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._verifier: object | None = None

    def issue_link(self, identity: Identity | None = None) -> str:
        """A fresh one-time login token (for the URL ``brain ui`` prints)."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            now = time.monotonic()
            self._links = {t: v for t, v in self._links.items() if v[1] > now}
            self._links[token] = (identity or self.default, now + LINK_TTL_S)
        return token

    def use_link(self, token: str) -> Identity | None:
        with self._lock:
            found = self._links.pop(token, None) if token else None
        if found is None or found[1] < time.monotonic():
            return None
        return found[0]

    async def bearer_identity(self, token: str) -> Identity | None:
        """The identity a ``brain serve --http`` bearer token acts as, or None."""
        from mcp_surface.http_tokens import HttpTokenVerifier

        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        if self._verifier is None:
            self._verifier = HttpTokenVerifier(self.home, self.default)
        verifier: HttpTokenVerifier = self._verifier  # type: ignore[assignment]
        access = await verifier.verify_token(token)
        if access is None:
            return None
        return Identity(str(access.claims["user_id"]), str(access.claims["agent_id"]))

    def open_session(self, identity: Identity) -> tuple[str, Session]:
        sid = secrets.token_urlsafe(32)
        session = Session(identity)
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions, key=lambda k: self._sessions[k].expires)
                del self._sessions[oldest]
            self._sessions[sid] = session
        return sid, session

    def session(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            s = self._sessions.get(sid)
            if s is not None and s.expires < time.monotonic():
                del self._sessions[sid]
                s = None
        return s

    def close_session(self, sid: str | None) -> None:
        with self._lock:
            self._sessions.pop(sid or "", None)


def same(a: str | None, b: str | None) -> bool:
    return own.same_token(a, b)
