"""The audit log's hash chain as pure functions, shared by every path that appends or checks it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from skillindex import model
from skillindex.errors import ConfigError
from skillindex.store import sql

# The `prev_hash` of the first event of every index.
GENESIS = "0" * 64
# Longest text kept per caller-supplied field, in characters; longer text is cut to exactly this
# length, ending in a marker that says how long it was. The PostgreSQL insert trigger applies the
# same rule (migration 0004), so the two must change together.
LIMITS = {"skill": 256, "resource": 1024, "reason": 2000, "session": 256, "path": 4096,
          "principal": 256}
TEXT_FIELDS = ("index_name", "time", "event", "skill", "resource", "level", "bytes", "digest",
               "outcome", "reason", "session", "path")
# Hashed after TEXT_FIELDS only when it holds a value (migration 0013): the events written
# before the column existed hash as they did, and an event with a principal cannot hash as
# one without (every field is length-prefixed, so how many there are is part of the bytes).
OPTIONAL_FIELDS = ("principal",)
CHAINED_FIELDS = (*TEXT_FIELDS, *OPTIONAL_FIELDS)
# The columns an append writes, in the order of `sql.AUDIT_APPEND`.
COLUMNS = (*CHAINED_FIELDS, "prev_hash", "row_hash")
# How SQLAlchemy's SQLite DateTime stores a time: the UTC wall clock, always with microseconds.
# Every SQLite append writes this text itself, so rows from either path sort and compare alike;
# it is the one text form of an event's time (a CHECK constraint holds SQLite to it), and the
# text the chain hashes on both backends.
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
    if not isinstance(value, datetime):
        raise TypeError(f"not a time: {value!r}")
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
    moment = utc(value)
    # `%Y` leaves a year before 1000 unpadded on some platforms: the text would not sort.
    return f"{moment.year:04d}{moment.strftime(STORED_TIME[2:])}"


def time_text(value: object) -> str:
    """An event's time as the chain hashes it: SQLite's stored text exactly as it is, or a
    PostgreSQL timestamp in that same form (its only text, the instant being what is stored)."""
    if isinstance(value, datetime):
        return stored_time(value)
    return str(value)


def _field(value: object) -> bytes:
    if value is None:
        return b"-"
    data = str(value).encode("utf-8")
    return b"%d:%s" % (len(data), data)


def row_hash(prev_hash: str, fields: Mapping[str, object]) -> str:
    """sha256 over the previous hash and the text of each field, length-prefixed (NULL is `-`).

    The PostgreSQL trigger computes the very same bytes; `time` must be its `time_text`.
    """
    data = prev_hash.encode("ascii") + b"\n" + b"".join(_field(fields[n]) for n in TEXT_FIELDS)
    data += b"".join(_field(fields[n]) for n in OPTIONAL_FIELDS if fields.get(n) is not None)
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

    Its time is `now`, but never earlier than the head's: the chain's times only go forward
    (a head whose time is no time, which only an edit can leave, is no bound).
    """
    prev = GENESIS
    if head is not None:
        try:
            now = max(utc(now), utc(head[1]))
        except (TypeError, ValueError):
            now = utc(now)
        prev = GENESIS if head[0] is None else str(head[0])
    stored = stored_time(now)
    return {**fields, "time": stored, "prev_hash": prev,
            "row_hash": row_hash(prev, {**fields, "time": stored})}


Run = Callable[[str, dict[str, Any]], Iterable[Sequence[Any]]]


def _first(rows: Iterable[Sequence[Any]]) -> Sequence[Any] | None:
    return next(iter(rows), None)


def anchor(run: Run, index_name: str) -> tuple[str | None, int]:
    """The head hash and length of an index's chain now, for a reindex to record (`run`
    executes a statement of store/sql.py with its parameters, in the caller's transaction).

    Counted from the newest anchor on (the events after its head), so that recording one
    costs a few index lookups however long the log is; from the start when that anchor is
    no longer in the chain."""
    where: dict[str, Any] = {"index_name": index_name}
    head = _first(run(sql.AUDIT_HEAD_ID, where))
    if head is None:
        return GENESIS, 0
    head_id, head_hash = int(head[0]), head[1]
    last = _first(run(sql.LAST_ANCHOR, where))
    if last is not None:
        if last[0] == head_hash:
            return head_hash, int(last[1])
        after = _first(run(sql.AUDIT_AFTER, {**where, "prev_hash": last[0]}))
        if after is not None and int(after[0]) <= head_id:
            (added,) = _first(run(sql.AUDIT_COUNT_FROM, {
                **where, "low": int(after[0]), "high": head_id})) or (0,)
            return head_hash, int(last[1]) + int(added)
    (count,) = _first(run(sql.AUDIT_COUNT_FROM, {**where, "low": 0, "high": head_id})) or (0,)
    return head_hash, int(count)


