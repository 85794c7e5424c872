"""Appends audit events to their index's hash chain and verifies it, through SQLAlchemy."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import bindparam, select, text
from sqlalchemy.orm import Session

from skillindex import model
from skillindex.store import sql
from skillindex.store.chain import (
    GENESIS,
    LIMITS,
    TEXT_FIELDS,
    bounded,
    canonical_time,
    check_chain,
    fields_of,
    linked,
    row_hash,
    unchained,
)
from skillindex.store.models import Base

__all__ = ["GENESIS", "LIMITS", "TEXT_FIELDS", "append", "bounded", "canonical_time",
           "check_chain", "row_hash", "verify"]

LOAD_EVENT = Base.metadata.tables["load_event"]
_HEAD = text(sql.AUDIT_HEAD)
_APPEND = text(sql.AUDIT_APPEND)


def append(session: Session, index_name: str, record: model.AuditRecord) -> int:
    """Append one event at the end of its index's chain, with the store's time.

    On PostgreSQL the insert trigger takes the chain's lock and sets `time`, `prev_hash`,
    `row_hash` and `id` itself, so no role that may only insert can write an unchained or
    backdated row. On SQLite the caller's transaction must hold the write lock from its start
    (BEGIN IMMEDIATE): then reading the head and inserting after it are one step. The sqlite3
    start-up path (store/fastpath.py) appends with the same statements and `chain.linked`.
    """
    fields = fields_of(index_name, record)
    if session.get_bind().dialect.name == "postgresql":
        row = unchained(fields)
    else:
        head = session.execute(_HEAD, {"index_name": index_name}).first()
        row = linked(fields, head, datetime.now(UTC))
    return int(session.execute(_APPEND, row).scalar_one())


_CHAIN = (select(LOAD_EVENT.c.id, LOAD_EVENT.c.prev_hash, LOAD_EVENT.c.row_hash,
                 *(LOAD_EVENT.c[name] for name in TEXT_FIELDS))
          .where(LOAD_EVENT.c.index_name == bindparam("index_name"))
          .order_by(LOAD_EVENT.c.id))


def verify(session: Session, index_name: str, *, head: str | None = None) -> model.ChainReport:
    """Recompute the chain of one index from its first event; stop at the first broken row."""
    rows = session.execute(_CHAIN.execution_options(yield_per=2_000),
                           {"index_name": index_name})
    return check_chain(index_name, rows, pinned=head)
