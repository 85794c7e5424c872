"""The audit log's hash chain as pure functions, shared by every path that appends or checks it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from skillindex import model
from skillindex.errors import ConfigError

# The `prev_hash` of the first event of every index.
GENESIS = "0" * 64
# Longest text kept per caller-supplied field, in characters; longer text is cut to exactly this
# length, ending in a marker that says how long it was. The PostgreSQL insert trigger applies the
# same rule (migration 0004), so the two must change together.
LIMITS = {"skill": 256, "resource": 1024, "reason": 2000, "session": 256, "path": 4096}
TEXT_FIELDS = ("index_name", "time", "event", "skill", "resource", "level", "bytes", "digest",
               "outcome", "reason", "session", "path")
# The columns an append writes, in the order of `sql.AUDIT_APPEND`.
COLUMNS = (*TEXT_FIELDS, "prev_hash", "row_hash")
# How SQLAlchemy's SQLite DateTime stores a time: the UTC wall clock, always with microseconds.
# Every SQLite append writes this text itself, so rows from either path sort and compare alike.
STORED_TIME = "%Y-%m-%d %H:%M:%S.%f"


def bounded(text: str | None, limit: int) -> str | None:
    """`text` when it fits, else its start and `…[cut from N characters]`, `limit` long."""
    if text is None or len(text) <= limit:
        return text
    marker = f"…[cut from {len(text)} characters]"
    return text[:limit - len(marker)] + marker


def utc(value: datetime | str) -> datetime:
    """A stored time as an aware UTC datetime: SQLite hands back its text (or SQLAlchemy the
    naive UTC wall clock it was given), PostgreSQL an aware value."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def since_of(value: datetime | str | None) -> datetime | None:
    """The start of an audit listing as a UTC instant; a time without a zone is UTC, like the
    stored times."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ConfigError(f"since must be an ISO 8601 date or time, not {value!r}") from None
    return utc(value)


def stored_time(value: datetime) -> str:
    """The text a SQLite database keeps for this time (see STORED_TIME)."""
    return utc(value).strftime(STORED_TIME)


def canonical_time(value: datetime | str) -> str:
    """The time as it enters the hash: UTC, microseconds, the same text on every backend."""
    return utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


def fields_of(index_name: str, record: model.AuditRecord) -> dict[str, object]:
    """The columns of one event but its time and hashes, the caller's text bounded."""
    return {"index_name": index_name, "event": record.event, "level": int(record.level),
            "bytes": record.bytes, "digest": record.digest, "outcome": record.outcome,
            **{name: bounded(getattr(record, name), limit) for name, limit in LIMITS.items()}}


def unchained(fields: dict[str, object]) -> dict[str, object]:
    """The row for a backend whose insert trigger sets the time and both hashes itself."""
    return {**fields, "time": None, "prev_hash": None, "row_hash": None}


def linked(fields: dict[str, object], head: Sequence[Any] | None,
           now: datetime) -> dict[str, object]:
    """The row that follows `head` (its `row_hash, time`, None for an empty chain) in SQLite.

    Its time is `now`, but never earlier than the head's: the chain's times only go forward.
    """
    prev = GENESIS
    if head is not None:
        now = max(utc(now), utc(head[1]))
        prev = GENESIS if head[0] is None else str(head[0])
    return {**fields, "time": stored_time(now), "prev_hash": prev,
            "row_hash": row_hash(prev, {**fields, "time": canonical_time(now)})}


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