def impossible_event(fields: Mapping[str, object]) -> str | None:
    """What in an event's fields no disclosure can write (the store's CHECK constraints
    refuse it, so only rows older than them or an edit hold one); None when nothing."""
    event, level = str(fields["event"]), fields["level"]
    own = model.AUDIT_EVENT_LEVELS.get(event)
    if own is None:
        return f"its event {event!r} is none of a disclosure's"
    if str(level) != str(own):
        return f"its level {level!r} is not a {event}'s ({own})"
    if fields["outcome"] not in model.AUDIT_OUTCOMES:
        return f"its outcome {fields['outcome']!r} is none of a disclosure's"
    size = fields["bytes"]
    if not isinstance(size, int) or size < 0:
        return f"its byte count {size!r} is not one"
    if not is_stored_time(str(fields["time"])):
        return f"its time {fields['time']!r} is not in the store's one form"
    return None


def is_stored_time(text: str) -> bool:
    """Whether `text` is a time exactly as the store writes it (STORED_TIME, a real date)."""
    try:
        return datetime.strptime(text, STORED_TIME).strftime(STORED_TIME) == text
    except ValueError:
        return False


def anchors_of(rows: Iterable[Sequence[Any]]) -> dict[int, list[model.Anchor]]:
    """The rows of `sql.AUDIT_ANCHORS` by the chain length each recorded."""
    found: dict[int, list[model.Anchor]] = {}
    for events, head, run_id, started in rows:
        found.setdefault(int(events), []).append(
            model.Anchor(run=int(run_id), time=_shown_time(started), events=int(events),
                         head=None if head is None else str(head)))
    return found


def _shown_time(value: object) -> str:
    try:
        return utc(value).isoformat(timespec="seconds") if isinstance(
            value, datetime | str) else str(value)
    except ValueError:
        return str(value)


def check_chain(index_name: str, rows: Iterable[Sequence[Any]], *,
                pinned: str | None = None,
                anchors: Mapping[int, Sequence[model.Anchor]] | None = None,
                ) -> model.ChainReport:
    """Walk rows `(id, prev_hash, row_hash, *CHAINED_FIELDS)` in id order and judge the links,
    then whether the chain still reaches every anchor (the head and length a reindex saw)."""
    anchors = anchors or {}
    expected = GENESIS
    count = 0
    pinned_at: int | None = None
    checked = covered = 0
    lost: model.AnchorProblem | None = None

    def reach(position: int, head: str) -> None:
        nonlocal checked, covered, lost
        for seen in anchors.get(position, ()):
            if seen.head == head:
                checked, covered = checked + 1, position
            elif lost is None:
                lost = model.AnchorProblem(seen, f"event {position} is not the head run "
                                                 f"{seen.run} recorded: events up to it were "
                                                 "removed or rewritten")

    reach(0, GENESIS)
    before = ""  # the time of the event before, as hashed: one fixed-width form that sorts
    for row in rows:
        event_id, prev, stored = int(row[0]), row[1], row[2]
        fields = dict(zip(CHAINED_FIELDS, row[3:], strict=True))
        fields["time"] = time_text(fields["time"])
        problem = None
        if prev != expected:
            problem = ("it does not follow the event before it (an event was deleted or "
                       "inserted before it)" if prev is not None else "it has no chain hashes")
        elif (impossible := impossible_event(fields)) is not None:
            problem = f"{impossible}: no disclosure writes that (it was forged or edited)"
        elif stored != row_hash(prev, fields):
            problem = "its fields do not match its hash (it was edited or replaced)"
        elif str(fields["time"]) < before:
            # Every append takes the later of the clock and the head's time: an earlier one
            # was written past the store (a hand-made insert, chained or not).
            problem = (f"its time is earlier than the event before it ({before}): no append "
                       "writes that (it was inserted by hand)")
        if problem is not None:
            return model.ChainReport(
                index=index_name, events=count, head=expected,
                broken=model.BrokenEvent(event_id, str(fields["time"]), problem),
                pinned=pinned, pinned_at=pinned_at, anchors=checked, anchored=covered,
                lost=lost)
        count += 1
        expected, before = stored, str(fields["time"])
        if pinned is not None and stored == pinned:
            pinned_at = count
        reach(count, stored)
    beyond = [seen for position in sorted(anchors) if position > count
              for seen in anchors[position]]
    if lost is None and beyond:
        lost = model.AnchorProblem(beyond[0], f"the chain ends at event {count}, but run "
                                              f"{beyond[0].run} recorded {beyond[0].events}: "
                                              "events were removed from its end")
    return model.ChainReport(index=index_name, events=count, head=expected, broken=None,
                             pinned=pinned, pinned_at=pinned_at, anchors=checked,
                             anchored=covered, lost=lost)
