"""Reads the audit table for people: loads and failed attempts per skill (`usage_view`) for
`usage`, the report and a usage-ordered catalog, and the events after an id for `--follow`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, bindparam, func, select, text
from sqlalchemy.orm import Session

from skillindex.model import AuditEvent, Level, LoggedEvent, SkillUsage
from skillindex.store.chain import utc
from skillindex.store.models import LoadEvent

# The outcomes of a failed attempt, in the order `WINDOW` counts them.
FAILURES = ("refused", "mismatch", "missing", "not-found", "error")

# One row per name with events in the window, from one pass over the window's rows: the
# successful loads of the body and of files, the bytes they handed over, the first and last
# load, each failed skill-level outcome, every skill-level attempt, the catalog publications
# (level 1), the distinct sessions that loaded it (a JSON array: the union across names is the
# window's sessions), and the UTC day of each load and of each failed attempt (the days and
# the busiest names' days are summed from these, so no second pass groups by day).
WINDOW = (
    "SELECT skill, "
    "COUNT(*) FILTER (WHERE loaded = 1 AND level = 2), "
    "COUNT(*) FILTER (WHERE loaded = 1 AND level = 3), "
    "SUM(bytes) FILTER (WHERE loaded = 1), "
    "MIN(time) FILTER (WHERE loaded = 1), MAX(time) FILTER (WHERE loaded = 1), "
    + "".join(f"COUNT(*) FILTER (WHERE level >= 2 AND outcome = '{outcome}'), "
              for outcome in FAILURES)
    + "COUNT(*) FILTER (WHERE level >= 2), COUNT(*) FILTER (WHERE level = 1), "
    "{sessions} FILTER (WHERE loaded = 1 AND session IS NOT NULL), "
    "{days} FILTER (WHERE loaded = 1), {days} FILTER (WHERE level >= 2 AND failed = 1) "
    "FROM usage_view WHERE {where} GROUP BY skill")
# Each backend's spelling of those two aggregates (psycopg hands the JSON over decoded, the
# sqlite3 module as text); a day never holds a comma.
AGGREGATES = {
    "sqlite": {"sessions": "json_group_array(DISTINCT session)", "days": "group_concat(day)"},
    "postgresql": {"sessions": "json_agg(DISTINCT session)", "days": "string_agg(day, ',')"},
}
# Whole events, in `_logged`'s order: the latest failed skill-level attempts of a window
# (newest first), and the events after an id (oldest first).
EVENT_COLUMNS = ("id, index_name, time, event, level, outcome, skill, resource, bytes, digest, "
                 "reason, session, path, row_hash")
FAILED = (f"SELECT {EVENT_COLUMNS} FROM load_event WHERE {{where}} "
          "AND level >= 2 AND outcome <> 'ok' ORDER BY id DESC LIMIT :limit")
AFTER = (f"SELECT {EVENT_COLUMNS} FROM load_event WHERE {{where}} AND id > :after "
         "ORDER BY id LIMIT :limit")
LAST_ID = "SELECT MAX(id) FROM load_event WHERE index_name = :index_name"
# The last event before a time: a stream from that time starts after it.
BEFORE = "SELECT MAX(id) FROM load_event WHERE index_name = :index_name AND time < :since"


def load_counts(session: Session, index_name: str, since: datetime) -> dict[str, int]:
    """Skill name -> successful loads of its body (read or `/skill:`) since `since`."""
    rows = session.execute(
        select(LoadEvent.skill, func.count())
        .where(LoadEvent.index_name == index_name, LoadEvent.outcome == "ok",
               LoadEvent.level == Level.BODY.value, LoadEvent.time >= since,
               LoadEvent.skill.is_not(None))
        .group_by(LoadEvent.skill))
    return {str(skill): int(count) for skill, count in rows}


def last_event(session: Session) -> int:
    """The newest audit row's id (0 for none): a usage-ordered catalog is valid until it moves."""
    return int(session.execute(select(func.coalesce(func.max(LoadEvent.id), 0))).scalar_one())


