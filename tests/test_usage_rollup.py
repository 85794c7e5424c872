"""The per-day rollup `usage` reads (`usage_day`, migration 0014): kept by the insert trigger,
made again from the events alone, and for every window equal to what `usage_view` says."""

from __future__ import annotations

import contextlib
import random
import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from skillindex.api import SkillIndex
from skillindex.errors import SkillIndexError
from skillindex.model import AuditRecord
from skillindex.store import chain, sql
from skillindex.store import usage as store_usage
from tests.conftest import OpenIndex, write_skill

START = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)
SPAN = timedelta(days=8)
OUTCOMES = ["ok"] * 6 + ["refused", "mismatch", "missing", "not-found", "error"]
SKILLS = ["pdf", "docx", "xlsx", None]
SESSIONS = ["s-1", "s-2", "s-3", "", None]


def random_log(db: Path, seed: int, count: int) -> None:
    """`count` events at random times over eight days (midnights among them), of random
    levels, outcomes, names and sessions, appended as the sqlite3 path appends them."""
    rng = random.Random(seed)
    times = sorted(START + SPAN * rng.random() for _ in range(count))
    times[::7] = [moment.replace(hour=0, minute=0, second=0, microsecond=0)
                  for moment in times[::7]]
    times.sort()
    connection = sqlite3.connect(db)
    with connection:
        for moment in times:
            level = rng.choice([1, 2, 2, 3])
            outcome = "ok" if level == 1 else rng.choice(OUTCOMES)
            record = AuditRecord(
                event={1: "catalog.published", 2: "skill.read", 3: "resource.read"}[level],
                level=level, outcome=outcome, skill=rng.choice(SKILLS),
                resource="guide.md" if level == 3 else None,
                bytes=rng.randrange(1, 900) if outcome == "ok" else 0,
                session=rng.choice(SESSIONS))
            head = connection.execute(sql.AUDIT_HEAD, {"index_name": "default"}).fetchone()
            connection.execute(sql.AUDIT_APPEND,
                               chain.linked(chain.fields_of("default", record), head, moment))
    connection.close()


def from_the_view(index: SkillIndex, since: datetime, until: datetime,
                  session: str | None = None, skill: str | None = None) -> dict[Any, Any]:
    """What `usage_view`'s rows of the window say of each name, added up here in Python."""
    found: dict[Any, Any] = {}
    with index.engine.connect() as connection:
        rows = connection.execute(text(
            "SELECT skill, day, time, level, outcome, bytes, session, loaded, failed "
            "FROM usage_view WHERE index_name = 'default'")).all()
    for name, day, stored, level, outcome, size, session_id, loaded, failed in rows:
        moment = chain.utc(stored)
        if not since <= moment < until or session not in (None, session_id) or skill not in (
                None, name):
            continue
        entry = found.setdefault("" if name is None else name, {
            "counts": Counter(), "sessions": set(), "loads": Counter(), "failed": Counter(),
            "first": None, "last": None})
        counts = entry["counts"]
        counts["published"] += level == 1
        if level >= 2:
            counts["attempts"] += 1
            counts[outcome] += outcome != "ok"
        if loaded:
            counts["body" if level == 2 else "resource"] += 1
            counts["bytes"] += size
            entry["loads"][day] += 1
            entry["first"] = min(entry["first"] or moment, moment)
            entry["last"] = max(entry["last"] or moment, moment)
            if session_id is not None:
                entry["sessions"].add(session_id)
        if level >= 2 and failed:
            entry["failed"][day] += 1
    return found


def from_usage(index: SkillIndex, since: datetime, until: datetime,
               session: str | None = None, skill: str | None = None) -> dict[Any, Any]:
    with Session(index.engine) as db, db.begin():
        found = store_usage.window(db, "default", since, until, session_id=session,
                                   skill=skill)
    result: dict[Any, Any] = {}
    for item in found:
        row = item.usage
        counts = Counter({"published": item.published, "attempts": row.attempts,
                          "refused": row.refused, "mismatch": row.mismatch,
                          "missing": row.missing, "not-found": row.not_found,
                          "error": row.error, "body": row.body_loads,
                          "resource": row.resource_loads, "bytes": row.bytes})
        assert row.name not in result, row.name  # a name once
        result[row.name] = {
            "counts": +counts, "sessions": set(item.sessions), "loads": Counter(item.load_days),
            "failed": Counter(item.failed_days), "first": row.first_load, "last": row.last_load}
    return result


def comparable(found: dict[Any, Any]) -> dict[Any, Any]:
    return {name: {**entry, "counts": +entry["counts"], "loads": +entry["loads"],
                   "failed": +entry["failed"]} for name, entry in found.items()}


