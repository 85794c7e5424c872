"""`audit --follow`: an index's audit events as they are appended, resumable by event id."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

from skillindex.errors import ConfigError
from skillindex.model import AUDIT_OUTCOMES, LoggedEvent, LoggedListing
from skillindex.query.library import Library
from skillindex.store import usage as store_usage
from skillindex.store.chain import since_of

# Seconds between two looks at the log when it has nothing new: each look is one indexed
# query, so a follower costs the database next to nothing, and a new event shows within this.
INTERVAL = 0.25
# Events read per look; a follower that is behind reads page after page without waiting.
PAGE = 500


def follow(read: Callable[[int], Sequence[LoggedEvent]], after: int, *,
           interval: float = INTERVAL, page: int = PAGE,
           sleep: Callable[[float], None] = time.sleep,
           stop: Callable[[], bool] = lambda: False,
           skipped: Callable[[int], None] = lambda _id: None) -> Iterator[LoggedEvent]:
    """Every event with an id above `after`, in id order, waiting `interval` seconds whenever
    `read(after)` (up to `page` events after an id) has no more; until `stop()` says so.
    A row that does not parse (a `LoggedListing`'s skipped ids) is passed to `skipped` in
    its place, and the stream goes on after it, as `audit` lists the rest.

    Ids follow the order events were committed in (each index's chain is appended under a
    lock, SQLite's ids are its rowids), so resuming after the last id printed, in this process
    or a new one, neither skips an event nor repeats one; a reindex never writes the log.
    Every event committed before `stop()` first says so is delivered: it is asked before each
    read, so the read after it is the last.
    """
    if interval <= 0:
        raise ConfigError(f"interval must be more than 0 seconds, not {interval}")
    while True:
        stopping = stop()
        found = read(after)
        unread = found.skipped if isinstance(found, LoggedListing) else ()
        rows: list[tuple[int, LoggedEvent | None]] = [(event.id, event) for event in found]
        rows += [(number, None) for number in unread]
        for number, event in sorted(rows, key=lambda row: row[0]):
            if event is None:
                skipped(number)
            else:
                yield event
            after = number
        if len(rows) < page:
            if stopping:
                return
            sleep(interval)


def follow_audit(store: Library, *, after: int | None, since: datetime | str | None,
                 interval: float, session: str | None, skill: str | None, outcome: str | None,
                 stop: Callable[[], bool],
                 skipped: Callable[[int], None]) -> Iterator[LoggedEvent]:
    """The events of `store`'s index appended after the event `after` (an id), or from
    `since`, or from now on, as they come (`follow`), each look a transaction of its own."""
    if outcome is not None and outcome not in AUDIT_OUTCOMES:
        raise ConfigError(f"unknown outcome {outcome!r} (use one of "
                          f"{', '.join(AUDIT_OUTCOMES)})")
    start = after if after is not None else last_event_id(store, before=since)
    return follow(lambda last: events_after(store, last, limit=PAGE, session=session,
                                            skill=skill, outcome=outcome),
                  start, interval=interval, stop=stop, skipped=skipped)


def events_after(store: Library, after: int, *, limit: int, session: str | None,
                 skill: str | None, outcome: str | None) -> LoggedListing:
    """Up to `limit` events appended after the event `after` (an id), oldest first."""
    with store.session("read the audit log") as db:
        return store_usage.events_after(db, store.index_name, after, limit, session_id=session,
                                        skill=skill, outcome=outcome)


def last_event_id(store: Library, *, before: datetime | str | None) -> int:
    """The id of the index's newest event (0 for none); with `before`, of the newest event
    before that time: where a stream from then on starts."""
    with store.session("read the audit log") as db:
        return store_usage.last_id(db, store.index_name, before=since_of(before))