def _window(statement: str, index_name: str, since: datetime, until: datetime, *,
            session_id: str | None, skill: str | None,
            parts: Mapping[str, str] | None = None) -> tuple[TextClause, dict[str, Any]]:
    """A statement narrowed to one index, the window [since, until) and the filters given
    (`parts`: what else it leaves to fill); times bound as the backend stores them (text on
    SQLite)."""
    where = ["index_name = :index_name", "time >= :since", "time < :until"]
    params: dict[str, Any] = {"index_name": index_name, "since": since, "until": until}
    for column, value in (("session", session_id), ("skill", skill)):
        if value is not None:
            where.append(f"{column} = :{column}")
            params[column] = value
    stored = LoadEvent.__table__.c.time.type
    query = text(statement.format(where=" AND ".join(where), **(parts or {}))).bindparams(
        bindparam("since", type_=stored), bindparam("until", type_=stored))
    return query, params


@dataclass(frozen=True, slots=True)
class NameWindow:
    """One name's figures over a window (`in_catalog` left False: the caller knows the
    catalog), with what is summed across names: the distinct sessions that loaded it, its
    catalog publications, and the UTC day of each of its loads and of each failed attempt
    (one entry an event, left uncounted: the caller counts the days it needs)."""

    usage: SkillUsage
    sessions: Sequence[str]
    published: int
    load_days: Sequence[str]
    failed_days: Sequence[str]


def window(session: Session, index_name: str, since: datetime, until: datetime,
           **filters: Any) -> list[NameWindow]:
    """Every name with events in the window, in one statement over its rows (`WINDOW`); a
    name with only level-1 events (publications, no skill) has no attempts."""
    dialect = session.get_bind().dialect.name
    query, params = _window(WINDOW, index_name, since, until,
                            parts=AGGREGATES.get(dialect, AGGREGATES["sqlite"]), **filters)
    found = []
    for row in session.execute(query, params):
        body, resource, size = map(_number, row[1:4])
        refused, mismatch, missing, not_found, error, attempts, published = map(_number,
                                                                                row[6:13])
        first, last = (None if value is None else utc(value) for value in row[4:6])
        sessions = _listed(row[13])  # distinct already (DISTINCT in the statement)
        found.append(NameWindow(
            SkillUsage("" if row[0] is None else str(row[0]), False, body, resource, size,
                       len(sessions), first, last, refused=refused, mismatch=mismatch,
                       missing=missing, not_found=not_found, error=error, attempts=attempts),
            sessions, published, _days(row[14]), _days(row[15])))
    return found


def _listed(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str) else value


def _days(listed: str | None) -> list[str]:
    return listed.split(",") if listed else []


def failed_events(session: Session, index_name: str, since: datetime, until: datetime,
                  limit: int, **filters: Any) -> list[LoggedEvent]:
    """The latest `limit` failed skill-level attempts of the window, newest first."""
    query, params = _window(FAILED, index_name, since, until, **filters)
    return [_logged(row) for row in session.execute(query, {**params, "limit": limit})]


def events_after(session: Session, index_name: str, after: int, limit: int, *,
                 session_id: str | None = None, skill: str | None = None,
                 outcome: str | None = None) -> list[LoggedEvent]:
    """Up to `limit` events of the index with an id above `after`, in id order (the order
    they were appended in: ids follow the chain)."""
    where = ["index_name = :index_name"]
    params: dict[str, Any] = {"index_name": index_name, "after": after, "limit": limit}
    for column, value in (("session", session_id), ("skill", skill), ("outcome", outcome)):
        if value is not None:
            where.append(f"{column} = :{column}")
            params[column] = value
    query = text(AFTER.format(where=" AND ".join(where)))
    return [_logged(row) for row in session.execute(query, params)]


def last_id(session: Session, index_name: str, *, before: datetime | None = None) -> int:
    """The id of the index's newest event (0 for none); with `before`, of its newest event
    before that time."""
    if before is None:
        found = session.execute(text(LAST_ID), {"index_name": index_name}).scalar()
    else:
        query = text(BEFORE).bindparams(
            bindparam("since", type_=LoadEvent.__table__.c.time.type))
        found = session.execute(query, {"index_name": index_name, "since": before}).scalar()
    return _number(found)


def _logged(row: Sequence[Any]) -> LoggedEvent:
    (event_id, index_name, time, event, level, outcome, skill, resource, size, digest, reason,
     session_id, path, row_hash) = row
    return LoggedEvent(int(event_id), str(index_name), AuditEvent(
        time=utc(time), event=event, level=level, outcome=outcome, skill=skill,
        resource=resource, bytes=size, digest=digest, reason=reason, session=session_id,
        path=path), row_hash)


def _number(value: object) -> int:
    return 0 if value is None else int(value)  # type: ignore[call-overload]
