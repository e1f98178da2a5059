"""Bearer tokens: who an HTTP caller is, and who may use the owner's sibling endpoint.

``brain serve --http`` checks each request's token with :class:`HttpTokenVerifier` and
:class:`TokenIdentity` makes the call act as the identity it maps to. The owner's sibling
endpoint admits only holders of the per-election ``owner.token`` (:class:`OwnerTokenVerifier`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fastmcp.server.auth import TokenVerifier
from fastmcp.server.auth.auth import AccessToken
from fastmcp.server.dependencies import get_access_token
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from starlette.authentication import AuthenticationError
from starlette.middleware import Middleware as AsgiMiddleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, PlainTextResponse, Response

from brain.errors import BrainError
from brain.process import owner as own
from brain.trust import paths
from brain.trust.identity import Identity, acting_as
from config import Settings
from mcp_surface.tool_errors import CodedToolError

log = logging.getLogger(__name__)


class TokensUnreadable(AuthenticationError):
    """A bearer token that could not be checked (tokens.json is damaged): the request is
    answered 503 with the typed error, not 500 with a traceback."""

    def __init__(self, err: BrainError) -> None:
        super().__init__(str(err))
        self.err = err


def _refusal(conn: HTTPConnection, exc: Exception) -> Response:  # noqa: ARG001
    if isinstance(exc, TokensUnreadable):
        # To the network the file is named by its place in the data dir, not the full path;
        # the server's log has the path (HttpTokenVerifier._identities).
        message = exc.err.message.replace(exc.err.details.get("path", "\0"),
                                          f"{own.TOKENS_FILE} in the server's data dir")
        return JSONResponse({"error": exc.err.code, "message": message}, status_code=503)
    return PlainTextResponse(str(exc), status_code=400)


class HttpTokenVerifier(TokenVerifier):
    """``brain serve --http``: the home token acts as the configured identity; tokens in
    ``tokens.json`` (stored as digests) each act as their own user/agent. While tokens.json
    is damaged, any other token is answered 503 with CONFIG_INVALID naming the file and the
    fix (the home token keeps working)."""

    def __init__(self, home: Path, default: Identity) -> None:
        super().__init__()
        self.home = Path(home)
        self.default = default
        self.token, self.token_path, self.created = own.http_token(self.home)
        self._tokens: dict[str, Identity] = {}
        self._mtime = -1
        self._warned = -1

    def get_middleware(self) -> list[Any]:
        """fastmcp's own, with a refusal that answers a damaged tokens.json as typed JSON."""
        mine = []
        for m in super().get_middleware():
            if m.cls is AuthenticationMiddleware:
                m = AsgiMiddleware(AuthenticationMiddleware, backend=BearerAuthBackend(self),
                                   on_error=_refusal)
            mine.append(m)
        return mine

    def _identities(self) -> dict[str, Identity]:
        path = self.home / own.TOKENS_FILE
        try:
            mtime = path.stat().st_mtime_ns if path.exists() else 0
        except OSError:
            mtime = -2
        if mtime != self._mtime:
            try:
                self._tokens = own.load_tokens(self.home)
            except BrainError as err:
                if self._warned != mtime:  # one line per damaged version of the file
                    self._warned = mtime
                    log.error("%s", err)
                raise TokensUnreadable(err) from None
            self._mtime = mtime
        return self._tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        ident: Identity | None
        if own.same_token(token, self.token):
            ident = self.default
        else:
            ident = self._identities().get(own.token_digest(token or ""))
            if ident is None:
                return None
        return AccessToken(
            token=token,
            client_id=ident.agent_id,
            scopes=[],
            claims={"user_id": ident.user_id, "agent_id": ident.agent_id},
        )


class OwnerTokenVerifier(TokenVerifier):
    """The owner's sibling endpoint: only holders of ``owner.token`` (same OS user)."""

    def __init__(self, token: str = "") -> None:
        super().__init__()
        self.token = token  # set at each election; empty admits nobody

    async def verify_token(self, token: str) -> AccessToken | None:
        if not own.same_token(token, self.token):
            return None
        return AccessToken(token=token, client_id="sibling", scopes=[], claims={"sibling": True})


class TokenIdentity(Middleware):
    """HTTP front: every call acts as the identity its bearer token maps to (both parts:
    a call without an agent would fall back to the settings identity in the tool gate)."""

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext[Any, Any]) -> Any:
        token = get_access_token()
        claims = token.claims if token is not None else {}
        if not claims.get("user_id") or not claims.get("agent_id"):
            raise CodedToolError("UNAUTHORIZED", "this call carries no caller identity")
        with acting_as(Identity(claims["user_id"], claims["agent_id"])), paths.via(paths.HTTP):
            return await call_next(context)


def http_auth(settings: Settings) -> HttpTokenVerifier:
    verifier = HttpTokenVerifier(
        settings.home, Identity(settings.identity.user_id, settings.identity.agent_id)
    )
    try:  # a damaged tokens.json is said in the log at start, not at the first request only
        verifier._identities()
    except TokensUnreadable:
        pass
    return verifier
