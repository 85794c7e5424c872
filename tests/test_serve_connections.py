"""`serve --http` as its own process under unfinished requests and a small descriptor limit,
and stopped with SIGTERM while it answers: the bounds on connections, and the drain."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.serve.connections import peer_group
from tests.conftest import isolate_cli, write_skill
from tests.serving import free_port, serving
from tests.test_serve_http import PDF, PDF_TEXT, read_text

HALF_A_HEADER = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"


def team_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: str = "") -> str:
    """An indexed skill, its settings (with `serve` as their [serve] table) and a token."""
    root = tmp_path / "skills"
    write_skill(root, "pdf", body="# PDF\n")
    isolate_cli(tmp_path, monkeypatch, root)
    with open(tmp_path / "config.toml", "a") as config:
        config.write(f"\n[serve]\n{serve}\n")
    runner = CliRunner()
    assert runner.invoke(cli, ["reindex"], catch_exceptions=False).exit_code == 0
    made = runner.invoke(cli, ["serve", "token", "add", "alice", "--tokens", "tokens.json"],
                         catch_exceptions=False)
    return made.stdout.strip()


async def authenticated_read(port: int, token: str) -> str:
    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                   timeout=60) as web,
                Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=web),
                       mode="2026-07-28",
                       client_info=Implementation(name="alice-laptop", version="1")) as client):
        return await read_text(client)


def half_open(port: int, count: int, source: str) -> list[socket.socket]:
    """`count` connections from `source` that send half a request's headers and wait."""
    opened = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=60,
                                        source_address=(source, 0))
        with contextlib.suppress(OSError):  # already answered and closed: refused at the door
            sock.sendall(HALF_A_HEADER)
        opened.append(sock)
    return opened


def answer_then_closed(sock: socket.socket) -> bytes:
    """What the server sent on a connection before it closed it (waits for the close)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    sock.close()
    return received


def test_half_open_connections_under_a_small_descriptor_limit_starve_no_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = team_cli(tmp_path, monkeypatch, "header_timeout = 2")
    log = tmp_path / "server.log"
    with serving(tmp_path, "--tokens", "tokens.json", log=log, files=256) as port:
        attackers = half_open(port, 300, "127.0.0.2")
        # Another address is served while all of them wait.
        assert anyio.run(authenticated_read, port, token) == PDF_TEXT
        # Each one is answered 408 after the header timeout (or 503 at once) and closed.
        answers = [answer_then_closed(sock) for sock in attackers]
        assert {answer.split(b" ", 2)[1] for answer in answers} <= {b"408", b"503"}
        assert sum(answer.startswith(b"HTTP/1.1 408") for answer in answers) == 64
        # Once they are gone, the same address is served again.
        assert anyio.run(authenticated_read, port, token) == PDF_TEXT
    # The log says so in a few lines, not a line an attempt.
    lines = log.read_text().splitlines()
    assert len(lines) < 20, lines
    assert any("refusing connections from 127.0.0.2: 64 are open" in line for line in lines)


def test_out_of_descriptors_every_connection_is_answered_and_the_log_stays_short(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team_cli(tmp_path, monkeypatch, "header_timeout = 2\nmax_connections_per_peer = 0")
    log = tmp_path / "server.log"
    with serving(tmp_path, "--tokens", "tokens.json", "--log-format", "json", log=log,
                 files=80) as port:
        answers = [answer_then_closed(sock) for sock in half_open(port, 200, "127.0.0.2")]
    assert {answer[:12] for answer in answers} <= {b"HTTP/1.1 408", b"HTTP/1.1 503"}
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) < 20, lines
    assert sum("out of file descriptors" in line.get("message", "") for line in lines) <= 1


def test_sigterm_finishes_the_reads_under_way_and_each_answered_read_has_its_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = team_cli(tmp_path, monkeypatch)
    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "skillindex", "serve", "--http",
                                   str(port), "--tokens", "tokens.json",
                                   "--requests-per-second", "0"],
                                  cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    answered: list[str] = []

    async def reader() -> None:
        try:
            async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                           timeout=60) as web,
                        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                                      http_client=web), mode="2026-07-28",
                               client_info=Implementation(name="r", version="1")) as client):
                while True:
                    answered.append(await read_text(client))
        except Exception:  # the server went away: the reads end here
            return

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(reader)
            while len(answered) < 40:
                await anyio.sleep(0.05)
            server.send_signal(signal.SIGTERM)

    try:
        while not log.read_text():  # the first line says where it serves, once it listens
            assert server.poll() is None
            time.sleep(0.1)
        assert log.read_text().splitlines()[0].endswith(f"serving http://127.0.0.1:{port}/mcp")
        anyio.run(main)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
    with SkillIndex.open() as index:
        rows = [event for event in index.audit() if event.outcome == "ok"]
    assert len(rows) >= len(answered) > 0
    assert PDF in {f"skill://{event.skill}/{event.resource}" for event in rows}


@pytest.mark.parametrize(("host", "group"), [
    ("192.0.2.7", "192.0.2.7"), ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
    ("2001:db8:1:2::ffff", "2001:db8:1:2::/64"), ("::ffff:192.0.2.7", "192.0.2.7"),
    ("unknown", "unknown")])
def test_peers_are_counted_by_address_and_ipv6_by_its_64(host: str, group: str) -> None:
    assert peer_group(host) == group

