"""Replicas: two `serve --http` processes on one PostgreSQL index serve the same catalog to
concurrent clients, and the one audit chain keeps every read exactly once."""

from __future__ import annotations

import contextlib
from pathlib import Path

import anyio
import pytest
from mcp.types import TextResourceContents

from skillindex.api import SkillIndex
from skillindex.serve import tokens
from tests.conftest import write_skill
from tests.serving import serving
from tests.test_audit import rows
from tests.test_serve_http import connect

CLIENTS = 8
READS = 12
SKILLS = 6


@pytest.fixture
def db_backend() -> str:
    return "postgresql"


def test_two_replicas_on_one_database_audit_every_read_once(
        tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "skills"
    for number in range(SKILLS):
        write_skill(root, f"skill-{number}", body=f"# Skill {number}\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\n')
    for name, value in {"HOME": tmp_path / "home", "SKILLINDEX_CONFIG": config,
                        "SKILLINDEX_DB": db_url}.items():
        monkeypatch.setenv(name, str(value))
    with SkillIndex.open(config, db=db_url, cwd=tmp_path) as index:
        index.reindex()
        before = len(rows(index.engine))
    token_file = tmp_path / "tokens.json"
    issued = [tokens.add(token_file, f"client-{n}")[0] for n in range(CLIENTS)]
    uris = [f"skill://skill-{number}/SKILL.md" for number in range(SKILLS)]
    done: dict[str, int] = {}
    failures: list[str] = []

    async def client(number: int, port: int) -> None:
        url = f"http://127.0.0.1:{port}/mcp"
        async with connect(url, issued[number], name=f"replica-host-{number}") as session:
            for read in range(READS):
                uri = uris[(number + read) % SKILLS]
                try:
                    (content,) = (await session.read_resource(uri)).contents
                except Exception as exc:  # a failure is a finding, counted below
                    failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                assert isinstance(content, TextResourceContents)
                assert content.text.endswith(f"# Skill {(number + read) % SKILLS}\n")
                done[f"client-{number}"] = done.get(f"client-{number}", 0) + 1

    async def load(ports: tuple[int, ...]) -> None:
        async with anyio.create_task_group() as group:
            for number in range(CLIENTS):
                group.start_soon(client, number, ports[number % 2])

    with contextlib.ExitStack() as replicas:
        ports = tuple(replicas.enter_context(serving(tmp_path, "--tokens", str(token_file),
                                                     "--requests-per-second", "0"))
                      for _ in range(2))
        anyio.run(load, ports)
    assert failures == []
    assert done == {f"client-{n}": READS for n in range(CLIENTS)}
    with SkillIndex.open(config, db=db_url, cwd=tmp_path) as index:
        report = index.verify_audit()
        assert report.ok, report.broken
        written = rows(index.engine)[before:]
    assert len(written) == CLIENTS * READS
    assert all(row["outcome"] == "ok" for row in written)
    for number in range(CLIENTS):
        assert sum(row["principal"] == f"client-{number}" for row in written) == READS
    assert len({row["row_hash"] for row in written}) == len(written)
