"""`usage` and `usage_view`: the figures per skill equal plain SQL counts over the same audit
rows, on both backends; windows, filters, never-loaded skills and the command's output."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, text

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.cli.usage import sparkline
from skillindex.errors import ConfigError, SkillIndexError
from skillindex.model import AuditRecord
from skillindex.query.usage import window_start
from skillindex.store import chain, sql
from skillindex.store.models import LoadEvent
from tests.conftest import OpenIndex, isolate_cli, write_skill

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# The columns the docs promise (README, "usage_view"); more may follow, none go.
VIEW_COLUMNS = ["id", "index_name", "time", "day", "event", "skill", "resource", "level",
                "outcome", "bytes", "session", "loaded", "failed"]


def attempt(call: Any, *args: Any, **options: Any) -> None:
    with contextlib.suppress(SkillIndexError):
        call(*args, **options)


@pytest.fixture
def busy(tmp_path: Path, open_index: OpenIndex) -> SkillIndex:
    """An index of four skills and a mix of every outcome, from three sessions."""
    root = tmp_path / "skills"
    for name in ("pdf", "docx", "xlsx", "idle"):
        skill = write_skill(root, name, body=f"# {name}\n")
        (skill / "guide.md").write_text(f"{name} guide\n")
    index = open_index(root)
    index.reindex()
    for session in ("s-1", "s-2", "s-1"):
        index.read("skill://pdf", session=session)
        index.read("skill://pdf/guide.md", session=session)
    index.skill_command("docx", "go", session="s-3")
    index.read("skill://docx/guide.md", session="s-2")
    attempt(index.read, "skill://pdf/../secret", session="s-2")  # refused
    attempt(index.read, "skill://nope", session="s-1")  # not-found
    (root / "xlsx" / "guide.md").write_text("changed since the reindex\n")
    attempt(index.read, "skill://xlsx/guide.md", session="s-1")  # mismatch
    (root / "docx" / "guide.md").unlink()
    attempt(index.read, "skill://docx/guide.md", session="s-3")  # missing
    index.catalog(session="s-1")  # level 1: no skill's load
    return index


def plain_counts(index: SkillIndex) -> dict[str, dict[str, Any]]:
    """What an auditor's hand-written SQL over `load_event` says of each skill."""
    event = LoadEvent
    ok = event.outcome == "ok"
    found: dict[str, dict[str, Any]] = {}
    with index.engine.connect() as connection:
        rows = connection.execute(
            select(event.skill, event.level, event.outcome, func.count(), func.sum(event.bytes),
                   func.min(event.time), func.max(event.time))
            .where(event.index_name == index.index_name, event.level >= 2)
            .group_by(event.skill, event.level, event.outcome))
        for skill, level, outcome, number, size, first, last in rows:
            entry = found.setdefault(str(skill), {"body_loads": 0, "resource_loads": 0, "bytes": 0,
                                             "attempts": 0, "first": [], "last": [],
                                             "refused": 0, "mismatch": 0, "missing": 0,
                                             "not_found": 0, "error": 0})
            entry["attempts"] += number
            if outcome == "ok":
                entry["body_loads" if level == 2 else "resource_loads"] += number
                entry["bytes"] += size
                entry["first"].append(chain.utc(first))
                entry["last"].append(chain.utc(last))
            else:
                entry[outcome.replace("-", "_")] += number
        for skill, sessions in connection.execute(
                select(event.skill, func.count(func.distinct(event.session)))
                .where(event.index_name == index.index_name, event.level >= 2, ok)
                .group_by(event.skill)):
            found[str(skill)]["sessions"] = sessions
    for entry in found.values():
        entry.setdefault("sessions", 0)
        entry["first"] = min(entry["first"], default=None)
        entry["last"] = max(entry["last"], default=None)
    return found


def test_the_figures_equal_a_plain_count_of_the_same_rows(busy: SkillIndex) -> None:
    report = busy.usage(since="1h")
    expected = plain_counts(busy)
    assert {row.name for row in report.skills} == set(expected) == {"pdf", "docx", "xlsx",
                                                                     "nope"}
    for row in report.skills:
        want = expected[row.name]
        assert (row.body_loads, row.resource_loads, row.bytes, row.sessions, row.attempts) == (
            want["body_loads"], want["resource_loads"], want["bytes"], want["sessions"],
            want["attempts"]), row.name
        assert (row.refused, row.mismatch, row.missing, row.not_found, row.error) == (
            want["refused"], want["mismatch"], want["missing"], want["not_found"],
            want["error"]), row.name
        assert (row.first_load, row.last_load) == (want["first"], want["last"]), row.name


