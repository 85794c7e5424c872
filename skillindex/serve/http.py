"""`serve --http`: the MCP server as an OAuth resource server, behind limits, on a socket."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from skillindex.errors import SkillIndexError
from skillindex.serve import auth, connections, gates
from skillindex.serve.listen import MCP_PATH, Listen, origin
from skillindex.serve.mcp import PAGE_SIZE, POLL_SECONDS, Skills, SkillServer, create_server
from skillindex.serve.tokens import TokenFile

READY_SECONDS = 2.0  # what a probe waits for the index before /readyz says 503
# The standard variables that name where OTLP goes: with none, nothing of OpenTelemetry loads.
_OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                   "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")

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
                                      client_secret=found.client_secret,
                                      concurrency=listen.limits.introspection_concurrency)
    else:
        return None
    settings = AuthSettings(issuer_url=issuer, resource_server_url=listen.url,  # type: ignore[arg-type]
                            required_scopes=scopes, validate_token_resource=True)
    return settings, verifier


def app(server: SkillServer, listen: Listen, *, clock: Callable[[], float] = time.monotonic,
        refusals: gates.Refusals | None = None,
        telemetry: gates.Telemetry | None = None) -> Starlette:
    """The ASGI application: the SDK's streamable HTTP app (its bearer authentication,
    protected-resource metadata and Host/Origin checks) between the gates of `gates`."""
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                         allowed_hosts=listen.allowed_hosts,
                                         allowed_origins=listen.allowed_origins)
    application = server.streamable_http_app(streamable_http_path=MCP_PATH,
                                             transport_security=security, host=listen.host,
                                             max_request_body_size=listen.limits.max_body_bytes)
    if listen.tokens is not None:
        _without_authorization_server(application, listen.url)
    state = server.state
    if not listen.authenticated:
        refusals = None  # nothing is refused for want of a token
    elif refusals is None:
        refusals = gates.Refusals(state, per_minute=listen.limits.refusals_per_minute,
                                  clock=clock)

    checking = threading.Event()

    def check() -> str | None:
        try:
            return state.index.ready()
        finally:
            checking.clear()

    async def ready() -> str | None:
        # A probe waits seconds, not the database's busy timeout, and one check runs at a
        # time: a probe that comes while one still waits is told so.
        if checking.is_set():
            return "the previous readiness check is still waiting for the index"
        checking.set()
        with anyio.move_on_after(READY_SECONDS):
            return await anyio.to_thread.run_sync(check, abandon_on_cancel=True)
        return f"the index did not answer within {READY_SECONDS:g} s"

    # The order of docs/serving.md: the front gates before the SDK's authentication, the
    # principals' after it and before its routes.
    application.user_middleware.insert(0, Middleware(
        gates.Front, limits=listen.limits, path=MCP_PATH, ready=ready, clock=clock,
        telemetry=telemetry, known=getattr(server.verifier, "known", None)))
    application.user_middleware.append(Middleware(
        gates.Principals, limits=listen.limits, path=MCP_PATH, refusals=refusals, clock=clock))
    return application


def _without_authorization_server(application: Starlette, url: str) -> None:
    """Serve the protected-resource metadata without `authorization_servers`: the operator
    hands out static tokens, and no OAuth flow of a client's could get one (RFC 9728 makes
    the member optional)."""
    metadata = {"resource": url, "bearer_methods_supported": ["header"]}

    async def protected_resource(_: Request) -> Response:
        return JSONResponse(metadata, headers={"Cache-Control": "public, max-age=3600"})

    routes = application.router.routes
    for position, route in enumerate(routes):
        if isinstance(route, Route) and route.path.startswith(
                "/.well-known/oauth-protected-resource"):
            routes[position] = Route(route.path, protected_resource, methods=["GET", "OPTIONS"])


def bind(listen: Listen) -> socket.socket:
    """The listening socket, or one line saying why there is none."""
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    try:
        return socket.create_server((listen.host, listen.port), family=family, backlog=2048,
                                    dualstack_ipv6=listen.host == "::")
    except OSError as exc:
        raise SkillIndexError(f"cannot listen on {listen.host}:{listen.port}: "
                              f"{exc.strerror or exc}") from None


def config(server: SkillServer, listen: Listen, *, clock: Callable[[], float] = time.monotonic,
           refusals: gates.Refusals | None = None,
           telemetry: gates.Telemetry | None = None) -> uvicorn.Config:
    options: dict[str, Any] = {}
    if listen.cert is not None and listen.key is not None:
        options = {"ssl_certfile": str(listen.cert), "ssl_keyfile": str(listen.key)}
    limits = listen.limits
    bounded = connections.protocol(connections.Connections(connections.Bounds(
        header_timeout=limits.header_timeout, body_timeout=limits.body_timeout,
        max_connections=limits.max_connections,
        max_connections_per_peer=limits.max_connections_per_peer)))
    # A proxy on this machine may say who the client is (X-Forwarded-For): uvicorn's default.
    # The request log is the gates' (one line a request), not uvicorn's access log.
    return uvicorn.Config(app(server, listen, clock=clock, refusals=refusals,
                              telemetry=telemetry),
                          log_level="info", access_log=False, http=bounded,
                          timeout_graceful_shutdown=10, **options)


class _Lines(logging.Formatter):
    """One line a request, as text or as a JSON object; other records as text."""

    def __init__(self, log_format: str) -> None:
        super().__init__()
        self.json = log_format == "json"

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        stamp += f".{int(record.msecs):03d}Z"
        request = getattr(record, "request", None)
        if self.json:
            fields = dict(request) if isinstance(request, dict) else {
                "level": record.levelname.lower(), "message": record.getMessage()}
            return json.dumps({"time": stamp, **fields}, ensure_ascii=False)
        if isinstance(request, dict):
            return (f"{stamp} {request['peer']} {request['principal']} "
                    f"\"{request['method']} {request['path']}\" {request['status']} "
                    f"{request['bytes']} {request['ms']}ms {request['connection']}")
        return f"{stamp} {record.levelname.lower()} {record.getMessage()}"


def logging_to(stream: Any, log_format: str) -> None:
    """The server's log (requests, notices, uvicorn's own lines) on `stream`, in one format."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_Lines(log_format))
    for name in ("skillindex.serve", "uvicorn.error", "uvicorn"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False
    # The SDK's own lines (its session manager's) go to the root logger: in the one format too.
    logging.getLogger().handlers = [handler]


def serve(index: SkillIndex, listen: Listen, *, page_size: int = PAGE_SIZE,
          poll_seconds: float = POLL_SECONDS, log_format: str = "text") -> None:
    """Serve streamable HTTP as `listen` plans it until the process is stopped (SIGTERM or
    SIGINT: new connections are refused, requests under way are finished)."""
    server = create_server(index, page_size=page_size, poll_seconds=poll_seconds,
                           authentication=authentication(listen))
    refusals = gates.Refusals(server.state, per_minute=listen.limits.refusals_per_minute)
    notices = connections.Notices()
    sock = connections.Listener.of(bind(listen), notices)
    logging_to(sys.stdout, log_format)
    observed = observe(server.state, os.environ)
    settings = config(server, listen, refusals=refusals, telemetry=observed)
    settings.log_config = None  # ours, set above: uvicorn would replace it

    async def main() -> None:
        connections.quiet_accept_errors(asyncio.get_running_loop())
        logging.getLogger("skillindex.serve").info("serving %s", listen.url)
        try:
            await uvicorn.Server(settings).serve([sock])
        finally:
            await refusals.flush()

    # uvicorn drains on SIGTERM and SIGINT, then raises the signal again once its own handlers
    # are gone: these take it, so the refusals' summaries are written and the exit is clean.
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, _stopped)
    anyio.run(main)
    if observed is not None:
        from skillindex.serve import telemetry  # noqa: PLC0415

        telemetry.shutdown()
    logging.getLogger("skillindex.serve").info("stopped")


def observe(state: Skills, environ: Mapping[str, str]) -> gates.Telemetry | None:
    """OpenTelemetry, when the environment names an OTLP endpoint and the `otel` extra is
    there (nothing of it is imported otherwise); one line says why not when it is missing."""
    if not any(environ.get(name) for name in _OTLP_ENDPOINTS):
        return None
    try:
        from skillindex.serve import telemetry  # noqa: PLC0415
    except ImportError:
        logging.getLogger("skillindex.serve").warning(
            "an OTLP endpoint is set, but OpenTelemetry export needs the otel extra: "
            "pip install 'skillindex[otel]'")
        return None
    if not telemetry.wanted(environ):
        return None
    observed = telemetry.configure()
    state.on_read = observed.disclosure
    return observed


def _stopped(number: int, frame: object) -> None:
    """A stop signal that arrives once the server has drained: it is stopping already."""
