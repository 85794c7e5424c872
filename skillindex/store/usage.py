"""Reads the audit table for people: loads and failed attempts per skill (`usage_view`) for
`usage`, the report and a usage-ordered catalog, and the events after an id for `--follow`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import TextClause, bindparam, func, select, text
from sqlalchemy.orm import Session

from skillindex.model import (
    AuditEvent,
    Level,
    LoggedEvent,
    LoggedListing,
    PrincipalUsage,
    SkillUsage,
)
from skillindex.store.chain import utc
from skillindex.store.models import LoadEvent

# The outcomes of a failed attempt, in the order `WINDOW` counts them.
FAILURES = ("refused", "mismatch", "missing", "not-found", "error")

# What the events of one name and UTC day sum to, in this order: the successful loads of the
# body and of files, the bytes they handed over, the first and last load, each failed
# skill-level outcome, every skill-level attempt, the catalog publications (level 1) and the
# failed skill-level attempts. `usage_day` (migration 0014, kept by an insert trigger) holds
# them per whole day; `EVENT_DAYS` sums them from the events of `usage_view`, for the partial
# days at a window's edges and for what the rollup cannot answer (a window of one session).
FIGURES = ("body", "resource", "bytes", "first_load", "last_load", "refused", "mismatch",
           "missing", "not_found", "error", "attempts", "published", "failed")
BOUNDS = {"first_load": "MIN", "last_load": "MAX"}
DAY_SUMS = ", ".join((
    "COUNT(*) FILTER (WHERE loaded = 1 AND level = 2) AS body",
    "COUNT(*) FILTER (WHERE loaded = 1 AND level = 3) AS resource",
    "COALESCE(SUM(bytes) FILTER (WHERE loaded = 1), 0) AS bytes",
    "MIN(time) FILTER (WHERE loaded = 1) AS first_load",
    "MAX(time) FILTER (WHERE loaded = 1) AS last_load",
    *(f"COUNT(*) FILTER (WHERE level >= 2 AND outcome = '{outcome}') AS "
      f"{outcome.replace('-', '_')}" for outcome in FAILURES),
    "COUNT(*) FILTER (WHERE level >= 2) AS attempts",
    "COUNT(*) FILTER (WHERE level = 1) AS published",
    "COUNT(*) FILTER (WHERE level >= 2 AND failed = 1) AS failed"))
ROLLUP_DAYS = (f"SELECT skill, day, {', '.join(FIGURES)} FROM usage_day "
               "WHERE index_name = :index_name AND day >= :first_day AND day < :end_day{skill}")
EVENT_DAYS = f"SELECT skill, day, {DAY_SUMS} FROM usage_view WHERE {{where}} GROUP BY skill, day"
# One row per name from its day rows (`{days}`: whole days from the rollup, partial ones from
# the events, or every day from the events): the figures summed, the loads and the failed
# attempts of each day as a `day:count` list (a day never holds a comma or a colon).
NAME_SUMS = ("SELECT skill, "
             + ", ".join(f"{BOUNDS.get(column, 'SUM')}({column})" for column in FIGURES)
             + ", {load_days}, {failed_days} FROM ({days}) AS d GROUP BY skill")
# The distinct sessions that loaded each name in a window: the one figure no day sums to.
SESSIONS = ("SELECT skill, {sessions} FROM load_event WHERE {where} AND outcome = 'ok' "
            "AND level >= 2 AND session IS NOT NULL GROUP BY skill")
# Each backend's spelling of the lists (psycopg hands the JSON over decoded, the sqlite3
# module as text). Loads are the body's and the files' (levels 2 and 3 are the only skill
# levels: model.AUDIT_EVENT_LEVELS).
AGGREGATES = {
    "sqlite": {"sessions": "json_group_array(DISTINCT session)",
               "load_days": "group_concat(day || ':' || (body + resource)) "
                            "FILTER (WHERE body + resource > 0)",
               "failed_days": "group_concat(day || ':' || failed) FILTER (WHERE failed > 0)"},
    "postgresql": {"sessions": "json_agg(DISTINCT session)",
                   "load_days": "string_agg(day || ':' || (body + resource), ',') "
                                "FILTER (WHERE body + resource > 0)",
                   "failed_days": "string_agg(day || ':' || failed, ',') "
                                  "FILTER (WHERE failed > 0)"},
}
# Per principal (who `serve --http` authenticated): successful loads, their bytes, the
# sessions and skills they reached, the failed skill-level attempts and the last load. Read
# from `load_event` (the one table that keeps the principal); rows without one are not shown.
LOADED = "outcome = 'ok' AND level >= 2"
PRINCIPALS = (
    f"SELECT principal, COUNT(*) FILTER (WHERE {LOADED}), "
    f"COALESCE(SUM(bytes) FILTER (WHERE {LOADED}), 0), "
    f"COUNT(DISTINCT session) FILTER (WHERE {LOADED}), "
    f"COUNT(DISTINCT skill) FILTER (WHERE {LOADED}), "
    "COUNT(*) FILTER (WHERE level >= 2 AND outcome <> 'ok'), "
    f"MAX(time) FILTER (WHERE {LOADED}) "
    "FROM load_event WHERE {where} AND principal IS NOT NULL GROUP BY principal "
    "ORDER BY principal")
# How many events a window holds: the names read partly from the rollup must sum to it.
EVENT_COUNT = "SELECT COUNT(*) FROM load_event WHERE {where}"
# An index's rollup made again from its events (what migration 0014 did for every index), and
# both read whole for a comparison.
CLEAR = "DELETE FROM usage_day WHERE index_name = :index_name"
# In day order, as the trigger adds them: a window's days are then neighbours on disk.
REBUILD = (f"INSERT INTO usage_day (index_name, skill, day, {', '.join(FIGURES)}) "
           f"SELECT index_name, skill, day, {DAY_SUMS} FROM usage_view "
           "WHERE index_name = :index_name GROUP BY index_name, day, skill ORDER BY day, skill")
ALL_DAYS = (f"SELECT skill, day, {', '.join(FIGURES)} FROM usage_day "
            "WHERE index_name = :index_name")
EVENTS_BY_DAY = (f"SELECT skill, day, {DAY_SUMS} FROM usage_view "
                 "WHERE index_name = :index_name GROUP BY skill, day")
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
            session_id: str | None, skill: str | None, principal: str | None = None,
            parts: Mapping[str, str] | None = None) -> tuple[TextClause, dict[str, Any]]:
    """A statement narrowed to one index, the window [since, until) and the filters given
    (`parts`: what else it leaves to fill); times bound as the backend stores them (text on
    SQLite)."""
    where, params = _where(index_name, since, until, session_id=session_id, skill=skill,
                           principal=principal)
    query = text(statement.format(where=where, **(parts or {}))).bindparams(*_times(params))
    return query, params


def _where(index_name: str, since: datetime, until: datetime, *, session_id: str | None,
           skill: str | None, principal: str | None = None,
           tag: str = "") -> tuple[str, dict[str, Any]]:
    """The condition of a window and its parameters (times named `since{tag}`,
    `until{tag}`, so that one statement may hold several windows). A principal is matched
    through `load_event`, which `usage_view` does not repeat it from."""
    where = ["index_name = :index_name", f"time >= :since{tag}", f"time < :until{tag}"]
    params: dict[str, Any] = {"index_name": index_name, f"since{tag}": since,
                              f"until{tag}": until}
    for column, value in (("session", session_id), ("skill", skill)):
        if value is not None:
            where.append(f"{column} = :{column}")
            params[column] = value
    if principal is not None:
        where.append("id IN (SELECT id FROM load_event WHERE principal = :principal)")
        params["principal"] = principal
    return " AND ".join(where), params


def _times(params: Mapping[str, Any]) -> list[Any]:
    stored = LoadEvent.__table__.c.time.type
    return [bindparam(name, type_=stored) for name in params
            if name.startswith(("since", "until"))]


@dataclass(frozen=True, slots=True)
class NameWindow:
    """One name's figures over a window (`in_catalog` left False: the caller knows the
    catalog), with what is summed across names: the distinct sessions that loaded it, its
    catalog publications, and its successful loads and failed attempts per UTC day."""

    usage: SkillUsage
    sessions: Sequence[str]
    published: int
    load_days: Mapping[str, int]
    failed_days: Mapping[str, int]


def window(session: Session, index_name: str, since: datetime, until: datetime, *,
           session_id: str | None, skill: str | None,
           principal: str | None = None) -> list[NameWindow]:
    """Every name with events in the window, from one statement over its day rows
    (`NAME_SUMS` over `day_rows`) and one over its loads' sessions (`SESSIONS`); a name with
    only level-1 events (publications, no skill) has no attempts.

    A window read partly from the rollup is checked against the log: its names must hold as
    many events as the audit has in the window (one count over an index), or it is read again
    from the events alone, so a rollup behind or ahead of the log (as after a bulk load that
    went in without the trigger) is never what `usage` shows.
    """
    dialect = session.get_bind().dialect.name
    parts = AGGREGATES.get(dialect, AGGREGATES["sqlite"])
    rolled = session_id is None and principal is None  # the rollup keeps neither
    rows = _name_rows(session, parts, *day_rows(index_name, since, until, rolled=rolled,
                                                session_id=session_id, skill=skill,
                                                principal=principal))
    if rolled:
        query, params = _window(EVENT_COUNT, index_name, since, until, session_id=None,
                                skill=skill)
        if sum(_number(row[11]) + _number(row[12]) for row in rows) != _number(
                session.execute(query, params).scalar()):
            rows = _name_rows(session, parts, *day_rows(index_name, since, until, rolled=False,
                                                        session_id=None, skill=skill))
    query, params = _window(SESSIONS, index_name, since, until, session_id=session_id,
                            skill=skill, principal=principal, parts=parts)
    sessions = {name: _listed(listed) for name, listed in session.execute(query, params)}
    found = []
    for row in rows:
        body, resource, size, refused, mismatch, missing, not_found, error, attempts, published = (
            map(_number, (*row[1:4], *row[6:13])))
        first, last = (None if value is None else utc(value) for value in row[4:6])
        loaded_by = sessions.get(row[0], [])  # distinct already (DISTINCT in the statement)
        found.append(NameWindow(
            SkillUsage("" if row[0] is None else str(row[0]), False, body, resource, size,
                       len(loaded_by), first, last, refused=refused, mismatch=mismatch,
                       missing=missing, not_found=not_found, error=error, attempts=attempts),
            loaded_by, published, _counted(row[14]), _counted(row[15])))
    return found


def _name_rows(session: Session, parts: Mapping[str, str], days: str,
               params: dict[str, Any]) -> list[Sequence[Any]]:
    query = text(NAME_SUMS.format(days=days, **parts)).bindparams(*_times(params))
    return list(session.execute(query, params).all())


def day_rows(index_name: str, since: datetime, until: datetime, *, session_id: str | None,
             skill: str | None, principal: str | None = None,
             rolled: bool = True) -> tuple[str, dict[str, Any]]:
    """A statement of what each name's events of each UTC day in [since, until) sum to (in
    `FIGURES`' order after the name and the day), and its parameters: with `rolled`, the
    window's whole days from the rollup and its partial first and last days from the events;
    else, or for a window of one session or principal (the rollup keeps neither) or without
    a whole day, every day from the events."""
    first, end = _whole_days(since, until)
    if rolled and session_id is None and principal is None and first < end:
        params: dict[str, Any] = {"index_name": index_name, "skill": skill,
                                  "first_day": first.date().isoformat(),
                                  "end_day": end.date().isoformat()}
        parts = [ROLLUP_DAYS.format(skill="" if skill is None else " AND skill = :skill")]
        for tag, (low, high) in enumerate(((since, first), (end, until))):
            if low < high:
                where, edge = _where(index_name, low, high, session_id=None, skill=skill,
                                     tag=str(tag))
                parts.append(EVENT_DAYS.format(where=where))
                params.update(edge)
        return " UNION ALL ".join(parts), params
    where, params = _where(index_name, since, until, session_id=session_id, skill=skill,
                           principal=principal)
    return EVENT_DAYS.format(where=where), params


def principals(session: Session, index_name: str, since: datetime, until: datetime, *,
               session_id: str | None, skill: str | None,
               principal: str | None) -> list[PrincipalUsage]:
    """Each principal with events in the window, by name: what it loaded and was refused."""
    query, params = _window(PRINCIPALS, index_name, since, until, session_id=session_id,
                            skill=skill, principal=principal)
    found = []
    for name, loads, size, sessions, skills, failed, last in session.execute(query, params):
        found.append(PrincipalUsage(str(name), _number(loads), _number(size), _number(sessions),
                                    _number(skills), _number(failed),
                                    None if last is None else utc(last)))
    return found


def _whole_days(since: datetime, until: datetime) -> tuple[datetime, datetime]:
    """The first UTC midnight at or after `since` and the last at or before `until`: the
    window's whole days lie between them (none when the first is not before the last)."""
    start = since.astimezone(UTC)
    first = start.replace(hour=0, minute=0, second=0, microsecond=0)
    if first < start:
        first += timedelta(days=1)
    end = until.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return first, end


