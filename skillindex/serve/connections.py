"""The first gate of `serve --http`: bounds on connections, before a request is read whole."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import json
import logging
import os
import resource
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("skillindex.serve")

# Descriptors kept back from the connection cap: the index's database files and worker
# threads, the logs and the listening socket need theirs when connections take the rest.
RESERVED_DESCRIPTORS = 64
CONNECTION = "skillindex.connection"  # the scope key of the server's id for a connection
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass(frozen=True, slots=True)
class Bounds:
    """How long a request may take to arrive and how many connections may be open."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int | None = 1024
    max_connections_per_peer: int | None = 64


def peer_group(host: str) -> str:
    """The address a peer's limits count under: itself, or its /64 for IPv6 (one host is
    usually handed a whole /64, and would otherwise have 2**64 buckets)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def descriptor_cap(wanted: int | None) -> int:
    """The connections this process can hold open beside what it needs for itself."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = max(8, soft - RESERVED_DESCRIPTORS) if soft != resource.RLIM_INFINITY else 1 << 20
    return room if wanted is None else min(wanted, room)


class Notices:
    """Log lines about refused connections, at most one per kind a minute: an attack must
    not be able to fill the disk through the log."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._since: dict[str, tuple[float, int]] = {}

    def note(self, kind: str, message: str) -> None:
        now = self.clock()
        since = self._since.get(kind)
        if since is not None and now - since[0] < 60:
            self._since[kind] = (since[0], since[1] + 1)
            return
        more = f" ({since[1]} more like it in the last minute)" if since and since[1] else ""
        self._since[kind] = (now, 0)
        logger.warning("%s%s", message, more)


class Connections:
    """The open connections per peer group and in all, shared by every connection."""

    def __init__(self, bounds: Bounds, notices: Notices | None = None) -> None:
        self.bounds = bounds
        self.cap = descriptor_cap(bounds.max_connections)
        self.notices = notices or Notices()
        self.open: dict[str, int] = {}
        self.total = 0

    def admit(self, peer: str) -> str | None:
        """Count a new connection from `peer`, or say why it is refused."""
        per_peer = self.bounds.max_connections_per_peer
        if self.total >= self.cap:
            self.notices.note("total", f"refusing connections: {self.total} are open, the "
                              "most this server holds")
            return "too many connections to this server"
        if per_peer is not None and self.open.get(peer, 0) >= per_peer:
            self.notices.note(f"peer {peer}", f"refusing connections from {peer}: "
                              f"{per_peer} are open, the most one address may hold")
            return f"too many connections from {peer}"
        self.open[peer] = self.open.get(peer, 0) + 1
        self.total += 1
        return None

    def release(self, peer: str) -> None:
        left = self.open.get(peer, 0) - 1
        if left > 0:
            self.open[peer] = left
        else:
            self.open.pop(peer, None)
        self.total -= 1


def refusal(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP response carrying a JSON-RPC error, written before any request is read."""
    body = json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": -32000, "message": message}}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


