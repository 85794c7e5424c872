"""The gates of `serve --http` in their order, against hostile requests over a real socket:
bounds on the body, the limit per peer before authentication, at most one audit row for a
refused request, server-drawn connection ids, the Origin allowlist, health."""

from __future__ import annotations

import json
import secrets
import sqlite3
from typing import Any

import anyio
import httpx2
import pytest

from skillindex.config import ServeLimits
from skillindex.serve.gates import INVALID_REQUEST, PARSE_ERROR, RATE_LIMITED
from skillindex.serve.listen import plan
from skillindex.store.engine import sqlite_path
from tests.test_serve_http import (
    MODERN,
    MODERN_HEADERS,
    PDF,
    FrozenClock,
    Issuer,
    Team,
    connect,
    introspected,
    read_text,
    run,
    team,
)

__all__ = ["team"]  # the fixture, shared with test_serve_http


@pytest.fixture
def db_backend() -> str:
    return "sqlite"  # the gates run before the store; the audited read is tested elsewhere


def read_request(number: int = 1, uri: str = PDF, client: str = "raw") -> dict[str, Any]:
    """A 2026-07-28 `resources/read`, as one POST carries it."""
    return {"jsonrpc": "2.0", "id": number, "method": "resources/read", "params": {
        "uri": uri, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                              "io.modelcontextprotocol/clientInfo": {"name": client,
                                                                     "version": "1"},
                              "io.modelcontextprotocol/clientCapabilities": {}}}}


READ_HEADERS = {**MODERN_HEADERS, "Mcp-Method": "resources/read", "Mcp-Name": PDF,
                "Content-Type": "application/json"}


async def post(url: str, body: bytes, token: str | None = None,
               headers: dict[str, str] | None = None) -> httpx2.Response:
    sent = {**READ_HEADERS, **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=60) as web:
        return await web.post(url, content=body, headers=sent)


# Bounds on a request's body, before any audit.

def test_a_batch_of_fifteen_thousand_reads_without_a_token_writes_at_most_one_row(
        team: Team) -> None:
    team.token("alice")
    batch = json.dumps([read_request(n) for n in range(15_000)]).encode()

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen:
            answer = await post(listen.url, batch)
            assert answer.status_code in (400, 413), answer.text
            assert answer.json()["error"]["code"] == INVALID_REQUEST

    run(test)
    assert len(team.index.audit()) <= 1


@pytest.mark.parametrize("token", [None, "alice"], ids=["no-token", "token"])
def test_a_batch_is_refused_as_the_sdk_refuses_it(team: Team, token: str | None) -> None:
    secret = team.token("alice")
    batch = json.dumps([read_request(n) for n in range(100)]).encode()

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen:
            answer = await post(listen.url, batch, secret if token else None)
            assert answer.status_code == 400
            assert answer.json()["error"]["code"] == INVALID_REQUEST
            assert "batch" in answer.json()["error"]["message"]

    run(test)
    assert team.index.audit() == []


@pytest.mark.parametrize("body", [b"[" * 5000, b'{"a":' * 5000, b"[" * 100 + b"]" * 100],
                         ids=["open-brackets", "open-objects", "too-deep"])
@pytest.mark.parametrize("token", [None, "alice"], ids=["no-token", "token"])
def test_nesting_is_a_parse_error_never_a_500(team: Team, body: bytes,
                                              token: str | None) -> None:
    secret = team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen:
            answer = await post(listen.url, body, secret if token else None)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["code"] == PARSE_ERROR

    run(test)
    assert team.index.audit() == []


def test_a_body_over_the_bound_is_413(team: Team) -> None:
    team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file,
                                limits=ServeLimits(max_body_bytes=4096)) as listen:
            padded = read_request()
            padded["params"]["padding"] = "x" * 5000
            answer = await post(listen.url, json.dumps(padded).encode())
            assert answer.status_code == 413
            assert answer.json()["error"]["code"] == INVALID_REQUEST

    run(test)
    assert team.index.audit() == []


# Refusals in the audit: one row each, then one that counts the rest.

def test_refusals_past_the_threshold_are_one_summary_row_a_minute(team: Team) -> None:
    team.token("alice")
    clock = FrozenClock()

    async def test() -> None:
        async with team.serving(tokens=team.token_file, clock=clock, limits=ServeLimits(
                refusals_per_minute=3, peer_requests_per_second=None)) as listen:
            for number in range(10):
                answer = await post(listen.url, json.dumps(read_request(number)).encode())
                assert answer.status_code == 401
            assert len(team.index.audit()) == 3
            clock.now += 61
            await post(listen.url, json.dumps(read_request()).encode())

    run(test)
    events = team.index.audit()
    assert [event.outcome for event in events] == ["refused"] * 5
    assert [event.reason for event in events[3:]] == [
        "7 refused requests from 127.0.0.1 in the last minute",
        "resources/read without a valid token"]
    assert events[3].session == "mcp:refused/127.0.0.1"


# The limit per peer comes before the identity provider is asked.

def test_random_tokens_from_one_peer_ask_the_identity_provider_at_most_its_limit(
        team: Team) -> None:
    issuer = Issuer({})
    statuses: list[int] = []

    async def test() -> None:
        async with issuer.running() as url, team.serving(
                clock=FrozenClock(), limits=ServeLimits(peer_requests_per_second=5),
                **introspected(team, issuer, url)) as listen, httpx2.AsyncClient() as web:
            for _ in range(60):
                answer = await web.post(listen.url, json=read_request(), headers={
                    **READ_HEADERS, "Authorization": f"Bearer {secrets.token_hex(16)}"})
                statuses.append(answer.status_code)

    run(test)
    assert statuses.count(401) == 5 and statuses.count(429) == 55
    assert len(issuer.asked) <= 5