def windows(rng: random.Random) -> list[tuple[datetime, datetime]]:
    """Windows that start and end mid-day, on a midnight, within one day, across all days,
    before and after the events."""
    fixed = [(START, START + SPAN), (START - timedelta(days=3), START + SPAN * 2),
             (START + timedelta(days=2), START + timedelta(days=5)),
             (START + timedelta(days=2, hours=5), START + timedelta(days=2, hours=9)),
             (START + timedelta(days=1, hours=23), START + timedelta(days=2, hours=1)),
             (START + timedelta(hours=13), START + timedelta(days=6, minutes=1)),
             (START + SPAN * 2, START + SPAN * 3)]
    drawn = []
    for _ in range(40):
        low = START - timedelta(hours=6) + (SPAN + timedelta(hours=12)) * rng.random()
        drawn.append((low, low + timedelta(hours=rng.choice([1, 20, 24, 30, 49, 200]) *
                                           rng.random() * 2)))
    return fixed + drawn


@pytest.fixture
def db_backend() -> str:
    return "sqlite"  # backdated events: only the sqlite3 path writes the time it is given


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_window_agrees_with_the_view(tmp_path: Path, open_index: OpenIndex,
                                           seed: int) -> None:
    index = open_index(write_skill(tmp_path / "skills", "pdf").parent)
    random_log(Path(str(index.engine.url.database)), seed, 400)
    rng = random.Random(seed)
    for since, until in windows(rng):
        for session, skill in [(None, None), ("s-2", None), (None, "docx"), ("", None),
                               ("s-1", "pdf")]:
            assert comparable(from_usage(index, since, until, session, skill)) == comparable(
                from_the_view(index, since, until, session, skill)), (since, until, session,
                                                                      skill)


def test_the_trigger_keeps_what_a_rebuild_from_the_events_makes(tmp_path: Path,
                                                                open_index: OpenIndex) -> None:
    index = open_index(write_skill(tmp_path / "skills", "pdf").parent)
    random_log(Path(str(index.engine.url.database)), 4, 300)
    with index.engine.begin() as connection:
        kept = sorted(map(tuple, connection.execute(text(
            "SELECT index_name, day, skill, body, resource, bytes, refused, mismatch, missing, "
            "not_found, error, attempts, published, failed, first_load, last_load "
            "FROM usage_day")).all()), key=repr)
    with Session(index.engine) as db, db.begin():
        assert store_usage.rollup_drift(db, "default") == []
        assert store_usage.rebuild(db, "default") == len(kept)
    with index.engine.begin() as connection:
        made = sorted(map(tuple, connection.execute(text(
            "SELECT index_name, day, skill, body, resource, bytes, refused, mismatch, missing, "
            "not_found, error, attempts, published, failed, first_load, last_load "
            "FROM usage_day")).all()), key=repr)
    assert made == kept


def test_a_rollup_that_lost_events_is_found_and_not_read(tmp_path: Path,
                                                         open_index: OpenIndex) -> None:
    """Events that went in without the trigger (a bulk load that dropped it): the rollup's
    whole days no longer sum to the log's, so `usage` reads the events, and the drift names
    the days until a rebuild."""
    index = open_index(write_skill(tmp_path / "skills", "pdf").parent)
    db = Path(str(index.engine.url.database))
    random_log(db, 5, 100)
    connection = sqlite3.connect(db)
    connection.execute("DROP TRIGGER load_event_usage_day")
    connection.commit()
    connection.close()
    random_log(db, 6, 100)
    since, until = START + timedelta(hours=7), START + SPAN
    assert comparable(from_usage(index, since, until)) == comparable(
        from_the_view(index, since, until))
    with Session(index.engine) as session, session.begin():
        assert store_usage.rollup_drift(session, "default")
        store_usage.rebuild(session, "default")
        assert store_usage.rollup_drift(session, "default") == []


@pytest.mark.parametrize("db_backend", ["sqlite", "postgresql"])
def test_loads_through_the_library_reach_the_rollup_on_both_backends(
        tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    skill = write_skill(root, "pdf", body="# PDF\n")
    (skill / "guide.md").write_text("guide\n")
    index = open_index(root)
    index.reindex()
    for session in ("s-1", "s-2", None):
        index.read("skill://pdf", session=session)
        index.read("skill://pdf/guide.md", session=session)
    with contextlib.suppress(SkillIndexError):
        index.read("skill://nope", session="s-1")
    index.catalog(session="s-1")
    with Session(index.engine) as db, db.begin():
        assert store_usage.rollup_drift(db, "default") == []
        rows = db.execute(text(
            "SELECT skill, body, resource, not_found, attempts, published FROM usage_day "
            "WHERE skill IS NOT NULL ORDER BY skill")).all()
    assert [tuple(row) for row in rows] == [("nope", 0, 0, 1, 1, 0), ("pdf", 3, 3, 0, 6, 0)]
    # A window of whole days reads the rollup; it agrees with the view.
    now = datetime.now(UTC)
    since, until = now - timedelta(days=3), now + timedelta(days=2)
    assert comparable(from_usage(index, since, until)) == comparable(
        from_the_view(index, since, until))
