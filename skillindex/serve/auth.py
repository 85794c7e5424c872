"""Who a bearer token stands for: the token verifiers `serve --http` hands to the MCP SDK."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from typing import Any

import anyio
import httpx2
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.shared.auth_utils import check_resource_allowed

from skillindex.serve.tokens import TokenFile

logger = logging.getLogger("skillindex.serve")

# How long an introspection answer is trusted: a token the issuer revokes stops working here
# at most this long after. A refusal is kept for less, so a token just issued soon works.
ACTIVE_SECONDS = 30.0
INACTIVE_SECONDS = 5.0
_CACHE_SIZE = 4096
_NAMESPACES = ("sub:", "user:", "client:")


def principal(user: object) -> str | None:
    """The principal of an authenticated request's user (Starlette's `scope["user"]`): the
    token's subject, else `client:` and the client it was issued to (a client's id is not a
    user's name, whatever its letters); None when the request carried none."""
    if not isinstance(user, AuthenticatedUser):
        return None
    token = user.access_token
    return token.subject or f"client:{token.client_id}"


def introspected_principal(answer: Mapping[str, Any]) -> str | None:
    """Who an introspection answer names, each source in a namespace of its own: `sub` as
    it is, `user:` and the `username`, or `client:` and the `client_id` (a token a client
    got for itself); a `sub` that looks like another namespace is marked `sub:`."""
    subject = _text(answer.get("sub"))
    if subject is not None:
        return f"sub:{subject}" if subject.startswith(_NAMESPACES) else subject
    username = _text(answer.get("username"))
    if username is not None:
        return f"user:{username}"
    client = _text(answer.get("client_id"))
    return None if client is None else f"client:{client}"


class StaticTokens:
    """A `TokenVerifier` over a file of hashed tokens (`skillindex serve token add`)."""

    def __init__(self, tokens: TokenFile, *, resource: str) -> None:
        self.tokens = tokens
        self.resource = resource

    def known(self, token: str) -> bool:
        """Whether `token` is good, answered from the file alone (no one else is asked)."""
        return self.tokens.principal_of(token) is not None

    async def verify_token(self, token: str) -> AccessToken | None:
        name = self.tokens.principal_of(token)
        if name is None:
            return None
        # The file's tokens are for this server alone: their resource is this one.
        return AccessToken(token=token, client_id=name, subject=name, scopes=[],
                           resource=self.resource)


class Introspection:
    """A `TokenVerifier` asking an authorization server about each token (RFC 7662).

    The server is asked with this resource server's client credentials (HTTP Basic) when it
    has them. A token counts when the answer says `active`, names this server in `aud`, and
    comes from `issuer` when the answer names one; answers are kept for ACTIVE_SECONDS (never
    past the token's `exp`), refusals for INACTIVE_SECONDS.
    """

    def __init__(self, endpoint: str, *, resource: str, issuer: str | None = None,
                 client_id: str | None = None, client_secret: str | None = None,
                 timeout: float = 10.0, concurrency: int = 8) -> None:
        self.endpoint = endpoint
        self.resource = resource
        self.issuer = issuer
        self.auth: httpx2.Auth | None = None if client_id is None else httpx2.BasicAuth(
            client_id, client_secret or "")
        self.timeout = timeout
        self._client: httpx2.AsyncClient | None = None
        self._cache: dict[str, tuple[AccessToken | None, float]] = {}
        # However many requests wait on it, the provider is asked this many at a time.
        self._asking = anyio.Semaphore(concurrency)

    def known(self, token: str) -> bool:
        """Whether the provider said lately that `token` is good (its answer is still kept)."""
        cached = self._cache.get(_key(token))
        return cached is not None and cached[0] is not None and cached[1] > time.monotonic()

    async def verify_token(self, token: str) -> AccessToken | None:
        key = _key(token)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        async with self._asking:
            cached = self._cache.get(key)  # asked meanwhile by a request with the same token
            if cached is not None and cached[1] > time.monotonic():
                return cached[0]
            answer = await self._ask(token)
        verified = None if answer is None else self._verified(token, answer)
        keep = INACTIVE_SECONDS if verified is None else ACTIVE_SECONDS
        if verified is not None and verified.expires_at is not None:
            keep = min(keep, verified.expires_at - time.time())
        self._remember(key, verified, now + keep)
        return verified

    async def _ask(self, token: str) -> Mapping[str, Any] | None:
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=self.timeout, auth=self.auth)
        try:
            response = await self._client.post(
                self.endpoint, data={"token": token, "token_type_hint": "access_token"},
                headers={"Accept": "application/json"})
        except httpx2.HTTPError as exc:
            logger.warning("token introspection at %s failed: %s", self.endpoint, exc)
            return None
        if response.status_code != 200:
            logger.warning("token introspection at %s answered %d", self.endpoint,
                           response.status_code)
            return None
        try:
            answer = response.json()
        except ValueError:
            logger.warning("token introspection at %s answered no JSON", self.endpoint)
            return None
        return answer if isinstance(answer, dict) else None

    def _verified(self, token: str, answer: Mapping[str, Any]) -> AccessToken | None:
        if answer.get("active") is not True:
            return None
        issuer = answer.get("iss")
        if self.issuer is not None and issuer is not None and str(issuer) != self.issuer:
            return None
        audience = answer.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience
        if not isinstance(audiences, list) or not any(
                isinstance(each, str) and check_resource_allowed(self.resource, each)
                for each in audiences):
            return None  # a token issued for another server is not one for this server
        subject = introspected_principal(answer)
        if subject is None:
            return None
        client = _text(answer.get("client_id"))
        expires = answer.get("exp")
        scopes = answer.get("scope")
        return AccessToken(
            token=token, client_id=client or subject, subject=subject,
            scopes=scopes.split() if isinstance(scopes, str) else [],
            expires_at=int(expires) if isinstance(expires, int | float) else None,
            resource=self.resource,
            claims={"iss": str(issuer)} if issuer is not None else None)

    def _remember(self, key: str, verified: AccessToken | None, until: float) -> None:
        if len(self._cache) >= _CACHE_SIZE:
            now = time.monotonic()
            self._cache = {k: v for k, v in self._cache.items() if v[1] > now}
            while len(self._cache) >= _CACHE_SIZE:
                del self._cache[next(iter(self._cache))]
        self._cache[key] = (verified, until)


def _key(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest().hex()


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
