"""`serve --http` for a team: bearer tokens, the guards on Host and Origin, limits per
principal, TLS and token introspection, each driven by the MCP SDK's own client over a real
socket on this machine."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from click.testing import CliRunner
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation, TextResourceContents
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import ServeLimits, is_loopback
from skillindex.serve import http, tokens
from skillindex.serve.gates import RATE_LIMITED
from skillindex.serve.listen import Introspect, Listen, plan
from skillindex.serve.mcp import create_server
from tests.conftest import isolate_cli, root_settings, write_skill
from tests.serving import serving

PDF = "skill://pdf/SKILL.md"
BIG = "skill://pdf/big.md"
MODERN = "2026-07-28"  # one POST per request: what a refused read looks like on the wire
BIG_TEXT = "x" * 3000 + "\n"
PDF_TEXT = "---\nname: pdf\ndescription: Does a thing.\n---\n# PDF\n"  # SKILL.md, whole


@pytest.fixture
def db_backend() -> str:
    return "sqlite"  # the audited read path is tested on both backends elsewhere


@dataclass
class Team:
    """An indexed skill tree, a token file, and the servers started over it."""

    tmp: Path
    index: SkillIndex
    token_file: Path
    issued: dict[str, str] = field(default_factory=dict)

    def token(self, principal: str) -> str:
        if principal not in self.issued:
            self.issued[principal] = tokens.add(self.token_file, principal)[0]
        return self.issued[principal]

    @asynccontextmanager
    async def serving(self, *, host: str = "127.0.0.1", clock: Callable[[], float] | None = None,
                      **options: Any) -> AsyncIterator[Listen]:
        """A server on a free port of this machine, as `serve --http` runs it."""
        sock = socket.create_server((host, 0))
        listen = plan(host, sock.getsockname()[1], **options)
        server = create_server(self.index, poll_seconds=60,
                               authentication=http.authentication(listen))
        runner = uvicorn.Server(http.config(server, listen, clock=clock or time.monotonic))
        async with anyio.create_task_group() as group:
            group.start_soon(runner.serve, [sock])
            with anyio.fail_after(60):
                while not runner.started:
                    await anyio.sleep(0.02)
            try:
                yield listen
            finally:
                runner.should_exit = True


@pytest.fixture
def team(tmp_path: Path, db_url: str) -> Iterator[Team]:
    root = tmp_path / "skills"
    skill = write_skill(root, "pdf", body="# PDF\n")
    (skill / "big.md").write_text(BIG_TEXT)
    index = SkillIndex.open(root_settings(root), db=db_url)
    index.reindex()
    yield Team(tmp_path, index, tmp_path / "tokens.json")
    index.close()


@asynccontextmanager
async def connect(url: str, token: str | None = None, *, name: str = "team-host",
                  mode: str = MODERN, verify: Any = True) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, sending `token` as its bearer token."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (httpx2.AsyncClient(headers=headers, verify=verify) as web,
                Client(streamable_http_client(url, http_client=web), mode=mode,
                       client_info=Implementation(name=name, version="1")) as client):
        yield client


async def read_text(client: Client, uri: str = PDF) -> str:
    (content,) = (await client.read_resource(uri)).contents
    assert isinstance(content, TextResourceContents)
    return content.text


def run(test: Callable[[], Any]) -> None:
    anyio.run(test)


# Authentication.

@pytest.mark.parametrize("token", [None, "skillindex_not-a-token", "Bearer"],
                         ids=["no-token", "unknown-token", "odd-token"])
def test_a_client_without_a_valid_token_reads_nothing_and_is_audited_as_refused(
        team: Team, token: str | None) -> None:
    team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen:
            async with connect(listen.url, token, name="intruder") as client:
                with pytest.raises(MCPError):
                    await client.read_resource(PDF)
            # A client that starts with the handshake gets no further than that.
            with pytest.raises(BaseExceptionGroup) as caught:
                async with connect(listen.url, token, mode="legacy") as client:
                    await client.read_resource(PDF)
            assert caught.group_contains(MCPError)

    run(test)
    (event,) = team.index.audit()
    assert (event.outcome, event.event, event.skill, event.resource, event.bytes) == (
        "refused", "resource.read", "pdf", "SKILL.md", 0)
    assert event.reason == "resources/read without a valid token"
    assert (event.session, event.principal) == ("mcp:intruder/127.0.0.1", None)


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_with_a_token_a_client_reads_as_before(team: Team, mode: str) -> None:
    token = team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen, connect(
                listen.url, token, name="alice-laptop", mode=mode) as client:
            assert await read_text(client) == PDF_TEXT
            await client.call_tool("load_skill", {"name": "pdf"})
            await client.call_tool("read_skill_file", {"uri": BIG})

    run(test)
    events = team.index.audit()
    assert [(e.event, e.outcome, e.principal) for e in events] == [
        ("resource.read", "ok", "alice"), ("skill.read", "ok", "alice"),
        ("resource.read", "ok", "alice")]
    assert events[0].bytes == len(PDF_TEXT)
    # The client's own name is kept beside the principal, escaped and bounded.
    assert all(str(e.session).startswith("mcp:alice-laptop/") for e in events)


def test_a_refusal_names_the_protected_resource_metadata(team: Team) -> None:
    team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen, httpx2.AsyncClient() as web:
            refused = await web.post(listen.url, json={"jsonrpc": "2.0", "id": 1,
                                                       "method": "ping"})
            assert refused.status_code == 401
            challenge = refused.headers["www-authenticate"]
            assert challenge.startswith('Bearer error="invalid_token"')
            metadata_url = challenge.split('resource_metadata="')[1].rstrip('"')
            assert metadata_url.endswith("/.well-known/oauth-protected-resource/mcp")
            metadata = (await web.get(metadata_url)).json()
            assert metadata["resource"] == listen.url
            assert metadata["bearer_methods_supported"] == ["header"]
            # The operator hands out the tokens: no OAuth flow could get one, none is named.
            assert "authorization_servers" not in metadata
            base = listen.url.removesuffix("/mcp")
            for well_known in ("oauth-authorization-server", "openid-configuration"):
                assert (await web.get(f"{base}/.well-known/{well_known}")).status_code == 404

    run(test)


def test_a_token_removed_while_serving_is_refused_from_the_next_request(team: Team) -> None:
    token = team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file) as listen, connect(
                listen.url, token) as client:
            assert await read_text(client) == PDF_TEXT
            tokens.remove(team.token_file, "alice")
            with pytest.raises(MCPError):
                await client.read_resource(PDF)

    run(test)
    assert [event.outcome for event in team.index.audit()] == ["ok", "refused"]


# Who may connect, and from where.

@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "skills.example.com"])
def test_serving_off_this_machine_without_auth_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    write_skill(tmp_path / "skills", "pdf")
    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    address = f"[{host}]:8765" if ":" in host else f"{host}:8765"
    done = CliRunner().invoke(cli, ["serve", "--http", address])
    assert done.exit_code == 4
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"skillindex: error: refusing to serve {address} without "
                           "authentication: anyone who can reach it could read every skill")


def test_a_public_url_in_front_of_loopback_needs_auth_too() -> None:
    from skillindex.errors import RefusedError

    with pytest.raises(RefusedError, match=r"refusing to serve https://skills\.example\.com/mcp"):
        plan("127.0.0.1", 8765, url="https://skills.example.com/mcp")
    assert plan("127.0.0.1", 8765, url="https://skills.example.com/mcp",
                insecure_no_auth=True).url == "https://skills.example.com/mcp"
    assert plan("127.0.0.1", 8765, url="http://localhost:9000/mcp").url == (
        "http://localhost:9000/mcp")


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.1", False), ("myhost", False)])
def test_only_loopback_addresses_count_as_this_machine(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(("argv", "message"), [
    (["--url", "https://x/mcp"], "--url is for HTTP: give --http HOST:PORT too"),
    (["--tokens", "t.json"], "--tokens is for HTTP: give --http HOST:PORT too"),
    (["--http", "0.0.0.0:8765", "--insecure-no-auth"],
     "serving on every interface needs --url, the address clients use"),
    (["--http", "8765", "--tokens", "t.json", "--introspect", "https://idp/introspect"],
     "give --tokens or --introspect, not both"),
    (["--http", "8765", "--tls-cert", "cert.pem"], "TLS needs both --tls-cert and --tls-key"),
    (["--http", "8765", "--introspect", "https://idp/introspect", "--client-id", "skillindex"],
     "--client-id needs its secret in SKILLINDEX_CLIENT_SECRET"),
], ids=["url-alone", "tokens-alone", "any-without-url", "two-verifiers", "half-tls",
        "id-without-secret"])
def test_options_that_cannot_serve_are_usage_errors(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    argv: list[str], message: str) -> None:
    write_skill(tmp_path / "skills", "pdf")
    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    done = CliRunner().invoke(cli, ["serve", *argv])
    assert done.exit_code == 2, done.output
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"skillindex: error: {message}")


def test_insecure_no_auth_serves_off_loopback_when_told_to() -> None:
    listen = plan("0.0.0.0", 8765, url="http://skills.internal:8765/mcp",
                  insecure_no_auth=True)
    assert not listen.authenticated
    assert "skills.internal:8765" in listen.allowed_hosts


MODERN_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {}}}}
# What a 2026-07-28 client sends beside that body.
MODERN_HEADERS = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list",
                  "Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 200),
    ({"Origin": "http://evil.example"}, 403),
    ({"Host": "evil.example"}, 421),
    ({"Host": "evil.example:80"}, 421),
], ids=["own", "foreign-origin", "foreign-host", "foreign-host-port"])
@pytest.mark.parametrize("authenticated", [True, False], ids=["tokens", "loopback-no-auth"])
def test_dns_rebinding_is_refused(team: Team, headers: dict[str, str], status: int,
                                  authenticated: bool) -> None:
    token = team.token("alice")
    options: dict[str, Any] = {"tokens": team.token_file} if authenticated else {}

    async def test() -> None:
        async with team.serving(**options) as listen, httpx2.AsyncClient() as web:
            answer = await web.post(listen.url, json=MODERN_LIST, headers={
                "Authorization": f"Bearer {token}", **MODERN_HEADERS, **headers})
            assert answer.status_code == status, answer.text

    run(test)


@pytest.mark.parametrize(("host", "status"), [
    ("skills.example.com", 200), ("skills.example.com:443", 200), ("evil.example", 421)])
def test_behind_a_proxy_the_public_host_is_answered_and_no_other(team: Team, host: str,
                                                                  status: int) -> None:
    token = team.token("alice")

    async def test() -> None:
        async with team.serving(host="0.0.0.0", url="https://skills.example.com/mcp",
                                tokens=team.token_file) as listen, httpx2.AsyncClient() as web:
            answer = await web.post(f"http://127.0.0.1:{listen.port}/mcp", json=MODERN_LIST,
                                    headers={"Authorization": f"Bearer {token}", "Host": host,
                                             **MODERN_HEADERS})
            assert answer.status_code == status, answer.text

    run(test)


# Limits per principal.

class FrozenClock:
    """Time that moves only when the test says: no bucket refills behind its back."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_noisy_client_cannot_starve_another(team: Team) -> None:
    noisy, quiet = team.token("noisy"), team.token("quiet")
    clock = FrozenClock()
    outcomes: dict[str, list[str]] = {"noisy": [], "quiet": []}

    async def reader(url: str, token: str, who: str, count: int) -> None:
        async with connect(url, token, name=who) as client:
            async def one() -> None:
                try:
                    outcomes[who].append(await read_text(client))
                except MCPError as exc:
                    assert exc.error.code == RATE_LIMITED
                    assert exc.error.data["limit"] == "requests_per_second"
                    outcomes[who].append("limited")

            async with anyio.create_task_group() as group:
                for _ in range(count):
                    group.start_soon(one)

    async def test() -> None:
        async with team.serving(tokens=team.token_file, clock=clock,
                                limits=ServeLimits(requests_per_second=5,
                                                   bytes_per_minute=None,
                                                   peer_requests_per_second=None)) as listen, \
                anyio.create_task_group() as group:
            group.start_soon(reader, listen.url, noisy, "noisy", 60)
            group.start_soon(reader, listen.url, quiet, "quiet", 5)

    run(test)
    assert outcomes["quiet"] == [PDF_TEXT] * 5
    assert sorted(outcomes["noisy"]) == [PDF_TEXT] * 5 + ["limited"] * 55


