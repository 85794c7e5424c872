"""Migrations, engine settings and database-level guarantees, on SQLite files and PostgreSQL."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, inspect, select, text
from sqlalchemy.exc import DatabaseError
from sqlalchemy.orm import Session

from skillindex.api import SkillIndex
from skillindex.config import Environment
from skillindex.model import RESOURCE_ROW
from skillindex.store import migrate, queries
from skillindex.store.engine import make_engine
from skillindex.store.models import Base, Candidate, LoadEvent, Resource, Root, modelled
from tests.conftest import OpenIndex, root_settings, write_skill

if TYPE_CHECKING:
    from tests.pgserver import PostgresServer

TABLES = {"index_run", "root", "candidate", "finding", "resource", "scan_issue", "load_event",
          "reindex_lock"}
VIEWS = {"catalog_view", "rejection_view", "load_event_view"}


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    assert set(inspect(engine).get_table_names()) >= TABLES
    assert set(inspect(engine).get_view_names()) >= VIEWS
    assert migrate.current(engine) == migrate.HEAD
    migrate.downgrade(engine, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    assert not inspect(engine).get_view_names()
    assert migrate.current(engine) is None
    migrate.upgrade(engine)
    assert set(inspect(engine).get_table_names()) >= TABLES
    engine.dispose()


def test_each_revision_downgrades_and_upgrades_again(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    migrate.downgrade(engine, "0001")
    assert "reindex_lock" not in inspect(engine).get_table_names()
    assert migrate.current(engine) == "0001"
    migrate.upgrade(engine)
    assert migrate.current(engine) == migrate.HEAD
    engine.dispose()


def test_models_and_migrations_are_in_sync(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": modelled})
        diff = compare_metadata(context, Base.metadata)
    assert diff == []
    engine.dispose()


def _table_sql(sql: str | None) -> object:
    """A CREATE TABLE statement as its columns in order and its table constraints in any
    order: Alembic's batch migrations rebuild tables with their constraints in an order that
    changes from one run to the next."""
    if sql is None or sql.upper().startswith("CREATE VIRTUAL"):
        return sql
    head, _, body = sql.partition("(")
    body, _, tail = body.rpartition(")")
    parts, depth, quoted, current = [], 0, False, ""
    for char in body:
        quoted = quoted != (char == "'")
        depth += 0 if quoted else (char == "(") - (char == ")")
        if char == "," and not depth and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    constraint = ("CONSTRAINT ", "PRIMARY KEY", "UNIQUE", "FOREIGN KEY", "CHECK")
    columns = [part for part in parts if not part.upper().startswith(constraint)]
    return head, columns, sorted(set(parts) - set(columns)), tail


def _sqlite_state(path: Path) -> dict[str, object]:
    """Everything a new SQLite database holds: its objects as sqlite_master states them, the
    rows of every table (the FTS5 tables' own included), and the settings stored in the file."""
    connection = sqlite3.connect(path)
    try:
        listed = connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")
        objects = sorted(((kind, name, table, _table_sql(sql) if kind == "table" else sql)
                          for kind, name, table, sql in listed), key=repr)
        tables = [name for kind, name, _table, sql in objects
                  if kind == "table" and not isinstance(sql, str)]
        rows = {name: sorted(connection.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr)
                for name in tables}
        pragmas = {name: connection.execute(f"PRAGMA {name}").fetchall() for name in (
            "user_version", "application_id", "auto_vacuum", "page_size", "journal_mode",
            "encoding")}
    finally:
        connection.close()
    return {"objects": objects, "rows": rows, "pragmas": pragmas}


def test_a_new_sqlite_database_is_the_one_the_migrations_build(tmp_path: Path) -> None:
    migrated = make_engine(f"sqlite:///{tmp_path / 'migrated.sqlite'}")
    migrate.upgrade(migrated)
    created = make_engine(f"sqlite:///{tmp_path / 'created.sqlite'}")
    migrate.ensure_current(created)
    migrated.dispose()
    created.dispose()
    assert migrate.current(created) == migrate.HEAD
    state = _sqlite_state(tmp_path / "created.sqlite")
    assert state == _sqlite_state(tmp_path / "migrated.sqlite")
    rows = state["rows"]
    assert isinstance(rows, dict) and rows["candidate_fts_config"]  # FTS5's own rows count


def test_the_sqlite_head_schema_is_at_the_migrations_head() -> None:
    shipped = (Path(migrate.script_location()) / migrate.SQLITE_HEAD).read_text()
    assert shipped.startswith(f"-- revision {migrate.HEAD}\n"), (
        "migrations/sqlite_head.sql is older than the newest migration: run "
        "scripts/sqlite_head.py")


def test_a_new_sqlite_database_is_created_without_running_the_migrations(
        tmp_path: Path) -> None:
    probe = ("import sys; from skillindex.api import SkillIndex; from skillindex.config import "
             "Settings; SkillIndex.open(Settings(presets=False), db=sys.argv[1]).close(); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "new.sqlite")],
                          capture_output=True, text=True, check=True, cwd=tmp_path)
    assert done.stdout.strip() == "[]"
    engine = make_engine(f"sqlite:///{tmp_path / 'new.sqlite'}")
    assert migrate.current(engine) == migrate.HEAD
    engine.dispose()


def test_a_created_sqlite_database_migrates_down_and_up(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'created.sqlite'}")
    migrate.ensure_current(engine)
    migrate.downgrade(engine, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    migrate.upgrade(engine)
    engine.dispose()
    migrated = make_engine(f"sqlite:///{tmp_path / 'migrated.sqlite'}")
    migrate.upgrade(migrated)
    migrated.dispose()
    assert ({k: v for k, v in _sqlite_state(tmp_path / "created.sqlite").items()
             if k != "objects"}
            == {k: v for k, v in _sqlite_state(tmp_path / "migrated.sqlite").items()
                if k != "objects"})


def test_hosts_opening_a_new_sqlite_file_at_once_create_it_once(tmp_path: Path) -> None:
    (tmp_path / "skills").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{tmp_path / "skills"}"\n')
    command = [sys.executable, "-m", "skillindex", "--config", str(config), "--db",
               str(tmp_path / "new.sqlite"), "--json", "reindex"]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, cwd=tmp_path) for _ in range(3)]
    results = [(child.wait(timeout=120), child.communicate()[1]) for child in children]
    # One reindexes at a time: the others may say that they wait for its lock, nothing else.
    assert [code for code, _err in results] == [0] * 3
    assert all(line.startswith("skillindex: index 'default' is being reindexed")
               for _code, err in results for line in err.splitlines())
    engine = make_engine(f"sqlite:///{tmp_path / 'new.sqlite'}")
    assert migrate.current(engine) == migrate.HEAD
    engine.dispose()


