"""Runs the Alembic migrations as plain functions for the CLI, the library and the tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

from sqlalchemy import Connection, Engine, func, select, text
from sqlalchemy.exc import SQLAlchemyError

from skillindex.errors import AuditKeptError, ConfigError, StoreError
from skillindex.store.engine import IMMEDIATE, store_error
from skillindex.store.revision import HEAD

__all__ = ["HEAD", "current", "downgrade", "ensure_current", "refuse_to_discard_audit",
           "sqlite_head_text", "upgrade"]
# PostgreSQL advisory lock key that serializes migrations of one database ("skillmig" in ASCII).
MIGRATION_LOCK_KEY = int.from_bytes(b"skillmig", "big")
# Alembic config attribute: a downgrade may discard a non-empty audit log.
DISCARD_AUDIT = "discard_audit"


def script_location() -> str:
    return str(resources.files("skillindex.migrations"))


def _config(connection: Any, *, discard_audit: bool = False) -> Any:
    from alembic.config import Config  # noqa: PLC0415

    config = Config()
    config.set_main_option("script_location", script_location())
    config.attributes["connection"] = connection
    config.attributes[DISCARD_AUDIT] = discard_audit
    return config


def current(engine: Engine) -> str | None:
    try:
        with engine.connect() as connection:
            if not engine.dialect.has_table(connection, "alembic_version"):
                return None
            return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError as exc:
        # The first statement on a new connection: a server that is down, a file that is not
        # a database and a folder that cannot be entered all end up here.
        raise store_error(exc, "open the database", url=engine.url) from exc


@contextmanager
def _migrating(engine: Engine) -> Iterator[Connection]:
    """One transaction that no other migration of this database runs beside.

    Many agent hosts may open a new shared database at the same moment; each would find it
    unmigrated. The second waits here, then Alembic reads the version the first one wrote.
    """
    with engine.connect() as connection:
        connection.execution_options(**IMMEDIATE)
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK_KEY)))
            yield connection


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command  # noqa: PLC0415

    with _translated(engine, revision), _migrating(engine) as connection:
        command.upgrade(_config(connection), revision)


def downgrade(engine: Engine, revision: str, *, discard_audit: bool = False) -> None:
    """Migrate down to `revision`; a step that would lose audit events is refused unless
    `discard_audit` is set (AuditKeptError)."""
    from alembic import command  # noqa: PLC0415

    with _translated(engine, revision), _migrating(engine) as connection:
        command.downgrade(_config(connection, discard_audit=discard_audit), revision)


@contextmanager
def _translated(engine: Engine, revision: str) -> Iterator[None]:
    """A revision Alembic does not know is the user's typing error (exit 2), not ours."""
    from alembic.util import CommandError  # noqa: PLC0415

    try:
        yield
    except (CommandError, AssertionError) as exc:
        # Alembic asserts, rather than raises a CommandError, on some revisions it cannot
        # resolve (`base+9` past the head, `0001-01-01`).
        known = ", ".join(sorted(known_revisions())) or "none"
        raise ConfigError(f"cannot migrate to {revision!r}: {str(exc) or 'it does not resolve'} "
                          f"(revisions: {known}, head, base, or -1 for one step down)") from exc
    except SQLAlchemyError as exc:
        raise store_error(exc, "migrate the database", url=engine.url) from exc


def refuse_to_discard_audit(what: str) -> None:
    """Called by a migration's downgrade before it loses audit data: stop unless the log is
    empty or the downgrade was asked to discard it."""
    from alembic import op  # noqa: PLC0415

    config = op.get_context().config
    if config is not None and config.attributes.get(DISCARD_AUDIT):
        return
    count = op.get_bind().execute(text("SELECT count(*) FROM load_event")).scalar_one()
    if count:
        raise AuditKeptError(f"refusing to {what}: load_event holds {count} audit events "
                             "(downgrade with --discard-audit to discard them)")


def ensure_current(engine: Engine) -> None:
    """Create or migrate the database to head; a database newer than this code is refused.

    A new SQLite database is given the schema the migrations leave (SQLITE_HEAD) in one go,
    rather than by running each migration: the same objects, a tenth of the time. Migrations
    newer than that schema, if any, then run as usual.
    """
    revision = current(engine)
    if revision == HEAD:
        return
    if revision is not None and revision not in known_revisions():
        raise StoreError(
            f"the database is at revision {revision}, which this skillindex does not know; "
            "upgrade skillindex"
        )
    if revision is None and engine.dialect.name == "sqlite" and _create_sqlite(engine) == HEAD:
        return
    upgrade(engine)


# The schema every migration up to its revision leaves in a new SQLite database, as the
# statements sqlite_master holds (scripts/sqlite_head.py writes it; tests/test_store.py
# proves a database made from it the same as one migrated).
SQLITE_HEAD = "sqlite_head.sql"
_REVISION_LINE = "-- revision "
# The tables SQLite makes for each FTS5 table: created with it, never on their own.
_FTS5_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")


def sqlite_head_text(engine: Engine) -> str:
    """What SQLITE_HEAD holds for the SQLite database of `engine`, migrated to a revision."""
    with engine.connect() as connection:
        revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
        rows = connection.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").all()
    fts5 = [name for name, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE")
            and "USING FTS5" in sql.upper()]
    shadows = {table + suffix for table in fts5 for suffix in _FTS5_SHADOWS}
    statements = [sql for name, sql in rows
                  if not name.startswith("sqlite_") and name not in shadows]
    # The migrations rebuilt each FTS5 table once, which leaves a record in it that a table
    # just created lacks.
    statements += [f"INSERT INTO \"{name}\" (\"{name}\") VALUES ('rebuild')" for name in fts5]
    return (f"{_REVISION_LINE}{revision}\n-- Written by scripts/sqlite_head.py from a database "
            "the migrations built; do not edit.\n\n"
            + "".join(f"{statement};\n\n" for statement in statements))


def _sqlite_head() -> tuple[str, list[str]]:
    first, _, body = (resources.files("skillindex.migrations") / SQLITE_HEAD).read_text(
        encoding="utf-8").partition("\n")
    statements, pending = [], ""
    for line in body.splitlines(keepends=True):
        if not pending and (line.startswith("--") or not line.strip()):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    return first.removeprefix(_REVISION_LINE).strip(), statements


def _create_sqlite(engine: Engine) -> str | None:
    """Give a SQLite database that holds nothing the schema of SQLITE_HEAD, stamped with its
    revision, which it returns; None when the database was not empty (another process may
    have just created it), which is then left to the migrations."""
    revision, statements = _sqlite_head()
    try:
        with _migrating(engine) as connection:
            if connection.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar():
                return None
            for statement in statements:
                connection.exec_driver_sql(statement)
            connection.execute(text("INSERT INTO alembic_version (version_num) VALUES (:rev)"),
                               {"rev": revision})
    except SQLAlchemyError as exc:
        raise store_error(exc, "create the database", url=engine.url) from exc
    return revision


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory  # noqa: PLC0415

    script = ScriptDirectory(script_location())
    return {rev.revision for rev in script.walk_revisions()}


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory  # noqa: PLC0415

    return ScriptDirectory(script_location()).get_current_head()
