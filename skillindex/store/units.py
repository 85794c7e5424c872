"""Units of work on an engine: a session to read in, a transaction to write in; either way a
database error reaches the caller as one StoreError line, never as SQLAlchemy's."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, literal, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from skillindex.errors import AuditBusyError
from skillindex.store.engine import IMMEDIATE, audit_error, read_only, store_error

READ = "read the index"


@contextmanager
def failing_as(engine: Engine, doing: str) -> Iterator[None]:
    """Database errors raised inside as StoreError("cannot <doing> <database>: ...")."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise store_error(exc, doing, url=engine.url, why=read_only(engine)) from exc


@contextmanager
def session(engine: Engine, doing: str = READ) -> Iterator[Session]:
    """A session to read in (its transactions begun as it needs them)."""
    with failing_as(engine, doing), Session(engine) as opened:
        yield opened


@contextmanager
def transaction(engine: Engine, doing: str, *, immediate: bool = True) -> Iterator[Session]:
    """A session in one write transaction, committed at the end. On SQLite, when `immediate`,
    it holds the write lock from BEGIN on, so what it reads before writing cannot be changed
    by another writer half way; otherwise it takes the lock at its first write."""
    with failing_as(engine, doing), _written(engine, immediate=immediate) as opened:
        yield opened


def probe_write(engine: Engine) -> None:
    """Begin a write transaction that writes nothing: a StoreError when the database would not
    take a write now (an audit row, say)."""
    with failing_as(engine, "check that the audit can be written"), _written(
            engine, immediate=True) as opened:
        opened.execute(select(literal(1)))  # the transaction, and SQLite's write lock, begin here


@contextmanager
def audit_transaction(engine: Engine) -> Iterator[Session]:
    """`transaction` for one audit row: a database that will not take it (read-only, full,
    gone) is AuditUnwritableError, since nothing may be handed over without its row."""
    try:
        with _written(engine, immediate=True) as opened:
            yield opened
    except SQLAlchemyError as exc:
        raise audit_error(exc, url=engine.url, why=read_only(engine)) from exc


@contextmanager
def audit_sqlite(engine: Engine) -> Iterator[sqlite3.Connection]:
    """A SQLite file's driver connection from the engine's pool, for the audit's own
    transaction (store/audit.py `append_sqlite`): an error of the database is
    AuditUnwritableError, as in `audit_transaction`."""
    try:
        pooled = engine.raw_connection()
    except SQLAlchemyError as exc:
        raise audit_error(exc, url=engine.url, why=read_only(engine)) from exc
    try:
        connection = pooled.driver_connection
        if not isinstance(connection, sqlite3.Connection):
            raise TypeError(f"not a SQLite connection: {connection!r}")
        yield connection
    except sqlite3.Error as exc:
        raise audit_error(exc, url=engine.url, why=read_only(engine)) from exc
    finally:
        pooled.close()


@contextmanager
def audit_driver(engine: Engine) -> Iterator[Any]:
    """A PostgreSQL driver connection (psycopg) from the engine's pool, outside any
    transaction, for the audit's own (store/audit.py `append_postgresql`): an error of the
    database but a busy chain is AuditUnwritableError, as in `audit_transaction`."""
    try:
        pooled = engine.raw_connection()
    except SQLAlchemyError as exc:
        raise audit_error(exc, url=engine.url, why=None) from exc
    try:
        yield pooled.driver_connection
    except AuditBusyError:
        raise
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "psycopg":
            raise
        # A connection the server dropped is not handed to the next caller.
        pooled.invalidate()
        raise audit_error(exc, url=engine.url, why=None) from exc
    finally:
        pooled.close()


@contextmanager
def _written(engine: Engine, *, immediate: bool) -> Iterator[Session]:
    with engine.connect() as connection:
        if immediate:
            connection.execution_options(**IMMEDIATE)
        with Session(connection) as opened, opened.begin():
            yield opened
