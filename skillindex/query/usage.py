"""`usage`: what the audit log says of each catalog skill over a window, figures from SQL."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from itertools import chain
from typing import TYPE_CHECKING

from skillindex.errors import ConfigError
from skillindex.model import LoggedEvent, UsageDay, UsageReport
from skillindex.query import listing
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.store import resolved
from skillindex.store import usage as store_usage
from skillindex.store.chain import since_of

if TYPE_CHECKING:  # typing only: the session is the store's, opened by the caller
    from sqlalchemy.orm import Session

# The window when none is given: "this month" as a reviewer means it.
DEFAULT_DAYS = 30
# How many of the most loaded skills get a row of loads per day.
BUSIEST = 5
# A window longer than this starts its days at its first load or failed attempt, not at
# `since`.
MAX_DAYS = 400
_DURATION = re.compile(r"(\d{1,6})([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def window_start(since: str | datetime | None, now: datetime) -> datetime:
    """The start of a window: `since` as an ISO 8601 date or time (UTC when it has no zone),
    or a duration back from `now` (`30d`, `12h`, `2w`, `90m`, `45s`); 30 days by default."""
    if since is None:
        return now - timedelta(days=DEFAULT_DAYS)
    try:
        if isinstance(since, str):
            found = _DURATION.fullmatch(since.strip().lower())
            if found is not None:
                amount, unit = found.groups()
                return _counted_in_days(now - timedelta(**{_UNITS[unit]: int(amount)}))
        start = since_of(since)
        assert start is not None
        return _counted_in_days(start)
    except ConfigError:
        raise ConfigError(f"since must be an ISO 8601 date or time or a duration such as 30d, "
                          f"12h or 2w, not {since!r}") from None
    except OverflowError:
        raise ConfigError(f"since must lie from 0001-01-02 to 9999-12-30 in UTC, not "
                          f"{since!r}") from None


def _counted_in_days(start: datetime) -> datetime:
    """`start`, when the day on each side of it exists too (a window is counted in whole UTC
    days from the midnight after its start); else OverflowError."""
    start.astimezone(UTC) - timedelta(days=1)
    start.astimezone(UTC) + timedelta(days=1)
    return start


def usage(store: Library, here: Here, *, since: datetime | str | None, session: str | None,
          skill: str | None, now: datetime, principal: str | None = None) -> UsageReport:
    """Loads and failed attempts per skill from `since` (default 30 days) to `now`, and the
    catalog skills nobody loaded: the catalog's names read alone from the stored resolution
    (resolved here when a root quarantines), the figures from `usage_view`."""
    start = window_start(since, now)
    with store.session("read the audit log") as db:
        set_id = store.resolution_set(db, here)  # first: it may end the transaction
        names = (resolved.winner_names(db, set_id) if set_id is not None else
                 [winner.name for winner in
                  listing.resolution(store, here, all_findings=False).winners])
        return report(db, here.index_name, names, since=start, until=now, session_id=session,
                      skill=skill, principal=principal)


def failed_attempts(store: Library, here: Here, *, since: datetime | str | None, limit: int,
                    now: datetime) -> list[LoggedEvent]:
    """The latest `limit` refused, mismatched, missing, not-found or failed skill loads from
    `since` (as `usage` reads it) to `now`, newest first."""
    with store.session("read the audit log") as db:
        return store_usage.failed_events(db, here.index_name, window_start(since, now), now,
                                         limit, session_id=None, skill=None)


def report(session: Session, index_name: str, catalog: Iterable[str], *, since: datetime,
           until: datetime, session_id: str | None = None, skill: str | None = None,
           principal: str | None = None, busiest: int = BUSIEST) -> UsageReport:
    """Every name with skill-level events in [since, until) with its figures, the catalog
    skills (`catalog`, the working directory's winners in catalog order) without a successful
    load, loads and failures per day, and the busiest names' loads per day: the window's
    figures per name and day (`store_usage.window`), summed here across names."""
    names = list(catalog)
    known = set(names)
    found = store_usage.window(session, index_name, since, until, session_id=session_id,
                               skill=skill, principal=principal)
    figures = sorted(((replace(item.usage, in_catalog=item.usage.name in known), item)
                      for item in found if item.usage.attempts),
                     key=lambda pair: (-pair[0].loads, -pair[0].failed, pair[0].name))
    rows = [row for row, _ in figures]
    loaded = {row.name for row in rows if row.loads}
    never = tuple(name for name in names
                  if name not in loaded and (skill is None or name == skill))
    loads: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for item in found:
        loads.update(item.load_days)
        failed.update(item.failed_days)
    days = _days(since, until, sorted(loads.keys() | failed.keys()))
    top = [(row.name, item.load_days) for row, item in figures if row.loads][:busiest]
    return UsageReport(
        index=index_name, since=since, until=until, session=session_id, skill=skill,
        skills=tuple(rows), never_loaded=never, catalog_skills=len(names),
        sessions=len(set(chain.from_iterable(item.sessions for item in found))),
        published=sum(item.published for item in found),
        days=tuple(UsageDay(day, loads[day], failed[day]) for day in days),
        busiest=tuple((name, tuple(counted.get(day, 0) for day in days)) for name, counted in top),
        principal=principal, principals=tuple(store_usage.principals(
            session, index_name, since, until, session_id=session_id, skill=skill,
            principal=principal)))


def _days(since: datetime, until: datetime, seen: Sequence[str]) -> list[str]:
    """Every UTC day of the window, oldest first; a window longer than MAX_DAYS starts at
    the first day with a load or a failed attempt instead (a window "since 1970" is not
    20,000 empty days)."""
    last = (until - timedelta(microseconds=1)).astimezone(UTC).date()
    first = since.astimezone(UTC).date()
    if (last - first).days > MAX_DAYS:
        first = date.fromisoformat(seen[0]) if seen else last
    first = min(first, last)
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]