def test_head_constant_matches_the_scripts() -> None:
    assert migrate.head_revision() == migrate.HEAD


def test_sqlite_runs_in_wal_with_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'm.sqlite'}")
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert (connection.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0) >= 1000
    engine.dispose()


def test_a_new_database_and_its_directory_are_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "index.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    migrate.ensure_current(engine)
    engine.dispose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def _event() -> dict[str, object]:
    return {"index_name": "default", "time": datetime.now(UTC), "event": "skill.read",
            "skill": "pdf", "resource": None, "level": 2, "bytes": 10, "digest": "d",
            "outcome": "ok", "reason": "test", "session": "s1", "path": "/x"}


APPEND_ONLY = {"update": "UPDATE load_event SET outcome = 'forged'",
               "delete": "DELETE FROM load_event",
               "delete-one": "DELETE FROM load_event WHERE outcome = 'ok'"}


@pytest.mark.parametrize("statement", APPEND_ONLY.values(), ids=APPEND_ONLY.keys())
def test_load_event_is_append_only_in_the_database(db_url: str, statement: str) -> None:
    _refused(db_url, statement)


def test_postgresql_refuses_truncate_of_load_event(pg_url: str) -> None:
    _refused(pg_url, "TRUNCATE load_event")


def _refused(url: str, statement: str) -> None:
    engine = make_engine(url)
    migrate.upgrade(engine)
    with engine.begin() as connection:
        connection.execute(insert(LoadEvent), [_event()])
    with pytest.raises(DatabaseError, match="append-only"), engine.begin() as connection:
        connection.execute(text(statement))
    with engine.connect() as connection:
        assert connection.execute(text("SELECT outcome FROM load_event")).scalars().all() == ["ok"]
    engine.dispose()


