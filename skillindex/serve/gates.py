"""The request gates of `serve --http`, in their order: health, the limit per peer, the bounds
on a body, (the SDK's authentication), the limits per principal and the audit of refusals."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skillindex.config import ServeLimits
from skillindex.serve.auth import principal
from skillindex.serve.connections import Notices, connection_of, peer_group

# JSON-RPC errors: a refused request's code is in the range the specification leaves to servers.
RATE_LIMITED = -32000
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
MESSAGE = "skillindex.message"  # the scope key of the parsed body the gates read once
_PRUNE_EVERY = 1024
HEALTH, READY = "/healthz", "/readyz"
requests_log = logging.getLogger("skillindex.serve.requests")


@dataclass(slots=True)
class _Bucket:
    """A token bucket: `level` refills at `rate` a second up to `capacity`."""

    capacity: float
    rate: float
    level: float
    time: float

    def refill(self, now: float) -> float:
        self.level = min(self.capacity, self.level + (now - self.time) * self.rate)
        self.time = now
        return self.level


@dataclass(slots=True)
class _Allowance:
    requests: _Bucket | None
    bytes: _Bucket | None


class _Allowances:
    """The buckets of each key (a principal, a peer), forgetting those full again."""

    def __init__(self, requests_per_second: float | None, bytes_per_minute: int | None,
                 clock: Callable[[], float]) -> None:
        self.rps, self.per_minute, self.clock = requests_per_second, bytes_per_minute, clock
        self._allowances: dict[str, _Allowance] = {}
        self._calls = 0

    def of(self, key: str) -> _Allowance:
        allowance = self._allowances.get(key)
        if allowance is None:
            self._calls += 1
            if self._calls % _PRUNE_EVERY == 0:
                self._prune()
            now, rps, per_minute = self.clock(), self.rps, self.per_minute
            allowance = self._allowances[key] = _Allowance(
                None if rps is None else _Bucket(max(1.0, rps), rps, max(1.0, rps), now),
                None if per_minute is None else _Bucket(per_minute, per_minute / 60,
                                                        per_minute, now))
        return allowance

    def admit(self, allowance: _Allowance) -> tuple[float, str]:
        """Seconds to wait before this key is served again (0: now), and which limit."""
        now = self.clock()
        sent = allowance.bytes
        if sent is not None and sent.refill(now) <= 0:
            return max(0.001, -sent.level / sent.rate), "bytes_per_minute"
        requests = allowance.requests
        if requests is not None:
            if requests.refill(now) < 1:
                return (1 - requests.level) / requests.rate, "requests_per_second"
            requests.level -= 1
        return 0.0, ""

    def _prune(self) -> None:
        now = self.clock()
        self._allowances = {
            key: allowance for key, allowance in self._allowances.items()
            if any(bucket is not None and bucket.refill(now) < bucket.capacity
                   for bucket in (allowance.requests, allowance.bytes))}


class Front:
    """The gates before authentication: `/healthz` and `/readyz`; then the requests a second
    of each peer (its address, an IPv6 one by its /64) whose token is not `known` good, so
    that nothing a peer sends costs an identity provider more than this; then, for a POST to
    the MCP endpoint, a body within `max_body_bytes`, JSON nested at most `max_json_depth`
    deep and no batch. Each refusal is an HTTP error carrying a JSON-RPC error; each request
    is one line of the request log."""

    def __init__(self, app: ASGIApp, *, limits: ServeLimits, path: str,
                 ready: Callable[[], Awaitable[str | None]] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 notices: Notices | None = None, telemetry: Telemetry | None = None,
                 known: Callable[[str], bool] | None = None) -> None:
        self.app = app
        self.known = known
        self.telemetry = telemetry
        self.limits = limits
        self.path = path
        self.ready = ready
        self.clock = clock
        self.notices = notices or Notices(clock)
        self.peers = _Allowances(limits.peer_requests_per_second, None, clock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = str(scope.get("path")), str(scope.get("method"))
        if path in (HEALTH, READY) and method in ("GET", "HEAD"):
            await self._health(path, send)
            return
        peer, started, seen = _peer(scope), self.clock(), _Seen(send)
        if self.telemetry is None:
            logged = await self._gated(scope, receive, seen, peer)
        else:
            with self.telemetry.request(scope, method, path, peer) as span:
                logged = await self._gated(scope, receive, seen, peer)
                self.telemetry.answered(span, method=method, status=seen.status,
                                        principal=principal(scope.get("user")),
                                        seconds=self.clock() - started)
        if logged:
            _log_request(scope, seen, self.clock() - started)

    async def _gated(self, scope: Scope, receive: Receive, seen: _Seen, peer: str) -> bool:
        """Answer through the gates; False for a refusal too frequent to log one by one."""
        wait = 0.0
        if not self._known(scope):
            wait, _ = self.peers.admit(self.peers.of(peer))
        if wait > 0:
            # A flood of these is the attack itself: the log notes it once a minute.
            self.notices.note(f"limited {peer}", f"rate limited {peer}: over "
                              f"{self.limits.peer_requests_per_second:g} requests a second")
            await refuse(seen, 429, RATE_LIMITED,
                         f"rate limited: {peer} has used its requests a second; retry in "
                         f"{max(1, math.ceil(wait))} s", limit="peer_requests_per_second",
                         retry=wait)
            return False
        if scope.get("path") == self.path and scope.get("method") == "POST":
            receive = await self._bounded(scope, receive, seen)
        if not seen.status:
            await self.app(scope, receive, seen)
        return True

    def _known(self, scope: Scope) -> bool:
        """Whether the request's bearer token is known good without asking anyone: then the
        principal's own limits apply, and a team behind one address is not one peer."""
        if self.known is None:
            return False
        given = _header(scope, b"authorization")
        if given is None or given[:7].lower() != "bearer ":
            return False
        return self.known(given[7:].strip())

    async def _health(self, path: str, send: Send) -> None:
        problem = None
        if path == READY and self.ready is not None:
            problem = await self.ready()
        body = json.dumps({"status": "ok"} if problem is None else
                          {"status": "unavailable", "reason": problem}).encode()
        await _answer(send, 200 if problem is None else 503, body)

    async def _bounded(self, scope: Scope, receive: Receive, seen: _Seen) -> Receive:
        """The request's body within the bounds, parsed once for the gates after this one
        (scope[MESSAGE]) and replayed to the application; refused (via `seen`) otherwise."""
        most = self.limits.max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > most:
            await refuse(seen, 413, INVALID_REQUEST, f"the request body is over {most} bytes")
            return receive
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return receive  # gone: the application learns it from its own receive
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > most:
                await refuse(seen, 413, INVALID_REQUEST, f"the request body is over {most} "
                             "bytes")
                return receive
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        problem, parsed = _parsed(body, self.limits.max_json_depth)
        if problem is not None:
            await refuse(seen, 400, PARSE_ERROR, f"Parse error: {problem}")
            return receive
        if isinstance(parsed, list):
            # As the SDK refuses a batch, before any other gate reads one of its requests.
            await refuse(seen, 400, INVALID_REQUEST, "Invalid Request: a batch (JSON array) "
                         "is not accepted; send one JSON-RPC message per request")
            return receive
        scope[MESSAGE] = parsed
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay


def _parsed(body: bytes, depth: int) -> tuple[str | None, object]:
    """The JSON of a body, or why it is refused."""
    try:
        parsed = json.loads(body)
    except RecursionError:
        return f"the JSON is nested deeper than {depth}", None
    except ValueError as exc:
        return str(exc).splitlines()[0][:200], None
    # Only a body with that many brackets can be that deep: most are walked not at all.
    if body.count(b"[") + body.count(b"{") > depth and _depth(parsed) > depth:
        return f"the JSON is nested deeper than {depth}", None
    return None, parsed


def _depth(value: object) -> int:
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((each, level + 1) for each in item)
    return deepest


class Telemetry(Protocol):
    """What the gates tell an observer (serve/telemetry.py, with the `otel` extra)."""

    def request(self, scope: Scope, method: str, path: str,
                peer: str) -> AbstractContextManager[Any]: ...

    def answered(self, span: Any, *, method: str, status: int, principal: str | None,
                 seconds: float) -> None: ...


class RefusalAudit(Protocol):
    """What the audit of refused reads needs from the server that knows its reads."""

    def read_asked(self, message: Mapping[str, Any]) -> tuple[str, str, str] | None: ...

    async def refuse_read(self, read: tuple[str, str, str], peer: str) -> None: ...

    async def summarize_refusals(self, peer: str, count: int, uri: str) -> None: ...


@dataclass(slots=True)
class _Window:
    start: float
    audited: int = 0
    summarized: int = 0
    uri: str = ""


