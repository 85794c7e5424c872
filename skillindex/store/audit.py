"""Appends audit events to their index's hash chain and verifies it, through SQLAlchemy."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, Text, bindparam, select, text, type_coerce
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from skillindex import model
from skillindex.errors import AuditBusyError
from skillindex.store import sql
from skillindex.store.chain import (
    CHAINED_FIELDS,
    GENESIS,
    LIMITS,
    TEXT_FIELDS,
    anchors_of,
    bounded,
    check_chain,
    fields_of,
    linked,
    row_hash,
    time_text,
    unchained,
)
from skillindex.store.models import Base

__all__ = [
    "GENESIS",
    "LIMITS",
    "TEXT_FIELDS",
    "append",
    "append_all",
    "append_postgresql",
    "append_sqlite",
    "bounded",
    "check_chain",
    "row_hash",
    "time_text",
    "verify",
]

LOAD_EVENT = Base.metadata.tables["load_event"]
_HEAD = text(sql.AUDIT_HEAD)
_APPEND = text(sql.AUDIT_APPEND)
_APPEND_UNATTRIBUTED = text(sql.AUDIT_APPEND_UNATTRIBUTED)
# Many rows in one executemany: their ids are not needed.
_APPEND_MANY_TEXT = sql.AUDIT_APPEND.removesuffix(" RETURNING id")
_APPEND_MANY = text(_APPEND_MANY_TEXT)
# The same in psycopg's parameter style.
_APPEND_MANY_PG = {attributed: re.sub(r":(\w+)", r"%(\1)s", statement.removesuffix(" RETURNING id"))
                   for attributed, statement in ((True, sql.AUDIT_APPEND),
                                                 (False, sql.AUDIT_APPEND_UNATTRIBUTED))}
_SET_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %(wait)s, true)"
_APPEND_MANY_UNATTRIBUTED = text(sql.AUDIT_APPEND_UNATTRIBUTED.removesuffix(" RETURNING id"))
# PostgreSQL's SQLSTATE for a lock not granted within lock_timeout.
_LOCK_NOT_AVAILABLE = "55P03"


def append(session: Session, index_name: str, record: model.AuditRecord, *,
           lock_timeout: float) -> int:
    """Append one event at the end of its index's chain, with the store's time.

    On PostgreSQL the insert trigger takes the chain's lock (a row of a table only the
    schema's owner may lock) and sets `time`, `prev_hash`, `row_hash` and `id` itself, so no
    role that may only insert can write an unchained or backdated row; this transaction waits
    at most `lock_timeout` seconds for that lock (AuditBusyError). On SQLite the caller's
    transaction must hold the write lock from its start (BEGIN IMMEDIATE, which waits the busy
    timeout): then reading the head and inserting after it are one step. The sqlite3 start-up
    path (store/fastpath.py) appends with the same statements and `chain.linked`.
    """
    fields = fields_of(index_name, record)
    if session.get_bind().dialect.name != "postgresql":
        head = session.execute(_HEAD, {"index_name": index_name}).first()
        return int(session.execute(_APPEND, linked(fields, head, datetime.now(UTC)))
                   .scalar_one())
    _lock_timeout(session, lock_timeout)
    # A role other than the server's may not insert the principal column at all, not even
    # NULL: an event nobody authenticated leaves it out.
    statement = _APPEND if record.principal is not None else _APPEND_UNATTRIBUTED
    try:
        return int(session.execute(statement, unchained(fields)).scalar_one())
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
            raise AuditBusyError(index_name, lock_timeout) from exc
        raise


def append_all(session: Session, index_name: str, records: Sequence[model.AuditRecord], *,
               lock_timeout: float) -> None:
    """`append` of several events in order, in the caller's one transaction: on SQLite the
    head is read once and each row chained to the one before it in memory, every time at
    least its predecessor's; on PostgreSQL the trigger chains each row under the lock the
    first one took."""
    if len(records) == 1:
        append(session, index_name, records[0], lock_timeout=lock_timeout)
        return
    if session.get_bind().dialect.name != "postgresql":
        head: Sequence[Any] | None = session.execute(_HEAD, {"index_name": index_name}).first()
        rows = []
        for record in records:
            row = linked(fields_of(index_name, record), head, datetime.now(UTC))
            rows.append(row)
            head = (row["row_hash"], row["time"])
        session.execute(_APPEND_MANY, rows)
        return
    _lock_timeout(session, lock_timeout)
    try:
        for attributed, run in attributed_runs(records):
            session.execute(_APPEND_MANY if attributed else _APPEND_MANY_UNATTRIBUTED,
                            [unchained(fields_of(index_name, record)) for record in run])
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
            raise AuditBusyError(index_name, lock_timeout) from exc
        raise


def attributed_runs(records: Sequence[model.AuditRecord],
                    ) -> list[tuple[bool, list[model.AuditRecord]]]:
    """The records in order, in runs that all have a principal or all have none (the two
    insert statements of PostgreSQL, see `append`)."""
    runs: list[tuple[bool, list[model.AuditRecord]]] = []
    for record in records:
        attributed = record.principal is not None
        if runs and runs[-1][0] == attributed:
            runs[-1][1].append(record)
        else:
            runs.append((attributed, [record]))
    return runs


def append_sqlite(connection: sqlite3.Connection, index_name: str,
                  records: Sequence[model.AuditRecord]) -> None:
    """`append_all` on a SQLite file's own driver connection (in autocommit, as the store
    opens it), without SQLAlchemy's statement machinery: its write lock from BEGIN on, the
    head read once, every row chained in memory, one commit. A refusal is sqlite3's error,
    with nothing written."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        head = connection.execute(sql.AUDIT_HEAD, {"index_name": index_name}).fetchone()
        rows = []
        for record in records:
            row = linked(fields_of(index_name, record), head, datetime.now(UTC))
            rows.append(row)
            head = (row["row_hash"], row["time"])
        connection.executemany(_APPEND_MANY_TEXT, rows)
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