def test_a_principal_over_its_bytes_a_minute_waits_and_the_others_do_not(team: Team) -> None:
    heavy, light = team.token("heavy"), team.token("light")
    clock = FrozenClock()

    async def test() -> None:
        async with team.serving(tokens=team.token_file, clock=clock,
                                limits=ServeLimits(requests_per_second=None,
                                                   bytes_per_minute=2000)) as listen:
            async with connect(listen.url, heavy) as client:
                assert await read_text(client, BIG) == BIG_TEXT  # sent whole, balance below 0
                with pytest.raises(MCPError) as refused:
                    await read_text(client)
                assert refused.value.error.code == RATE_LIMITED
                assert refused.value.error.data["limit"] == "bytes_per_minute"
                assert "heavy has used its response bytes a minute" in (
                    refused.value.error.message)
            async with connect(listen.url, light) as client:
                assert await read_text(client) == PDF_TEXT
            clock.now += 120  # two minutes later the balance is full again
            async with connect(listen.url, heavy) as client:
                assert await read_text(client) == PDF_TEXT

    run(test)


def test_a_limited_request_is_answered_429_with_retry_after(team: Team) -> None:
    token = team.token("alice")

    async def test() -> None:
        async with team.serving(tokens=team.token_file, clock=FrozenClock(),
                                limits=ServeLimits(requests_per_second=1)) as listen, \
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as web:
            first = await web.get(listen.url)
            assert first.status_code != 429
            limited = await web.get(listen.url)
            assert limited.status_code == 429
            assert limited.headers["retry-after"] == "1"
            assert limited.json()["error"]["code"] == RATE_LIMITED

    run(test)