def test_what_each_skill_shows(busy: SkillIndex) -> None:
    report = busy.usage()
    rows = {row.name: row for row in report.skills}
    # The most loaded first, then the most failed, then by name.
    assert [row.name for row in report.skills] == ["pdf", "docx", "nope", "xlsx"]
    assert (rows["pdf"].body_loads, rows["pdf"].resource_loads, rows["pdf"].sessions,
            rows["pdf"].refused) == (3, 3, 2, 1)
    assert (rows["docx"].body_loads, rows["docx"].resource_loads, rows["docx"].missing) == (
        1, 1, 1)
    assert (rows["xlsx"].loads, rows["xlsx"].mismatch) == (0, 1)
    assert (rows["nope"].in_catalog, rows["nope"].not_found) == (False, 1)
    assert report.never_loaded == ("idle", "xlsx")
    totals = report.totals()
    assert (totals["catalog_skills"], totals["loaded_skills"], totals["never_loaded"],
            totals["loads"], totals["sessions"], totals["catalog_published"]) == (4, 2, 2, 8, 3,
                                                                                  1)
    assert report.days[-1].loads == 8 and report.days[-1].failed == 4
    assert dict(report.busiest)["pdf"][-1] == 6


def test_the_view_has_its_documented_columns(busy: SkillIndex) -> None:
    with busy.engine.connect() as connection:
        result = connection.execute(text(
            "SELECT * FROM usage_view WHERE index_name = :i ORDER BY id"), {"i": "default"})
        columns = list(result.keys())
        rows = [dict(zip(columns, row, strict=True)) for row in result]
        loads = connection.execute(text(
            "SELECT skill, SUM(loaded) FROM usage_view GROUP BY skill ORDER BY skill")).all()
    assert columns[:len(VIEW_COLUMNS)] == VIEW_COLUMNS
    assert rows[0]["day"] == chain.utc(rows[0]["time"]).date().isoformat()
    assert sum(row["loaded"] for row in rows) == 8
    assert sum(row["failed"] for row in rows) == 4
    assert {str(skill): int(number) for skill, number in loads}["pdf"] == 6


def test_filters_narrow_every_figure(busy: SkillIndex) -> None:
    by_session = busy.usage(session="s-2")
    assert {row.name: (row.loads, row.refused) for row in by_session.skills} == {
        "pdf": (2, 1), "docx": (1, 0)}
    assert by_session.never_loaded == ("idle", "xlsx")
    one = busy.usage(skill="xlsx")
    assert [row.name for row in one.skills] == ["xlsx"]
    assert one.never_loaded == ("xlsx",)
    assert busy.usage(skill="pdf").never_loaded == ()


def test_a_window_after_the_events_is_empty(busy: SkillIndex) -> None:
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    report = busy.usage(since=later)
    assert report.skills == ()
    assert report.never_loaded == ("docx", "idle", "pdf", "xlsx")
    assert report.totals()["loads"] == 0


def by_principal_in_sql(index: SkillIndex) -> list[tuple[Any, ...]]:
    """An auditor's query of the documented view (`load_event_view`), per principal."""
    with index.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(
            "SELECT principal, "
            "SUM(CASE WHEN outcome = 'ok' AND level >= 2 THEN 1 ELSE 0 END), "
            "SUM(CASE WHEN outcome = 'ok' AND level >= 2 THEN bytes ELSE 0 END), "
            "COUNT(DISTINCT CASE WHEN outcome = 'ok' AND level >= 2 THEN session END), "
            "COUNT(DISTINCT CASE WHEN outcome = 'ok' AND level >= 2 THEN skill END), "
            "SUM(CASE WHEN outcome <> 'ok' AND level >= 2 THEN 1 ELSE 0 END) "
            "FROM load_event_view WHERE principal IS NOT NULL "
            "GROUP BY principal ORDER BY principal"))]


