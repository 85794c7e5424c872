"""The audit log's hash chain: appends each event linked to the one before it and verifies it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, insert, select
from sqlalchemy.orm import Session

from skillindex import model
from skillindex.store.models import Base

LOAD_EVENT = Base.metadata.tables["load_event"]
# The `prev_hash` of the first event of every index.
GENESIS = "0" * 64
# Longest text kept per caller-supplied field, in characters; longer text is cut to exactly this
# length, ending in a marker that says how long it was. The PostgreSQL insert trigger applies the
# same rule (migration 0004), so the two must change together.
LIMITS = {"skill": 256, "resource": 1024, "reason": 2000, "session": 256, "path": 4096}
TEXT_FIELDS = ("index_name", "time", "event", "skill", "resource", "level", "bytes", "digest",
               "outcome", "reason", "session", "path")


def bounded(text: str | None, limit: int) -> str | None:
    """`text` when it fits, else its start and `…[cut from N characters]`, `limit` long."""
    if text is None or len(text) <= limit:
        return text
    marker = f"…[cut from {len(text)} characters]"
    return text[:limit - len(marker)] + marker


def canonical_time(value: datetime) -> str:
    """The time as it enters the hash: UTC, microseconds, the same text on every backend."""
    if value.tzinfo is None:  # SQLite hands back the naive UTC wall clock it was given
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _field(value: object) -> bytes:
    if value is None:
        return b"-"
    data = str(value).encode("utf-8")
    return b"%d:%s" % (len(data), data)


def row_hash(prev_hash: str, fields: dict[str, object]) -> str:
    """sha256 over the previous hash and each canonical field, length-prefixed (NULL is `-`).

    The PostgreSQL trigger computes the very same bytes; `time` must already be canonical text.
    """
    data = prev_hash.encode("ascii") + b"\n" + b"".join(_field(fields[n]) for n in TEXT_FIELDS)
    return hashlib.sha256(data).hexdigest()


def _row_fields(index_name: str, record: model.AuditRecord) -> dict[str, object]:
    return {"index_name": index_name, "event": record.event, "level": int(record.level),
            "bytes": record.bytes, "digest": record.digest, "outcome": record.outcome,
            **{name: bounded(getattr(record, name), limit) for name, limit in LIMITS.items()}}


_HEAD = (select(LOAD_EVENT.c.row_hash, LOAD_EVENT.c.time)
         .where(LOAD_EVENT.c.index_name == bindparam("index_name"))
         .order_by(LOAD_EVENT.c.id.desc()).limit(1))
_INSERT = insert(LOAD_EVENT).returning(LOAD_EVENT.c.id)


def append(session: Session, index_name: str, record: model.AuditRecord) -> int:
    """Append one event at the end of its index's chain, with the store's time.

    On PostgreSQL the insert trigger takes the chain's lock and sets `time`, `prev_hash`,
    `row_hash` and `id` itself, so no role that may only insert can write an unchained or
    backdated row. On SQLite the caller's transaction must hold the write lock from its start
    (BEGIN IMMEDIATE): then reading the head and inserting after it are one step.
    """
    row = _row_fields(index_name, record)
    if session.get_bind().dialect.name != "postgresql":
        head = session.execute(_HEAD, {"index_name": index_name}).first()
        now = datetime.now(UTC)
        if head is not None:
            # Never earlier than the event before it: the chain's times only go forward.
            now = max(now, head.time.replace(tzinfo=UTC) if head.time.tzinfo is None
                      else head.time)
        prev = GENESIS if head is None or head.row_hash is None else head.row_hash
        row["time"] = now
        row["prev_hash"] = prev
        row["row_hash"] = row_hash(prev, {**row, "time": canonical_time(now)})
    return int(session.execute(_INSERT, [row]).scalar_one())


_CHAIN = (select(LOAD_EVENT.c.id, LOAD_EVENT.c.prev_hash, LOAD_EVENT.c.row_hash,
                 *(LOAD_EVENT.c[name] for name in TEXT_FIELDS))
          .where(LOAD_EVENT.c.index_name == bindparam("index_name"))
          .order_by(LOAD_EVENT.c.id))


def verify(session: Session, index_name: str, *, head: str | None = None) -> model.ChainReport:
    """Recompute the chain of one index from its first event; stop at the first broken row."""
    rows = session.execute(_CHAIN.execution_options(yield_per=2_000),
                           {"index_name": index_name})
    return check_chain(index_name, rows, pinned=head)


def check_chain(index_name: str, rows: Iterable[Sequence[Any]], *,
                pinned: str | None = None) -> model.ChainReport:
    """Walk rows `(id, prev_hash, row_hash, *TEXT_FIELDS)` in id order and judge the links."""
    expected = GENESIS
    count = 0
    pinned_at: int | None = None
    for row in rows:
        event_id, prev, stored = int(row[0]), row[1], row[2]
        fields = dict(zip(TEXT_FIELDS, row[3:], strict=True))
        fields["time"] = canonical_time(fields["time"])
        problem = None
        if prev != expected:
            problem = ("it does not follow the event before it (an event was deleted or "
                       "inserted before it)" if prev is not None else "it has no chain hashes")
        elif stored != row_hash(prev, fields):
            problem = "its fields do not match its hash (it was edited or replaced)"
        if problem is not None:
            return model.ChainReport(
                index=index_name, events=count, head=expected,
                broken=model.BrokenEvent(event_id, str(fields["time"]), problem),
                pinned=pinned, pinned_at=pinned_at)
        count += 1
        expected = stored
        if pinned is not None and stored == pinned:
            pinned_at = count
    return model.ChainReport(index=index_name, events=count, head=expected, broken=None,
                             pinned=pinned, pinned_at=pinned_at)