# TLS.

def self_signed(directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_over_tls_with_a_certificate_and_key(team: Team) -> None:
    import ssl

    cert, key = self_signed(team.tmp)
    token = team.token("alice")
    trust = ssl.create_default_context(cafile=str(cert))

    async def test() -> None:
        async with team.serving(tokens=team.token_file, cert=cert, key=key) as listen:
            assert listen.url.startswith("https://127.0.0.1:")
            async with connect(listen.url, token, verify=trust) as client:
                assert await read_text(client) == PDF_TEXT

    run(test)


def test_a_certificate_and_a_key_that_do_not_match_are_one_line(tmp_path: Path) -> None:
    from skillindex.errors import ConfigError

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cert, _ = self_signed(tmp_path / "a")
    _, other_key = self_signed(tmp_path / "b")
    with pytest.raises(ConfigError, match="are not a certificate and its key"):
        plan("127.0.0.1", 8765, cert=cert, key=other_key)
    with pytest.raises(ConfigError, match="cannot read"):
        plan("127.0.0.1", 8765, cert=tmp_path / "missing.pem", key=other_key)


# Introspection (RFC 7662) against a real authorization server on this machine.

@dataclass
class Issuer:
    """A small authorization server: its introspection endpoint knows a few tokens."""

    active: dict[str, dict[str, Any]]
    client: tuple[str, str] = ("skillindex", "s3cret")
    asked: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        async def introspect(request: Request) -> JSONResponse:
            expected = "Basic " + base64.b64encode(":".join(self.client).encode()).decode()
            if request.headers.get("authorization") != expected:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            token = str((await request.form()).get("token"))
            self.asked.append(token)
            claims = self.active.get(token)
            return JSONResponse({"active": False} if claims is None else
                                {"active": True, **claims})

        return Starlette(routes=[Route("/introspect", introspect, methods=["POST"])])

    @asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        sock = socket.create_server(("127.0.0.1", 0))
        runner = uvicorn.Server(uvicorn.Config(self.app(), log_level="warning"))
        async with anyio.create_task_group() as group:
            group.start_soon(runner.serve, [sock])
            while not runner.started:
                await anyio.sleep(0.02)
            try:
                yield f"http://127.0.0.1:{sock.getsockname()[1]}"
            finally:
                runner.should_exit = True


def introspected(team: Team, issuer: Issuer, url: str, *,
                 secret: str = "s3cret") -> dict[str, Any]:
    return {"introspect": Introspect(endpoint=f"{url}/introspect", issuer=url,
                                     client_id="skillindex", client_secret=secret)}


def test_introspection_admits_an_active_token_issued_for_this_server(team: Team) -> None:
    issuer = Issuer({})

    async def test() -> None:
        async with issuer.running() as url, team.serving(
                **introspected(team, issuer, url)) as listen:
            issuer.active = {
                "good": {"sub": "alice@example.com", "client_id": "cli", "aud": listen.url,
                         "iss": url, "scope": "skills:read", "exp": int(time.time()) + 600},
                "elsewhere": {"sub": "bob", "aud": "https://other.example/mcp"},
                "expired": {"sub": "carol", "aud": listen.url, "exp": int(time.time()) - 5},
                "forged-issuer": {"sub": "dave", "aud": listen.url, "iss": "https://evil"},
            }
            async with connect(listen.url, "good") as client:
                assert await read_text(client) == PDF_TEXT
                assert await read_text(client) == PDF_TEXT
            for token in ("elsewhere", "expired", "forged-issuer", "unknown"):
                async with connect(listen.url, token) as client:
                    with pytest.raises(MCPError):
                        await client.read_resource(PDF)

    run(test)
    assert issuer.asked.count("good") == 1  # the answer is kept for a while
    assert [(event.outcome, event.principal) for event in team.index.audit()] == [
        ("ok", "alice@example.com")] * 2 + [("refused", None)] * 4


def test_introspection_with_wrong_credentials_admits_no_one(team: Team) -> None:
    issuer = Issuer({})

    async def test() -> None:
        async with issuer.running() as url, team.serving(
                **introspected(team, issuer, url, secret="wrong")) as listen:
            issuer.active = {"good": {"sub": "alice", "aud": listen.url}}
            async with connect(listen.url, "good") as client:
                with pytest.raises(MCPError):
                    await client.read_resource(PDF)

    run(test)
    assert issuer.asked == []


# The whole setup as an operator runs it.

def test_a_team_setup_from_the_command_line(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", body="# PDF\n")
    isolate_cli(tmp_path, monkeypatch, root)
    runner = CliRunner()
    assert runner.invoke(cli, ["reindex"], catch_exceptions=False).exit_code == 0
    made = runner.invoke(cli, ["serve", "token", "add", "alice", "--tokens", "tokens.json"],
                         catch_exceptions=False)
    assert made.exit_code == 0
    token = made.stdout.strip()
    assert token.startswith("skillindex_") and token not in (tmp_path / "tokens.json").read_text()

    async def main(url: str) -> None:
        async with connect(url, None, name="stranger") as client:
            with pytest.raises(MCPError):
                await client.read_resource(PDF)
        async with connect(url, token, name="alice-laptop", mode="auto") as client:
            assert await read_text(client) == PDF_TEXT

    with serving(tmp_path, "--tokens", "tokens.json", "--log-format", "json",
                 log=tmp_path / "access.log") as port:
        anyio.run(main, f"http://127.0.0.1:{port}/mcp")
    # The server's own log, a JSON object a line, shows the stranger refused and alice served.
    lines = [json.loads(line) for line in (tmp_path / "access.log").read_text().splitlines()]
    assert lines[0]["message"] == f"serving http://127.0.0.1:{port}/mcp"
    answered = [(line["status"], line["principal"]) for line in lines
                if line.get("method") == "POST" and line.get("path") == "/mcp"]
    assert answered[0] == (401, "-")
    assert {principal for status, principal in answered[1:]} == {"alice"}
    assert all(status == 200 for status, _ in answered[1:])
    listing = runner.invoke(cli, ["audit", "--json"], catch_exceptions=False)
    events = json.loads(listing.stdout)
    assert [(e["outcome"], e["principal"], e["session"].split("/")[0]) for e in events] == [
        ("refused", None, "mcp:stranger"), ("ok", "alice", "mcp:alice-laptop")]
