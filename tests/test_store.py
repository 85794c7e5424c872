"""Migrations, engine settings and database-level guarantees, on real SQLite files."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, inspect, text
from sqlalchemy.exc import DatabaseError

from skillindex.store import migrate
from skillindex.store.engine import make_engine
from skillindex.store.models import Base, LoadEvent

TABLES = {"index_run", "root", "candidate", "finding", "resource", "scan_issue", "load_event"}
VIEWS = {"catalog_view", "rejection_view", "load_event_view"}


def test_upgrade_downgrade_upgrade(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'm.sqlite'}")
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


def test_models_and_migrations_are_in_sync(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'm.sqlite'}")
    migrate.upgrade(engine)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []
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


@pytest.mark.parametrize("statement", ["UPDATE load_event SET outcome = 'forged'",
                                       "DELETE FROM load_event"], ids=["update", "delete"])
def test_load_event_is_append_only_in_the_database(tmp_path: Path, statement: str) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'm.sqlite'}")
    migrate.upgrade(engine)
    with engine.begin() as connection:
        connection.execute(insert(LoadEvent), [_event()])
    with pytest.raises(DatabaseError, match="append-only"), engine.begin() as connection:
        connection.execute(text(statement))
    with engine.connect() as connection:
        assert connection.execute(text("SELECT outcome FROM load_event")).scalars().all() == ["ok"]
    engine.dispose()


def test_a_database_from_a_newer_skillindex_is_refused(tmp_path: Path) -> None:
    from skillindex.errors import StoreError

    engine = make_engine(f"sqlite:///{tmp_path / 'm.sqlite'}")
    migrate.upgrade(engine)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'zzzz'"))
    with pytest.raises(StoreError, match="zzzz"):
        migrate.ensure_current(engine)
    engine.dispose()