class Refusals:
    """The audit of reads asked without a valid token: one row for each of the first
    `per_minute` of a peer in a minute, then one row that counts the rest."""

    def __init__(self, audit: RefusalAudit, *, per_minute: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.audit = audit
        self.per_minute = per_minute
        self.clock = clock
        self._windows: dict[str, _Window] = {}

    async def refused(self, message: object, peer: str) -> None:
        read = self.audit.read_asked(message) if isinstance(message, dict) else None
        if read is None:
            return  # nothing was asked that would have disclosed anything
        now = self.clock()
        await self.flush(now)
        window = self._windows.setdefault(peer, _Window(now))
        if window.audited < self.per_minute:
            window.audited += 1
            await self.audit.refuse_read(read, peer)
        else:
            window.summarized += 1
            window.uri = read[0]

    async def flush(self, now: float | None = None) -> None:
        """Write the summary of each minute that is over (of every one, without `now`)."""
        ended = [peer for peer, window in self._windows.items()
                 if now is None or now - window.start >= 60]
        for peer in ended:
            window = self._windows.pop(peer)
            if window.summarized:
                await self.audit.summarize_refusals(peer, window.summarized, window.uri)


class Principals:
    """The gates after authentication: each principal's requests a second and response
    bytes a minute (what a response sends counts once it is sent, so one response may take
    the balance below zero: the next requests wait until it refills); a POST to the MCP
    endpoint without a valid token goes to `refusals` before the SDK answers it 401."""

    def __init__(self, app: ASGIApp, *, limits: ServeLimits, path: str,
                 refusals: Refusals | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.path = path
        self.refusals = refusals
        self.clock = clock
        self.principals = _Allowances(limits.requests_per_second, limits.bytes_per_minute,
                                      clock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        name = principal(scope.get("user"))
        if name is None:
            if self.refusals is not None and scope.get(MESSAGE) is not None:
                await self.refusals.refused(scope[MESSAGE], _peer(scope))
            await self.app(scope, receive, send)
            return
        allowance = self.principals.of(name)
        wait, limit = self.principals.admit(allowance)
        if wait > 0:
            what = ("requests a second" if limit == "requests_per_second" else
                    "response bytes a minute")
            await refuse(send, 429, RATE_LIMITED, f"rate limited: {name} has used its {what}; "
                         f"retry in {max(1, math.ceil(wait))} s", limit=limit, retry=wait)
            return
        if allowance.bytes is not None:
            send = _counting(send, allowance.bytes, self.clock)
        await self.app(scope, receive, send)


class _Seen:
    """A `send` that remembers the status and the bytes of the response."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.status = 0
        self.bytes = 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        elif message["type"] == "http.response.body":
            self.bytes += len(message.get("body", b""))
        await self.send(message)


def _log_request(scope: Scope, seen: _Seen, seconds: float) -> None:
    if not requests_log.isEnabledFor(logging.INFO):
        return
    requests_log.info("request", extra={"request": {
        "peer": (scope.get("client") or ("-",))[0], "connection": connection_of(scope) or "-",
        "principal": principal(scope.get("user")) or "-", "method": scope.get("method", "-"),
        "path": scope.get("path", "-"), "status": seen.status, "bytes": seen.bytes,
        "ms": round(seconds * 1000, 1)}})


def _counting(send: Send, bucket: _Bucket, clock: Callable[[], float]) -> Send:
    async def counted(message: Message) -> None:
        if message["type"] == "http.response.body":
            bucket.refill(clock())
            bucket.level -= len(message.get("body", b""))
        await send(message)

    return counted


async def refuse(send: Send, status: int, code: int, message: str, *, limit: str | None = None,
                 retry: float | None = None) -> None:
    """Answer with `status` and the JSON-RPC error `code`."""
    error: dict[str, Any] = {"code": code, "message": message}
    headers: list[tuple[bytes, bytes]] = []
    if limit is not None and retry is not None:
        seconds = max(1, math.ceil(retry))
        error["data"] = {"limit": limit, "retryAfter": seconds}
        headers.append((b"retry-after", str(seconds).encode()))
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    await _answer(send, status, body, headers)


async def _answer(send: Send, status: int, body: bytes,
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _peer(scope: Scope) -> str:
    client = scope.get("client")
    return peer_group(str(client[0])) if client else "unknown"
