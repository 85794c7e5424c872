"""`serve --http`: the MCP server as an OAuth resource server, behind limits, on a socket."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware

from skillindex.errors import SkillIndexError
from skillindex.serve import auth, gate
from skillindex.serve.listen import MCP_PATH, Listen, origin
from skillindex.serve.mcp import PAGE_SIZE, POLL_SECONDS, SkillServer, create_server
from skillindex.serve.tokens import TokenFile

if TYPE_CHECKING:
    from skillindex.api import SkillIndex


def authentication(listen: Listen) -> tuple[AuthSettings, TokenVerifier] | None:
    """The SDK's auth settings and the token verifier the plan names (None: no auth)."""
    verifier: TokenVerifier
    if listen.tokens is not None:
        # This server is its tokens' issuer: the operator hands them out.
        issuer, scopes = origin(listen.url), None
        verifier = auth.StaticTokens(TokenFile(listen.tokens), resource=listen.url)
    elif listen.introspect is not None:
        found = listen.introspect
        issuer, scopes = found.issuer, list(found.scopes) or None
        verifier = auth.Introspection(found.endpoint, resource=listen.url, issuer=found.issuer,
                                      client_id=found.client_id,
                                      client_secret=found.client_secret)
    else:
        return None
    settings = AuthSettings(issuer_url=issuer, resource_server_url=listen.url,  # type: ignore[arg-type]
                            required_scopes=scopes, validate_token_resource=True)
    return settings, verifier


def app(server: SkillServer, listen: Listen, *,
        clock: Callable[[], float] = time.monotonic) -> Starlette:
    """The ASGI application: the SDK's streamable HTTP app with its bearer authentication,
    protected-resource metadata and Host/Origin checks, and the limits per principal."""
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                         allowed_hosts=listen.allowed_hosts,
                                         allowed_origins=listen.allowed_origins)
    application = server.streamable_http_app(streamable_http_path=MCP_PATH,
                                             transport_security=security, host=listen.host)
    # After the SDK's authentication middleware, before its routes: the gate sees who asks.
    application.user_middleware.append(Middleware(
        gate.Gate, limits=listen.limits, path=MCP_PATH, clock=clock,
        unauthenticated=server.state.refuse_unauthenticated if listen.authenticated else None))
    return application


def bind(listen: Listen) -> socket.socket:
    """The listening socket, or one line saying why there is none."""
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    try:
        return socket.create_server((listen.host, listen.port), family=family, backlog=2048,
                                    dualstack_ipv6=listen.host == "::")
    except OSError as exc:
        raise SkillIndexError(f"cannot listen on {listen.host}:{listen.port}: "
                              f"{exc.strerror or exc}") from None


def config(server: SkillServer, listen: Listen, *,
           clock: Callable[[], float] = time.monotonic) -> uvicorn.Config:
    options: dict[str, Any] = {}
    if listen.cert is not None and listen.key is not None:
        options = {"ssl_certfile": str(listen.cert), "ssl_keyfile": str(listen.key)}
    # A proxy on this machine may say who the client is (X-Forwarded-For): uvicorn's default.
    return uvicorn.Config(app(server, listen, clock=clock), log_level="info",
                          timeout_graceful_shutdown=5, **options)


def serve(index: SkillIndex, listen: Listen, *, page_size: int = PAGE_SIZE,
          poll_seconds: float = POLL_SECONDS) -> None:
    """Serve streamable HTTP as `listen` plans it until the process is stopped."""
    server = create_server(index, page_size=page_size, poll_seconds=poll_seconds,
                           authentication=authentication(listen))
    sock = bind(listen)
    anyio.run(uvicorn.Server(config(server, listen)).serve, [sock])
