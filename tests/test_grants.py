"""`db grants` on a real PostgreSQL server with two real roles: each can do its work, the agent
cannot change the audit."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.exc import DatabaseError

from skillindex.api import SkillIndex, database_grants
from skillindex.cli import cli
from skillindex.config import Environment
from skillindex.errors import ConfigError, ReindexBusyError, SkillIndexError
from skillindex.query.disclose import parse_uri
from skillindex.store.engine import make_engine
from tests.conftest import root_settings, write_skill

if TYPE_CHECKING:
    from tests.pgserver import PostgresServer

NUMBERS = itertools.count()
DENIED = r"permission denied|must be owner"


@dataclass
class Shared:
    """A database owned by the administrator, and the URLs of the two roles that use it."""

    owner: str
    indexer: str
    agent: str
    indexer_role: str
    agent_role: str
    root: Path
    server: str = ""


def _create_role(server: PostgresServer, name: str) -> None:
    conninfo = f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))


@pytest.fixture
def shared(pg_server: PostgresServer, tmp_path: Path, env: Environment) -> Iterator[Shared]:
    number = next(NUMBERS)
    roles = (f"indexer_{os.getpid()}_{number}", f"agent_{os.getpid()}_{number}",
             f"server_{os.getpid()}_{number}")
    for role in roles:
        _create_role(pg_server, role)
    owner = pg_server.create_database()
    database = owner.rsplit("/", 1)[1]
    root = tmp_path / "skills"
    write_skill(root, "pdf", body="# PDF\n")
    SkillIndex.open(root_settings(root), db=owner, env=env).close()  # the owner migrates
    result = CliRunner().invoke(cli, ["--db", owner, "db", "grants", "--indexer", roles[0],
                                      "--agent", roles[1], "--server", roles[2], "--apply"])
    assert result.exit_code == 0, result.output
    yield Shared(owner, pg_server.url(database, roles[0]), pg_server.url(database, roles[1]),
                 roles[0], roles[1], root, pg_server.url(database, roles[2]))


def test_each_role_does_its_work(shared: Shared, env: Environment) -> None:
    with SkillIndex.open(root_settings(shared.root), db=shared.indexer, env=env) as indexer:
        assert indexer.reindex().added == 1
        assert indexer.reindex().unchanged == 1
    with SkillIndex.open(root_settings(shared.root), db=shared.agent, env=env) as agent:
        assert [w.name for w in agent.winners()] == ["pdf"]
        assert "pdf" in agent.catalog(session="s-1").text  # the cache write is refused quietly
        assert agent.read("skill://pdf", reason="test", session="s-1").text == "# PDF\n"
        assert [e.event for e in agent.audit()] == ["catalog.published", "skill.read"]
        report = agent.verify_audit()
        assert report.ok and report.events == 2
        loads = [(row.name, row.body_loads) for row in agent.usage(since="2d").skills]
        assert loads == [("pdf", 1)]
    # The agent's read went into the rollup too, written by the trigger as the owner.
    engine = make_engine(shared.agent)
    with engine.connect() as connection:
        assert connection.execute(text(
            "SELECT skill, body, published FROM usage_day ORDER BY published DESC")).all() == [
                (None, 0, 1), ("pdf", 1, 0)]
    engine.dispose()


FORBIDDEN = {
    "update": "UPDATE load_event SET outcome = 'refused'",
    "delete": "DELETE FROM load_event",
    "truncate": "TRUNCATE load_event",
    "alter": "ALTER TABLE load_event ADD COLUMN note text",
    "disable-trigger": "ALTER TABLE load_event DISABLE TRIGGER load_event_append_only",
    "disable-chain": "ALTER TABLE load_event DISABLE TRIGGER USER",
    "drop": "DROP TABLE load_event",
    "drop-trigger": "DROP TRIGGER load_event_append_only ON load_event",
    "write-catalog": "UPDATE candidate SET description = 'forged'",
    "poison-cache": "INSERT INTO catalog_cache (index_name, key, payload) "
                    "VALUES ('default', 'k', 'x')",
    "drop-index": "DROP INDEX ix_load_event_chain",
    # The chain's lock, which any role could hold as an advisory lock, is a row no role locks.
    "lock-chain": "SELECT * FROM load_event_lock FOR UPDATE",
    "lock-chain-table": "LOCK TABLE load_event_lock",
    "share-lock-audit": "LOCK TABLE load_event IN SHARE MODE",
    "edit-anchor": "UPDATE index_run SET audit_events = 0",
    "edit-rollup": "UPDATE usage_day SET body = 0",
    "add-to-rollup": "INSERT INTO usage_day (index_name, day, skill) VALUES ('default', "
                     "'2026-01-01', 'pdf')",
    # Nor may it take the reindex lock, which any role could hold as an advisory lock.
    "take-reindex-lock": "SELECT skillindex_reindex_lock('default')",
    "lock-reindex-row": "SELECT * FROM reindex_mutex FOR UPDATE",
    "lock-reindex-table": "LOCK TABLE reindex_mutex",
    "temp-table": "CREATE TEMP TABLE scratch (a int)",
    "create-in-schema": "CREATE TABLE public.scratch (a int)",
}


@pytest.mark.parametrize("statement", FORBIDDEN.values(), ids=FORBIDDEN.keys())
def test_the_agent_cannot_change_the_audit_or_the_catalog(shared: Shared, env: Environment,
                                                          statement: str) -> None:
    with SkillIndex.open(root_settings(shared.root), db=shared.indexer, env=env) as indexer:
        indexer.reindex()
    with SkillIndex.open(root_settings(shared.root), db=shared.agent, env=env) as agent:
        agent.read("skill://pdf", reason="test")
        head = agent.verify_audit().head
    engine = make_engine(shared.agent)
    with pytest.raises(DatabaseError, match=DENIED), \
            engine.begin() as connection:
        connection.execute(text(statement))
    engine.dispose()
    with SkillIndex.open(root_settings(shared.root), db=shared.owner, env=env) as owner:
        report = owner.verify_audit(head=head)
        assert report.ok and report.events == 1


@pytest.mark.parametrize("statement", ["UPDATE load_event SET outcome = 'refused'",
                                       "DELETE FROM load_event", "TRUNCATE load_event",
                                       "ALTER TABLE load_event DISABLE TRIGGER USER",
                                       "UPDATE index_run SET audit_events = 0",
                                       "DELETE FROM index_run",
                                       "UPDATE usage_day SET body = 0",
                                       "DELETE FROM usage_day",
                                       "SELECT * FROM load_event_lock FOR UPDATE",
                                       "SELECT * FROM reindex_mutex FOR UPDATE",
                                       "LOCK TABLE reindex_mutex"])
def test_the_indexer_cannot_change_the_audit_either(shared: Shared, statement: str) -> None:
    engine = make_engine(shared.indexer)
    with pytest.raises(DatabaseError, match=DENIED), \
            engine.begin() as connection:
        connection.execute(text(statement))
    engine.dispose()


def test_grants_are_printed_without_being_applied(shared: Shared) -> None:
    result = CliRunner().invoke(cli, ["--db", shared.owner, "--json", "db", "grants"])
    assert result.exit_code == 0, result.output
    shape = json.loads(result.stdout)
    assert shape["applied"] is False
    on_audit = [s for s in shape["statements"]
                if s.startswith("GRANT") and "public.load_event " in f"{s} ".replace(",", " ")]
    assert on_audit[0] == "GRANT SELECT ON public.load_event TO skillindex_indexer, " \
                          "skillindex_agent"
    assert on_audit[1].startswith('GRANT INSERT (id, index_name, "time", ')
    assert on_audit[1].endswith(") ON public.load_event TO skillindex_indexer, skillindex_agent")
    assert "principal" not in on_audit[1] and len(on_audit) == 2
    served = CliRunner().invoke(cli, ["--db", shared.owner, "--json", "db", "grants",
                                      "--server", "team"])
    assert "GRANT INSERT ON public.load_event TO team" in json.loads(served.stdout)["statements"]


RAW_EVENT = ("INSERT INTO load_event (index_name, time, event, skill, level, bytes, outcome{}) "
             "VALUES ('default', now(), 'skill.read', 'pdf', 2, 5, 'ok'{})")


@pytest.mark.parametrize("role", ["agent", "indexer"])
def test_only_the_server_role_appends_an_event_under_a_principal(shared: Shared,
                                                                 env: Environment,
                                                                 role: str) -> None:
    """A host holding the agent's (or the indexer's) role cannot write an `ok` event that says
    a principal the server authenticated loaded a skill."""
    engine = make_engine(shared.agent if role == "agent" else shared.indexer)
    with pytest.raises(DatabaseError, match=DENIED), engine.begin() as connection:
        connection.execute(text(RAW_EVENT.format(", principal", ", 'alice'")))
    with engine.begin() as connection:  # without a principal, it still appends
        connection.execute(text(RAW_EVENT.format("", "")))
    engine.dispose()
    with SkillIndex.open(root_settings(shared.root), db=shared.indexer, env=env) as indexer:
        indexer.reindex()
    uri = "skill://pdf"
    with SkillIndex.open(root_settings(shared.root), db=shared.agent, env=env) as agent, \
            pytest.raises(SkillIndexError, match="cannot be written"):
        agent.read_stored(uri, parse_uri(uri), None, reason="test", principal="alice")
    with SkillIndex.open(root_settings(shared.root), db=shared.server, env=env) as server:
        server.read_stored(uri, parse_uri(uri), None, reason="test", principal="alice")
        server.read(uri, reason="test")
        events = server.audit()
        assert [(e.outcome, e.principal) for e in events] == [
            ("ok", None), ("ok", "alice"), ("ok", None)]
        assert server.verify_audit().ok


def test_a_role_that_owns_a_table_is_refused(shared: Shared) -> None:
    conninfo = shared.owner.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(sql.SQL("ALTER TABLE load_event OWNER TO {}")
                           .format(sql.Identifier(shared.agent_role)))
    result = CliRunner().invoke(cli, ["--db", shared.owner, "db", "grants", "--indexer",
                                      shared.indexer_role, "--agent", shared.agent_role])
    assert result.exit_code == 1
    assert f"role {shared.agent_role} owns table load_event" in result.stderr


def test_grants_are_for_postgresql_only(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="PostgreSQL"):
        database_grants(db=f"sqlite:///{tmp_path / 'x.sqlite'}")


def _conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _read(shared: Shared, tmp_path: Path, wait: float) -> subprocess.CompletedProcess[str]:
    """`skillindex read` as the agent, in a process of its own, bounded by `audit_lock_timeout`."""
    config = tmp_path / "agent.toml"
    config.write_text(f"audit_lock_timeout = {wait}\n\n[skills]\npresets = false\n\n"
                      f'[[roots]]\npath = "{shared.root}"\nprecedence = 10\n')
    return subprocess.run([sys.executable, "-m", "skillindex", "--config", str(config), "--db",
                           shared.agent, "read", "skill://pdf"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, check=False)


def test_a_read_waits_a_bounded_time_for_the_chains_lock(shared: Shared, env: Environment,
                                                         tmp_path: Path) -> None:
    with SkillIndex.open(root_settings(shared.root), db=shared.indexer, env=env) as indexer:
        indexer.reindex()
    # Another agent's append, its transaction left open: it holds the chain's lock.
    with psycopg.connect(_conninfo(shared.agent)) as holder:
        holder.execute("INSERT INTO load_event (index_name, time, event, level, bytes, outcome) "
                       "VALUES ('default', now(), 'skill.read', 2, 0, 'ok')")
        started = time.monotonic()
        refused = _read(shared, tmp_path, 0.5)
        assert time.monotonic() - started < 60
        assert refused.returncode == 1, refused.stderr
        assert refused.stdout == ""
        assert refused.stderr.count("\n") == 1
        assert "audit_lock_timeout" in refused.stderr and "nothing was disclosed" in refused.stderr
        holder.rollback()
    served = _read(shared, tmp_path, 0.5)
    assert served.returncode == 0, served.stderr
    assert served.stdout == "# PDF\n"


def test_the_advisory_lock_any_role_may_take_stops_nothing(shared: Shared, env: Environment,
                                                           tmp_path: Path) -> None:
    with SkillIndex.open(root_settings(shared.root), db=shared.indexer, env=env) as indexer:
        indexer.reindex()
    with psycopg.connect(_conninfo(shared.agent), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(hashtextextended('skillindex audit default', 0))")
        served = _read(shared, tmp_path, 5)
    assert served.returncode == 0, served.stderr


def _old_reindex_key(index_name: str) -> int:
    """The advisory lock key the reindex took before its lock was a row (64 bits of a hash)."""
    digest = hashlib.sha256(f"skillindex reindex {index_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def test_another_roles_advisory_lock_stalls_no_reindex(shared: Shared, env: Environment) -> None:
    with psycopg.connect(_conninfo(shared.agent), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", [_old_reindex_key("default")])
        with SkillIndex.open(root_settings(shared.root), db=shared.indexer, env=env) as indexer:
            assert indexer.reindex(wait=False).added == 1


def test_only_the_owner_and_the_indexer_take_the_reindex_lock(shared: Shared,
                                                              env: Environment) -> None:
    engine = make_engine(shared.agent)
    with pytest.raises(DatabaseError, match=DENIED), engine.begin() as connection:
        connection.execute(text("SELECT skillindex_reindex_lock('default')"))
    engine.dispose()
    # The indexer's lock is a lock: a second reindex, the owner's, finds it busy and says who.
    engine = make_engine(shared.indexer)
    with engine.begin() as connection:
        connection.execute(text("SELECT skillindex_reindex_lock('default')"))
        with SkillIndex.open(root_settings(shared.root), db=shared.owner, env=env) as owner, \
                pytest.raises(ReindexBusyError):
            owner.reindex(wait=False)
    engine.dispose()
    with SkillIndex.open(root_settings(shared.root), db=shared.owner, env=env) as owner:
        assert owner.reindex(wait=False).added == 1


def test_the_agent_cannot_forge_an_impossible_event(shared: Shared) -> None:
    engine = make_engine(shared.agent)
    for values in ("'skill.read', 99, 0, 'ok'", "'skill.read', 2, -1000000, 'ok'",
                   "'made.up', 2, 0, 'ok'", "'skill.read', 2, 0, 'bogus'"):
        with pytest.raises(DatabaseError, match="violates check constraint"), \
                engine.begin() as connection:
            connection.execute(text("INSERT INTO load_event (index_name, time, event, level, "
                                    f"bytes, outcome) VALUES ('default', now(), {values})"))
    engine.dispose()