def protocol(connections: Connections) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the bounds of `connections` and an id for each one."""

    class Bounded(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.peer = "unknown"
            self.admitted = False
            self.served = False
            self.phase: str | None = None
            self.timer: asyncio.TimerHandle | None = None
            inner, connection = self.app, secrets.token_hex(6)
            self.logger = _Quiet(self.logger, connections.notices)  # type: ignore[assignment]

            async def app(scope: Scope, receive: Receive, send: Send) -> None:
                scope[CONNECTION] = connection
                await inner(scope, receive, send)

            self.app = app

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.peer = peer_group(self.client[0]) if self.client else "unknown"
            refused = connections.admit(self.peer)
            if refused is not None:
                transport.write(refusal(503, "Service Unavailable", refused))
                transport.close()
                return
            self.admitted = True
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.admitted:
                self.admitted = False
                connections.release(self.peer)
            self._arm(None)
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            # A request h11 cannot parse (or headers over its bound): a JSON-RPC error too.
            if not self.transport.is_closing():
                self.transport.write(refusal(400, "Bad Request", msg))
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            self.served = True
            super().on_response_complete()
            self._watch()

        def _watch(self) -> None:
            """Time the part of a request now arriving, from when it started to arrive: a
            client that trickles bytes does not buy itself more time."""
            if not self.admitted or self.transport.is_closing():
                return
            state = self.conn.their_state
            if state is h11.IDLE:
                # Idle between requests is uvicorn's keep-alive timeout; a request begun is ours.
                waiting = not self.served or bool(self.conn.trailing_data[0])
                self._arm("header" if waiting else None)
            elif state is h11.SEND_BODY:
                self._arm("body")
            else:
                self._arm(None)

        def _arm(self, phase: str | None) -> None:
            if phase == self.phase:
                return
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            self.phase = phase
            if phase is not None:
                bounds = connections.bounds
                delay = bounds.header_timeout if phase == "header" else bounds.body_timeout
                self.timer = self.loop.call_later(delay, self._expired, phase)

        def _expired(self, phase: str) -> None:
            self.timer = None
            if self.transport.is_closing():
                return
            connections.notices.note(f"slow {phase}", f"closed a connection from {self.peer}:"
                                     f" its request {phase} did not arrive in time")
            cycle = self.cycle
            if cycle is None or not cycle.response_started:
                self.transport.write(refusal(408, "Request Timeout",
                                             f"the request {phase} did not arrive in time"))
            if cycle is not None:
                cycle.disconnected = True  # the application sends nothing more on it
                cycle.message_event.set()
            self.transport.close()

    return Bounded


class _Quiet:
    """uvicorn's logger, but a line for each request it cannot parse (which any client can
    send at will) becomes a notice, once a minute."""

    def __init__(self, logger: logging.Logger, notices: Notices) -> None:
        self._logger = logger
        self._notices = notices

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        if msg == "Invalid HTTP request received.":
            self._notices.note("invalid", "answered requests that are not HTTP with 400")
        else:
            self._logger.warning(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)


class Listener(socket.socket):
    """A listening socket that, out of descriptors, turns each waiting connection away with
    a 503 (through a descriptor kept spare for that) instead of leaving the accept loop to
    spin and log: one line a minute says so."""

    spare: int | None = None
    notices: Notices | None = None

    @classmethod
    def of(cls, sock: socket.socket, notices: Notices) -> Listener:
        listener = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        listener.spare = os.open(os.devnull, os.O_RDONLY)
        listener.notices = notices
        return listener

    def accept(self) -> tuple[socket.socket, Any]:
        try:
            return super().accept()
        except OSError as exc:
            if exc.errno not in _OUT_OF_DESCRIPTORS or self.spare is None:
                raise
            if self.notices is not None:
                self.notices.note("descriptors", "out of file descriptors: new connections are "
                                  "answered 503 until some close (raise `ulimit -n`, or lower "
                                  "[serve] max_connections)")
            os.close(self.spare)
            self.spare = None
            try:
                fd, _ = self._accept()  # type: ignore[attr-defined]
            except OSError:
                fd = None
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.write(fd, refusal(503, "Service Unavailable",
                                         "the server is out of file descriptors"))
                os.close(fd)
            try:
                self.spare = os.open(os.devnull, os.O_RDONLY)
            except OSError:
                raise exc from None  # nothing to shed with: asyncio's own pause applies
            raise BlockingIOError(errno.EAGAIN, "a connection was shed") from None


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Keep asyncio from logging each failed accept: `Listener` says it once a minute."""
    default = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == "socket.accept() out of system resource":
            return
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


def connection_of(scope: Scope) -> str | None:
    """The id the server drew for the connection a request came on (None off `protocol`)."""
    value = scope.get(CONNECTION)
    return value if isinstance(value, str) else None

