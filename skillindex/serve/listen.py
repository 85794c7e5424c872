"""Where and how `serve --http` listens: the address, the public URL, TLS, who may connect."""

from __future__ import annotations

import ssl
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from skillindex.config import ServeLimits, is_loopback
from skillindex.errors import ConfigError, RefusedError

MCP_PATH = "/mcp"
_WILDCARDS = ("", "0.0.0.0", "::")  # noqa: S104 - names of every interface, to recognise them


@dataclass(frozen=True, slots=True)
class Introspect:
    """An authorization server's RFC 7662 endpoint and this server's credentials there."""

    endpoint: str
    issuer: str
    client_id: str | None = None
    client_secret: str | None = None
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Listen:
    """A checked plan for `serve --http`: nothing in it can fail to start for want of a fix
    the operator must make (except the port being taken)."""

    host: str
    port: int
    url: str  # the MCP endpoint as clients reach it; the OAuth resource it protects
    tokens: Path | None = None
    introspect: Introspect | None = None
    cert: Path | None = None
    key: Path | None = None
    limits: ServeLimits = field(default_factory=ServeLimits)

    @property
    def authenticated(self) -> bool:
        return self.tokens is not None or self.introspect is not None

    @property
    def allowed_hosts(self) -> list[str]:
        """Host headers the server answers (a foreign one is DNS rebinding: 421)."""
        parts = urllib.parse.urlsplit(self.url)
        hosts = {parts.netloc, "127.0.0.1:*", "localhost:*", "[::1]:*"}
        if parts.port is None:
            hosts.add(f"{parts.netloc}:*")
        if self.host not in _WILDCARDS:
            hosts.add(f"{_bracketed(self.host)}:{self.port}")
        return sorted(hosts)

    @property
    def allowed_origins(self) -> list[str]:
        """Origin headers the server answers (a foreign one is a web page's request: 403):
        `--url`'s and this server's own on loopback, never another local port's, whose
        pages are another program's."""
        scheme = "https" if self.cert is not None else "http"
        return sorted({origin(self.url), *(f"{scheme}://{host}:{self.port}"
                                           for host in ("127.0.0.1", "localhost", "[::1]"))})


def plan(host: str, port: int, *, url: str | None = None, tokens: Path | None = None,
         introspect: Introspect | None = None, insecure_no_auth: bool = False,
         cert: Path | None = None, key: Path | None = None,
         limits: ServeLimits | None = None) -> Listen:
    """The plan for serving at host:port, or the one reason it would be unsafe or broken."""
    if tokens is not None and introspect is not None:
        raise ConfigError("give --tokens or --introspect, not both: their principals would "
                          "share one namespace")
    if (cert is None) != (key is None):
        raise ConfigError("TLS needs both --tls-cert and --tls-key")
    authenticated = tokens is not None or introspect is not None or insecure_no_auth
    if not authenticated and not is_loopback(host):
        _refuse(f"{_bracketed(host) or '*'}:{port}")
    if cert is not None and key is not None:
        _check_tls(cert, key)
    scheme = "https" if cert is not None else "http"
    if url is None:
        if host in _WILDCARDS:
            raise ConfigError(f"serving on every interface needs --url, the address clients "
                              f"use (e.g. {scheme}://skills.example.com:{port}{MCP_PATH})")
        url = f"{scheme}://{_bracketed(host)}:{port}{MCP_PATH}"
    url = _checked_url(url)
    if not authenticated and not is_loopback(urllib.parse.urlsplit(url).hostname or ""):
        _refuse(url)  # a proxy in front of a loopback address: the network reaches it too
    return Listen(host=host, port=port, url=url, tokens=tokens, introspect=introspect,
                  cert=cert, key=key,
                  limits=limits or ServeLimits())


def _refuse(where: str) -> NoReturn:
    raise RefusedError(f"refusing to serve {where} without authentication: anyone who can "
                       "reach it could read every skill (give --tokens FILE or --introspect "
                       "URL, or --insecure-no-auth to serve it anyway)")


def _checked_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or (
            parts.fragment):
        raise ConfigError(f"--url {url!r} must be an http or https URL without query or "
                          "fragment")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc.lower(), parts.path or MCP_PATH,
                                    "", ""))


def _check_tls(cert: Path, key: Path) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except FileNotFoundError as exc:
        raise ConfigError(f"cannot read {exc.filename}: {exc.strerror}") from None
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"--tls-cert {cert} and --tls-key {key} are not a certificate "
                          f"and its key: {getattr(exc, 'reason', None) or exc}") from None


def origin(url: str) -> str:
    """`scheme://host[:port]` of a URL."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