def append_postgresql(connection: Any, index_name: str, records: Sequence[model.AuditRecord],
                      *, lock_timeout: float) -> None:
    """`append_all` on a PostgreSQL driver connection (psycopg, outside any transaction),
    without SQLAlchemy's statement machinery: the bounded wait for the chain's lock, every
    row in one `executemany` (the trigger chains each), one commit."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(_SET_LOCK_TIMEOUT, {"wait": f"{max(1, round(lock_timeout * 1000))}ms"})
            for attributed, run in attributed_runs(records):
                cursor.executemany(_APPEND_MANY_PG[attributed],
                                   [unchained(fields_of(index_name, record)) for record in run])
        connection.commit()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            connection.rollback()
        if getattr(exc, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
            raise AuditBusyError(index_name, lock_timeout) from exc
        raise


def _lock_timeout(session: Session, lock_timeout: float) -> None:
    # 0 would mean no bound at all to PostgreSQL: the shortest wait it knows instead.
    milliseconds = max(1, round(lock_timeout * 1000))
    session.execute(text("SELECT set_config('lock_timeout', :wait, true)"),
                    {"wait": f"{milliseconds}ms"})


def _chain_query(sqlite: bool) -> Select[Any]:
    # SQLite keeps each time as text, and the chain hashes that text exactly: read as it is
    # stored, not as SQLAlchemy's DateTime would parse it.
    time = type_coerce(LOAD_EVENT.c.time, Text) if sqlite else LOAD_EVENT.c.time
    columns: list[Any] = [time.label("time") if name == "time" else LOAD_EVENT.c[name]
                          for name in CHAINED_FIELDS]
    return (select(LOAD_EVENT.c.id, LOAD_EVENT.c.prev_hash, LOAD_EVENT.c.row_hash, *columns)
            .where(LOAD_EVENT.c.index_name == bindparam("index_name"))
            .order_by(LOAD_EVENT.c.id)
            .execution_options(yield_per=2_000))


_CHAIN = {sqlite: _chain_query(sqlite) for sqlite in (True, False)}


def verify(session: Session, index_name: str, *, head: str | None = None) -> model.ChainReport:
    """Recompute the chain of one index from its first event; stop at the first broken row;
    check that it still reaches every anchor its reindexes recorded."""
    where = {"index_name": index_name}
    anchors = anchors_of(session.execute(text(sql.AUDIT_ANCHORS), where))
    sqlite = session.get_bind().dialect.name == "sqlite"
    rows = session.execute(_CHAIN[sqlite], where)
    return check_chain(index_name, rows, pinned=head, anchors=anchors)