def _counted(listed: str | None) -> dict[str, int]:
    """A `day:count` list (`NAME_SUMS`) as day -> count."""
    counted: dict[str, int] = {}
    for item in listed.split(",") if listed else ():
        day, _, number = item.partition(":")
        counted[day] = counted.get(day, 0) + int(number)
    return counted


def rebuild(session: Session, index_name: str) -> int:
    """Make the index's rollup again from its events (in the caller's transaction; on
    PostgreSQL as the schema's owner: other roles may only read it); its row count."""
    where = {"index_name": index_name}
    session.execute(text(CLEAR), where)
    session.execute(text(REBUILD), where)
    return _number(session.execute(
        text("SELECT COUNT(*) FROM usage_day WHERE index_name = :index_name"), where).scalar())


def rollup_drift(session: Session, index_name: str) -> list[tuple[str | None, str]]:
    """The (name, day) pairs whose rollup row differs from what the index's events of that
    day sum to, or that only one of them has: none when the rollup agrees with the log."""
    where = {"index_name": index_name}

    def keyed(statement: str) -> dict[tuple[str | None, str], tuple[Any, ...]]:
        return {(row[0], str(row[1])): _figures(row[2:]) for row in
                session.execute(text(statement), where)}

    rolled, logged = keyed(ALL_DAYS), keyed(EVENTS_BY_DAY)
    return sorted((key for key in rolled.keys() | logged.keys()
                   if rolled.get(key) != logged.get(key)),
                  key=lambda key: (key[1], key[0] or ""))