@pytest.mark.parametrize(("claims", "principal"), [
    ({"sub": "alice"}, "alice"),
    ({"client_id": "alice"}, "client:alice"),
    ({"username": "alice", "client_id": "cli"}, "user:alice"),
    ({"sub": "client:alice"}, "sub:client:alice"),
], ids=["subject", "client-credentials", "username", "subject-like-a-client"])
def test_introspected_principals_keep_their_source(team: Team, claims: dict[str, str],
                                                   principal: str) -> None:
    issuer = Issuer({})

    async def test() -> None:
        async with issuer.running() as url, team.serving(
                **introspected(team, issuer, url)) as listen:
            issuer.active = {"good": {**claims, "aud": listen.url}}
            async with connect(listen.url, "good") as client:
                await read_text(client)

    run(test)
    assert [event.principal for event in team.index.audit()] == [principal]


# Who names the connection, and which origins are answered.

def test_the_audit_connection_is_the_servers_never_the_clients_header(team: Team) -> None:
    token = team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen:
            body = json.dumps(read_request()).encode()
            for headers in ({"Mcp-Session-Id": "victim"}, {"Mcp-Session-Id": "victim"}, {},
                            {}):
                answer = await post(listen.url, body, token, headers)
                assert answer.status_code == 200, answer.text

    run(test)
    sessions = [event.session for event in team.index.audit()]
    assert len(sessions) == 4
    assert not any("victim" in str(session) for session in sessions)
    assert len(set(sessions)) == 4  # four connections, four ids, none shared


@pytest.mark.parametrize(("own_port", "status"), [(True, 200), (False, 403)],
                         ids=["own-port", "foreign-local-port"])
def test_a_foreign_local_origin_is_refused(team: Team, own_port: bool, status: int) -> None:
    token = team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen:
            port = listen.port if own_port else (listen.port % 60000) + 1
            answer = await post(listen.url, json.dumps(read_request()).encode(), token,
                                {"Origin": f"http://localhost:{port}"})
            assert answer.status_code == status, answer.text

    run(test)


def test_origins_are_the_url_and_this_servers_own_port() -> None:
    listen = plan("127.0.0.1", 8765, url="https://skills.example.com/mcp", tokens=None,
                  insecure_no_auth=True)
    assert listen.allowed_origins == ["http://127.0.0.1:8765", "http://[::1]:8765",
                                      "http://localhost:8765", "https://skills.example.com"]


# Health.

def test_health_and_readiness_need_no_token_and_write_no_audit(team: Team) -> None:
    team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen, httpx2.AsyncClient() as web:
            base = listen.url.removesuffix("/mcp")
            for path in ("/healthz", "/readyz"):
                answer = await web.get(base + path)
                assert (answer.status_code, answer.json()) == (200, {"status": "ok"})

    run(test)
    assert team.index.audit() == []


def test_readiness_is_503_while_the_audit_cannot_be_written(team: Team, db_url: str) -> None:
    team.token("alice")
    database = sqlite_path(db_url)
    assert database is not None

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen, httpx2.AsyncClient(
                timeout=60) as web:
            base = listen.url.removesuffix("/mcp")
            holder = sqlite3.connect(database, isolation_level=None)
            holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
            try:
                answer = await web.get(base + "/readyz")
                assert answer.status_code == 503
                assert answer.json()["status"] == "unavailable"
                assert (await web.get(base + "/healthz")).status_code == 200
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            while (await web.get(base + "/readyz")).status_code != 200:
                await anyio.sleep(0.2)  # the abandoned check ends; the next one passes

    run(test)
    assert team.index.audit() == []


def test_a_known_token_meets_its_principals_limits_not_its_peers(team: Team) -> None:
    token = team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file, clock=FrozenClock(),
                                limits=ServeLimits(peer_requests_per_second=1)) as listen:
            body = json.dumps(read_request()).encode()
            for _ in range(5):  # a team behind one address is not one peer
                assert (await post(listen.url, body, token)).status_code == 200
            assert (await post(listen.url, body)).status_code == 401
            assert (await post(listen.url, body, "not-a-token")).status_code == 429

    run(test)


def test_a_limited_peer_gets_a_json_rpc_429(team: Team) -> None:
    team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file, clock=FrozenClock(),
                                limits=ServeLimits(peer_requests_per_second=1)) as listen:
            body = json.dumps(read_request()).encode()
            assert (await post(listen.url, body)).status_code == 401
            limited = await post(listen.url, body)
            assert limited.status_code == 429
            assert limited.headers["retry-after"] == "1"
            assert limited.json()["error"]["code"] == RATE_LIMITED
            assert limited.json()["error"]["data"]["limit"] == "peer_requests_per_second"

    anyio.run(test)


@pytest.mark.parametrize("request_bytes", [
    b"NOT HTTP AT ALL\r\n\r\n", b"GET /mcp HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n"],
    ids=["garbage", "bad-header"])
def test_what_is_not_http_is_a_json_rpc_400(team: Team, request_bytes: bytes,
                                            caplog: pytest.LogCaptureFixture) -> None:
    team.token("alice")
    answers: list[bytes] = []

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen:
            for _ in range(5):
                async with await anyio.connect_tcp("127.0.0.1", listen.port) as stream:
                    await stream.send(request_bytes)
                    received = b""
                    try:
                        while chunk := await stream.receive():
                            received += chunk
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        pass
                    answers.append(received)

    run(test)
    for answer in answers:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ")
        assert json.loads(body)["error"]["code"] == -32000
    # Any client can send these at will: the log says so once, not once each.
    noted = [r for r in caplog.records if "not HTTP" in r.getMessage()
             or "Invalid HTTP" in r.getMessage()]
    assert len(noted) == 1
