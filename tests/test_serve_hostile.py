"""Hostile clients of every kind at once beside authenticated ones, on this machine's loopback
for a few seconds: the authenticated reads all succeed within a generous bound, and the audit
holds their rows and a bounded number of refusals."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from skillindex.api import SkillIndex
from tests.serving import serving
from tests.test_serve_connections import team_cli
from tests.test_serve_gates import READ_HEADERS, read_request
from tests.test_serve_http import PDF_TEXT, read_text

ATTACK_SECONDS = 4.0
# A correctness bound, not a speed target: on a shared machine an authenticated read waits
# behind the attack's work, but never for a timeout's length.
P99_BOUND = 2.0
REFUSALS_PER_MINUTE = 3
SETTINGS = ("header_timeout = 1\nbody_timeout = 1\nmax_connections_per_peer = 32\n"
            "peer_requests_per_second = 20\nrequests_per_second = 0\n"
            f"refusals_per_minute = {REFUSALS_PER_MINUTE}\n")


class Attack:
    """The hostile clients, each kind from an address of its own (127.0.0.2 and up)."""

    def __init__(self, port: int, until: float) -> None:
        self.port = port
        self.until = until
        self.url = f"http://127.0.0.1:{port}/mcp"

    def going(self) -> bool:
        return time.monotonic() < self.until

    async def connect(self, source: str) -> anyio.abc.SocketStream:
        return await anyio.connect_tcp("127.0.0.1", self.port, local_host=source)

    async def slow_headers(self, source: str) -> None:
        """Connections that send a request's headers a byte at a time."""
        async def one() -> None:
            while self.going():
                try:
                    async with await self.connect(source) as stream:
                        for byte in b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" * 4:
                            await stream.send(bytes([byte]))
                            await anyio.sleep(0.2)
                            if not self.going():
                                return
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await anyio.sleep(0.1)

        async with anyio.create_task_group() as group:
            for _ in range(40):
                group.start_soon(one)

    async def slow_bodies(self, source: str) -> None:
        """Requests whose headers are whole and whose body trickles in."""
        async def one() -> None:
            body = json.dumps(read_request()).encode()
            head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                    f"\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            while self.going():
                try:
                    async with await self.connect(source) as stream:
                        await stream.send(head)
                        for byte in body:
                            await stream.send(bytes([byte]))
                            await anyio.sleep(0.2)
                            if not self.going():
                                return
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await anyio.sleep(0.1)

        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(one)

    async def idle_connections(self, source: str) -> None:
        """Many connections that send nothing at all."""
        streams = []
        with anyio.move_on_after(max(0.0, self.until - time.monotonic())):
            for _ in range(200):
                try:
                    streams.append(await self.connect(source))
                except OSError:
                    await anyio.sleep(0.05)
            await anyio.sleep(ATTACK_SECONDS)
        for stream in streams:
            await stream.aclose()

    async def posts(self, source: str, body: Callable[[], bytes],
                    token: Callable[[], str | None]) -> None:
        """Whole requests, as fast as one client sends them."""
        transport = httpx2.AsyncHTTPTransport(local_address=source)
        async with httpx2.AsyncClient(transport=transport, timeout=30) as web:
            while self.going():
                headers = dict(READ_HEADERS)
                given = token()
                if given is not None:
                    headers["Authorization"] = f"Bearer {given}"
                answer = await web.post(self.url, content=body(), headers=headers)
                assert answer.status_code < 500, answer.text
                answer.json()  # every refusal is a JSON-RPC error


def test_authenticated_clients_are_served_beside_every_kind_of_hostile_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = team_cli(tmp_path, monkeypatch, SETTINGS)
    latencies: list[float] = []
    errors: list[BaseException] = []

    async def reader(url: str, number: int, deadline: float) -> None:
        async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                       timeout=30) as web,
                    Client(streamable_http_client(url, http_client=web), mode="2026-07-28",
                           client_info=Implementation(name=f"reader-{number}", version="1"))
                    as client):
            while time.monotonic() < deadline:
                started = time.monotonic()
                try:
                    assert await read_text(client) == PDF_TEXT
                except Exception as exc:  # counted: the bound is zero errors
                    errors.append(exc)
                latencies.append(time.monotonic() - started)
                await anyio.sleep(0.02)

    batch = json.dumps([read_request(n) for n in range(2000)]).encode()
    nested = b"[" * 5000
    single = json.dumps(read_request()).encode()

    async def test(port: int) -> None:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + ATTACK_SECONDS
        attack = Attack(port, deadline)
        kinds: list[Callable[[], Coroutine[Any, Any, None]]] = [
            lambda: attack.slow_headers("127.0.0.2"),
            lambda: attack.slow_bodies("127.0.0.3"),
            lambda: attack.idle_connections("127.0.0.4"),
            lambda: attack.posts("127.0.0.5", lambda: batch, lambda: None),
            lambda: attack.posts("127.0.0.6", lambda: nested, lambda: None),
            lambda: attack.posts("127.0.0.7", lambda: single,
                                 lambda: secrets.token_urlsafe(24)),
            lambda: attack.posts("127.0.0.8", lambda: single, lambda: None),
        ]
        async with anyio.create_task_group() as group:
            for kind in kinds:
                group.start_soon(kind)
            for number in range(4):
                group.start_soon(reader, url, number, deadline)

    with serving(tmp_path, "--tokens", "tokens.json", log=tmp_path / "server.log") as port:
        anyio.run(test, port)
    assert errors == []
    assert len(latencies) >= 10
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    assert p99 < P99_BOUND, f"p99 {p99:.3f} s over {len(latencies)} reads"
    with SkillIndex.open() as index:
        events = index.audit()
    ok = [event for event in events if event.outcome == "ok"]
    refused = [event for event in events if event.outcome == "refused"]
    assert len(ok) == len(latencies)
    # Two peers asked reads without a valid token: each has at most its rows of a minute.
    # Two peers asked reads without a valid token: each has its rows of a minute, and one
    # summary of the rest, written as the server stopped.
    assert len(refused) <= 2 * (REFUSALS_PER_MINUTE + 1)
    assert any(str(event.reason).endswith("refused requests from 127.0.0.8 in the last minute")
               for event in refused)
