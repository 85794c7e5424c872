"""Limits per principal on the HTTP server: requests a second and response bytes a minute."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skillindex.config import ServeLimits
from skillindex.serve.auth import principal

# The JSON-RPC error a refused request gets, in the range the specification leaves to servers.
RATE_LIMITED = -32000
_PRUNE_EVERY = 1024
MAX_BODY = 4 << 20  # the SDK's own bound on a request body


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


Unauthenticated = Callable[[bytes, str], Awaitable[None]]


class Gate:
    """ASGI middleware placed after authentication: each principal (each peer address, for a
    request without one) has its own buckets, so one that asks too much is answered 429 and
    the others are served as before.

    A request is refused when its principal has used its requests for this second, or has
    been sent more than `bytes_per_minute` response bytes over the last minute (what a
    response sends counts once it is sent, so one response may take the balance below zero:
    the next requests wait until it refills). `unauthenticated`, when given, sees the body of
    each POST to the MCP endpoint that carries no valid token, before the SDK refuses it.
    """

    def __init__(self, app: ASGIApp, *, limits: ServeLimits, path: str,
                 unauthenticated: Unauthenticated | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.limits = limits
        self.path = path
        self.unauthenticated = unauthenticated
        self.clock = clock
        self._allowances: dict[tuple[str, str], _Allowance] = {}
        self._calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        name = principal(scope.get("user"))
        key = ("principal", name) if name is not None else ("peer", _peer(scope))
        allowance = self._allowance(key)
        wait, limit = self._admit(allowance)
        if wait > 0:
            await _refuse(send, wait, limit, name or _peer(scope))
            return
        if name is None and self.unauthenticated is not None and scope.get("path") == (
                self.path) and scope.get("method") == "POST":
            receive = await self._seen(scope, receive)
        if allowance.bytes is not None:
            send = _counting(send, allowance.bytes, self.clock)
        await self.app(scope, receive, send)

    def _allowance(self, key: tuple[str, str]) -> _Allowance:
        allowance = self._allowances.get(key)
        if allowance is None:
            self._calls += 1
            if self._calls % _PRUNE_EVERY == 0:
                self._prune()
            now = self.clock()
            rps, per_minute = self.limits.requests_per_second, self.limits.bytes_per_minute
            allowance = self._allowances[key] = _Allowance(
                None if rps is None else _Bucket(max(1.0, rps), rps, max(1.0, rps), now),
                None if per_minute is None else _Bucket(per_minute, per_minute / 60,
                                                        per_minute, now))
        return allowance

    def _admit(self, allowance: _Allowance) -> tuple[float, str]:
        """Seconds to wait before this principal is served again (0: now), and which limit."""
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
        """Forget principals whose buckets are full again: they would start afresh the same."""
        now = self.clock()
        self._allowances = {
            key: allowance for key, allowance in self._allowances.items()
            if any(bucket is not None and bucket.refill(now) < bucket.capacity
                   for bucket in (allowance.requests, allowance.bytes))}

    async def _seen(self, scope: Scope, receive: Receive) -> Receive:
        """Hand the body to `unauthenticated`, then replay it to the application."""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > MAX_BODY or not message.get("more_body", False):
                break
        if size <= MAX_BODY and self.unauthenticated is not None:
            body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
            await self.unauthenticated(body, _peer(scope))

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        return replay


def _counting(send: Send, bucket: _Bucket, clock: Callable[[], float]) -> Send:
    async def counted(message: Message) -> None:
        if message["type"] == "http.response.body":
            bucket.refill(clock())
            bucket.level -= len(message.get("body", b""))
        await send(message)

    return counted


async def _refuse(send: Send, wait: float, limit: str, who: str) -> None:
    seconds = max(1, math.ceil(wait))
    what = ("requests a second" if limit == "requests_per_second" else
            "response bytes a minute")
    error: dict[str, Any] = {
        "code": RATE_LIMITED,
        "message": f"rate limited: {who} has used its {what}; retry in {seconds} s",
        "data": {"limit": limit, "retryAfter": seconds}}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(seconds).encode())]})
    await send({"type": "http.response.body", "body": body})


def _peer(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"