def _figures(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple((None if value is None else utc(value)) if column in BOUNDS else _number(value)
                 for column, value in zip(FIGURES, values, strict=True))


def _listed(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str) else value


def failed_events(session: Session, index_name: str, since: datetime, until: datetime,
                  limit: int, **filters: Any) -> list[LoggedEvent]:
    """The latest `limit` failed skill-level attempts of the window, newest first."""
    query, params = _window(FAILED, index_name, since, until, **filters)
    return [_logged(row) for row in session.execute(query, {**params, "limit": limit})]


def events_after(session: Session, index_name: str, after: int, limit: int, *,
                 session_id: str | None = None, skill: str | None = None,
                 outcome: str | None = None) -> LoggedListing:
    """Up to `limit` events of the index with an id above `after`, in id order (the order
    they were appended in: ids follow the chain); a row that does not parse is counted in
    the limit and its id listed apart."""
    where = ["index_name = :index_name"]
    params: dict[str, Any] = {"index_name": index_name, "after": after, "limit": limit}
    for column, value in (("session", session_id), ("skill", skill), ("outcome", outcome)):
        if value is not None:
            where.append(f"{column} = :{column}")
            params[column] = value
    query = text(AFTER.format(where=" AND ".join(where)))
    events, skipped = [], []
    for row in session.execute(query, params):
        try:
            events.append(_logged(row))
        except (TypeError, ValueError):  # as `audit` lists the rest: see rows.events_of
            skipped.append(int(row[0]))
    return LoggedListing(events, skipped)


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