def test_usage_groups_and_narrows_by_principal(busy: SkillIndex) -> None:
    # What `serve --http` appends for authenticated callers, beside busy's unauthenticated rows.
    for principal, skill, outcome, size, session in (
            ("alice", "pdf", "ok", 10, "a-1"), ("alice", "docx", "ok", 20, "a-2"),
            ("alice", "pdf", "refused", 0, "a-1"), ("bob", "pdf", "ok", 5, "b-1")):
        busy._append_event(AuditRecord(event="skill.read", level=2, outcome=outcome,
                                       skill=skill, bytes=size, session=session,
                                       principal=principal))
    report = busy.usage()
    assert [(row.principal, row.loads, row.bytes, row.sessions, row.skills, row.failed)
            for row in report.principals] == by_principal_in_sql(busy) == [
        ("alice", 2, 30, 2, 2, 1), ("bob", 1, 5, 1, 1, 0)]
    assert report.principals[0].last_load is not None
    alice = busy.usage(principal="alice")
    assert alice.principal == "alice"
    assert {row.name: (row.loads, row.refused) for row in alice.skills} == {
        "pdf": (1, 1), "docx": (1, 0)}
    assert [row.principal for row in alice.principals] == ["alice"]
    assert alice.never_loaded == ("idle", "xlsx")
    assert busy.usage(principal="nobody").skills == ()


@pytest.mark.parametrize("db_backend", ["sqlite"])
def test_windows_and_days_follow_the_stored_times(tmp_path: Path,
                                                  open_index: OpenIndex) -> None:
    """Events backdated in the store itself (as the sqlite3 path appends them), on three
    days: the window and the days are the store's UTC times."""
    index = open_index(write_skill(tmp_path / "skills", "pdf").parent)
    index.reindex()
    times = [NOW - timedelta(days=40), NOW - timedelta(days=2, hours=1),
             NOW - timedelta(days=2), NOW - timedelta(minutes=5)]
    append_at(Path(str(index.engine.url.database)), times)
    month = index.usage(since="2026-11-01")
    assert [row.loads for row in month.skills] == [3]
    assert {day.day: day.loads for day in month.days if day.loads} == {
        "2026-11-29": 2, "2026-12-01": 1}
    assert month.days[0].day == "2026-11-01"
    assert index.usage(since="2026-10-01").skills[0].loads == 4
    assert index.usage(since=NOW - timedelta(days=2)).skills[0].loads == 2
    assert index.usage(since="2026-10-01").skills[0].first_load == times[0]


def append_at(db: Path, times: list[datetime]) -> None:
    """Successful body loads of `pdf` at these times, linked into the chain."""
    connection = sqlite3.connect(db)
    with connection:
        for moment in times:
            head = connection.execute(sql.AUDIT_HEAD, {"index_name": "default"}).fetchone()
            record = AuditRecord(event="skill.read", level=2, outcome="ok", skill="pdf",
                                 bytes=10, session="s")
            connection.execute(sql.AUDIT_APPEND,
                               chain.linked(chain.fields_of("default", record), head, moment))
    connection.close()


@pytest.mark.parametrize(("given", "expected"), [
    (None, NOW - timedelta(days=30)),
    ("30d", NOW - timedelta(days=30)),
    ("12h", NOW - timedelta(hours=12)),
    ("2w", NOW - timedelta(weeks=2)),
    ("90m", NOW - timedelta(minutes=90)),
    ("45s", NOW - timedelta(seconds=45)),
    ("2026-11-01", datetime(2026, 11, 1, tzinfo=UTC)),
    ("2026-11-01T10:00:00+02:00", datetime(2026, 11, 1, 8, tzinfo=UTC)),
], ids=["default", "days", "hours", "weeks", "minutes", "seconds", "date", "zoned"])
def test_window_starts(given: str | None, expected: datetime) -> None:
    assert window_start(given, NOW) == expected


@pytest.mark.parametrize("given", ["yesterday", "30", "-3d", "3y", ""],
                         ids=["word", "number", "negative", "unit", "empty"])
def test_a_window_start_that_is_neither_is_refused(given: str) -> None:
    with pytest.raises(ConfigError, match="duration"):
        window_start(given, NOW)


@pytest.mark.parametrize("given", ["9999-12-31T23:59:59+14:00", "9999-12-31", "0001-01-01",
                                   "0001-01-01T12:00:00+14:00", "999999d"])
def test_a_window_start_at_the_calendar_s_end_is_refused(busy: SkillIndex, given: str) -> None:
    # The window is counted from the midnight after its start, which must exist.
    with pytest.raises(ConfigError, match="from 0001-01-02 to 9999-12-30"):
        busy.usage(since=given)