def test_a_database_from_a_newer_skillindex_is_refused(db_url: str) -> None:
    from skillindex.errors import StoreError

    engine = make_engine(db_url)
    migrate.upgrade(engine)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'zzzz'"))
    with pytest.raises(StoreError, match="zzzz"):
        migrate.ensure_current(engine)
    engine.dispose()


def test_hosts_opening_a_new_database_at_once_migrate_it_once(db_url: str,
                                                               tmp_path: Path) -> None:
    command = [sys.executable, "-m", "skillindex", "--db", db_url, "db", "upgrade"]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, cwd=tmp_path) for _ in range(3)]
    results = [(child.wait(timeout=120), *child.communicate()) for child in children]
    assert [(code, out.strip(), err) for code, out, err in results] == [
        (0, migrate.HEAD, "")] * 3
    engine = make_engine(db_url)
    assert migrate.current(engine) == migrate.HEAD
    engine.dispose()


@pytest.mark.parametrize("inode", [0, 2**63 - 1, 2**63, 2**64 - 1],
                         ids=["zero", "2^63-1", "2^63", "2^64-1"])
def test_inode_and_device_numbers_keep_all_64_bits(db_url: str, inode: int) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    with Session(engine) as session, session.begin():
        root_id = session.execute(insert(Root).returning(Root.id), [{
            "index_name": "default", "path": "/r", "scope": "user", "provider": "p",
            "precedence": 1, "validation": "strict"}]).scalar_one()
        candidate_id = session.execute(insert(Candidate).returning(Candidate.id), [{
            "root_id": root_id, "rel_dir": "s", "dir_name": "s", "dir_path": "/r/s",
            "skill_path": "/r/s/SKILL.md", "real_path": "/r/s", "status": "accepted",
            "tree_key": "k", "size": 1, "mtime_ns": 1, "inode": inode, "device": inode,
            "first_run_id": 1, "changed_run_id": 1}]).scalar_one()
        session.execute(insert(Resource), [{
            "candidate_id": candidate_id, "rel_path": "SKILL.md", "kind": "entry", "size": 1,
            "mtime_ns": 1, "inode": inode, "device": inode, "xxh3": "x", "sha256": "s"}])
    with Session(engine) as session:
        known = queries.known_skills(session, "default", ["/r"])["/r"]["s"]
        stored = queries.manifest(session, known.candidate_id)["SKILL.md"].stat
        assert (stored.inode, stored.device) == (inode, inode)
        [listed] = queries.candidates(session, "default", ["/r"])
        assert listed.id == known.candidate_id
        assert session.scalars(select(Resource.device)).one() == inode
    engine.dispose()