@pytest.mark.parametrize(("values", "expected"), [
    ([0, 0, 0], "···"),
    ([0, 1, 8, 4], "·▁█▄"),
    ([5], "█"),
], ids=["none", "scaled", "one"])
def test_sparkline(values: list[int], expected: str) -> None:
    assert sparkline(values) == expected


def test_a_long_window_is_bucketed_to_the_width() -> None:
    assert len(sparkline([1] * 365, width=60)) == 53


# -- the command ---------------------------------------------------------------------------------

@pytest.fixture
def cli_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "skills"
    for name in ("pdf", "idle"):
        write_skill(root, name)
    isolate_cli(tmp_path, monkeypatch, root)
    return root


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_the_command_prints_figures_chart_never_loaded_and_totals(cli_root: Path) -> None:
    assert run("reindex", "-q").exit_code == 0
    for _ in range(3):
        assert run("read", "skill://pdf", "--session", "s-1").exit_code == 0
    assert run("read", "skill://ghost\x1b[2J").exit_code == 3
    result = run("usage", "--chart")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    pdf = next(line for line in lines if line.startswith("pdf "))
    assert pdf.split()[:6] == ["pdf", "3", "3", "0", str(3 * len("# Body\n")), "1"]
    assert any(line.startswith("ghost\\x1b[2J *") for line in lines)
    assert "\x1b" not in result.output
    chart = next(line for line in lines if line.strip().startswith("pdf") and "█" in line)
    assert chart.strip().endswith("█  3")
    assert "never loaded in this window: 1 of 2 catalog skills:" in result.output
    assert "  idle" in lines
    assert "totals: 3 loads" in result.output


def test_the_command_speaks_json_and_csv(cli_root: Path) -> None:
    run("reindex", "-q")
    run("read", "skill://pdf")
    data = json.loads(run("--json", "usage", "--since", "1d").output)
    assert data["skills"][0]["name"] == "pdf" and data["skills"][0]["loads"] == 1
    assert data["never_loaded"] == ["idle"]
    assert data["totals"]["loads"] == 1
    assert json.loads(run("usage", "--format", "json").output)["totals"] == data["totals"]
    table = list(csv.DictReader(io.StringIO(run("usage", "--format", "csv").output)))
    assert [(row["name"], row["loads"], row["in_catalog"]) for row in table] == [
        ("pdf", "1", "True"), ("idle", "0", "True")]


@pytest.mark.parametrize("name", ['=1+HYPERLINK("http://x","y")', "+1", "-1+1", "@SUM(A1)",
                                  "\tx", "\rx"],
                         ids=["equals", "plus", "minus", "at", "tab", "cr"])
def test_a_csv_cell_a_spreadsheet_would_run_is_text(cli_root: Path, name: str) -> None:
    # A refused attempt's name comes from whoever asked, a client without a token included.
    run("reindex", "-q")
    assert run("read", f"skill://{name}").exit_code != 0
    table = list(csv.DictReader(io.StringIO(run("usage", "--format", "csv").output)))
    names = [row["name"] for row in table]
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r"))
                   for row in table for cell in row.values())
    assert any(cell.startswith("'") for cell in names), names
    assert [row["loads"] for row in table] == ["0"] * len(table)


def test_a_bad_window_is_a_usage_error(cli_root: Path) -> None:
    result = run("usage", "--since", "last week")
    assert result.exit_code == 2
    assert "duration" in result.output


def test_the_command_shows_each_principal(cli_root: Path) -> None:
    run("reindex", "-q")
    run("read", "skill://pdf")
    plain = run("usage").output
    assert "PRINCIPAL" not in plain  # nobody authenticated: no such table
    with SkillIndex.open(db=os.environ["SKILLINDEX_DB"]) as index:
        index._append_event(AuditRecord(event="skill.read", level=2, outcome="ok",
                                        skill="pdf", bytes=7, session="x", principal="alice"))
    lines = run("usage").output.splitlines()
    header = next(line for line in lines if line.startswith("PRINCIPAL"))
    assert header.split() == ["PRINCIPAL", "LOADS", "BYTES", "SESSIONS", "SKILLS", "FAILED",
                              "LAST", "LOAD"]
    assert lines[lines.index(header) + 1].split()[:6] == ["alice", "1", "7", "1", "1", "0"]
    data = json.loads(run("--json", "usage", "--principal", "alice").output)
    assert data["principal"] == "alice"
    assert [row["name"] for row in data["skills"]] == ["pdf"]
    assert data["skills"][0]["loads"] == 1
    assert [row["principal"] for row in data["principals"]] == ["alice"]