def test_auditor_views_answer_on_every_backend(tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    write_skill(root, "broken", "name: [oops\n")
    index = open_index(root)
    index.reindex()
    with index.engine.begin() as connection:
        connection.execute(insert(LoadEvent), [_event()])
    with index.engine.connect() as connection:
        catalog = connection.execute(text(
            "SELECT index_name, name, rank, enabled FROM catalog_view")).all()
        rejections = connection.execute(text("SELECT name, code FROM rejection_view")).all()
        events = connection.execute(text(
            "SELECT skill, level_name, outcome FROM load_event_view")).all()
    assert [tuple(row) for row in catalog] == [("default", "pdf", 1, True)]
    assert [tuple(row) for row in rejections] == [("broken", "yaml-invalid")]
    assert [tuple(row) for row in events] == [("pdf", "body", "ok")]


def test_a_database_owner_without_superuser_rights_runs_skillindex(
        pg_server: PostgresServer, tmp_path: Path, env: Environment) -> None:
    url = pg_server.create_database(owner="agent")
    write_skill(tmp_path / "skills", "pdf")
    with SkillIndex.open(root_settings(tmp_path / "skills"), db=url, env=env) as index:
        assert index.reindex(wait=False).added == 1
        with index.engine.connect() as connection:
            assert connection.execute(text("SELECT rolsuper FROM pg_roles "
                                           "WHERE rolname = current_user")).scalar() is False


@pytest.mark.parametrize("inode", [2**63, 2**64 - 1], ids=["2^63", "2^64-1"])
def test_staged_rows_keep_all_64_bits_of_inode_numbers(db_url: str, inode: int) -> None:
    from skillindex.store.staging import CANDIDATE_COLUMNS, Stage

    engine = make_engine(db_url)
    migrate.upgrade(engine)
    with engine.begin() as connection:
        connection.execute(insert(Root), [{
            "index_name": "default", "path": "/r", "scope": "user", "provider": "p",
            "precedence": 1, "validation": "strict"}])
    row: dict[str, object] = dict.fromkeys(CANDIDATE_COLUMNS)
    row.update({"rel_dir": "s", "dir_name": "s", "dir_path": "/r/s", "skill_path": "/r/s/SKILL.md",
                "real_path": "/r/s", "status": "accepted", "enabled": True, "tree_key": "k",
                "disable_model_invocation": False,
                "inode": inode, "device": inode})
    resource = tuple({"rel_path": "SKILL.md", "kind": "entry", "size": 1, "mtime_ns": 1,
                      "inode": inode, "device": inode, "xxh3": "x", "sha256": "s"}.get(name)
                     for name in RESOURCE_ROW)
    with engine.connect() as connection:
        stage = Stage(connection)
        stage.add("/r", row, None, [{"code": "c", "severity": "warning", "message": "m"}],
                  [resource])
        with connection.begin():
            stage.prepare()
            stage.move("default", 1)
        stage.drop()
    with Session(engine) as session:
        [candidate] = queries.candidates(session, "default", ["/r"])
        stored = queries.manifest(session, candidate.id)["SKILL.md"].stat
        assert (stored.inode, stored.device) == (inode, inode)
        assert [f.code for f in candidate.findings] == ["c"]
        assert session.scalars(select(Candidate.inode)).one() == inode
    engine.dispose()


def test_a_bulk_reindex_on_postgresql_leaves_the_planner_statistics(
        pg_url: str, env: Environment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Below ANALYZE_AFTER written skills the table is left to autovacuum; from it on, the
    # reindex analyzes what it filled (pg_class.reltuples then counts the rows).
    monkeypatch.setattr(queries, "ANALYZE_AFTER", 4)
    root = tmp_path / "skills"
    for number in range(3):
        write_skill(root, f"skill-{number}")

    def counted_rows() -> float:
        with make_engine(pg_url).connect() as connection:
            return float(connection.execute(text(
                "SELECT reltuples FROM pg_class WHERE relname = 'candidate'")).scalar_one())

    with SkillIndex.open(root_settings(root), db=pg_url, env=env) as index:
        index.reindex()
        assert counted_rows() <= 0  # never analyzed: -1 (0 before PostgreSQL 14)
        for number in range(3, 8):
            write_skill(root, f"skill-{number}")
        index.reindex()
        assert counted_rows() == 8


def test_every_sqlite_connection_zeroes_deleted_rows_only_on_pages_it_writes(
        tmp_path: Path) -> None:
    # An SQLite built with SECURE_DELETE (Debian's) would otherwise write every page a delete
    # frees: the cached catalogs a reindex drops are megabytes at registry size.
    from skillindex.store import sqlitefile

    path = tmp_path / "index.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA secure_delete").scalar() == 2  # FAST
            # The temporary schema, where a reindex stages its rows, has a setting of its own.
            connection.exec_driver_sql("CREATE TEMPORARY TABLE staged (x)")
            assert connection.exec_driver_sql("PRAGMA temp.secure_delete").scalar() == 2
    finally:
        engine.dispose()
    opened = sqlitefile.connect(str(path), timeout=1.0)
    try:
        assert opened.connection.execute("PRAGMA secure_delete").fetchone() == (2,)
        assert opened.connection.execute("PRAGMA temp.secure_delete").fetchone() == (2,)
    finally:
        opened.connection.close()
