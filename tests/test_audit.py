"""The audit log's hash chain, store-set time, bounded text and the downgrade guard, on both
backends."""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Connection, Engine, insert, select, text
from sqlalchemy.exc import DatabaseError

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.errors import AuditKeptError, SkillIndexError
from skillindex.model import AuditRecord, Level
from skillindex.query import disclose
from skillindex.store import audit, migrate
from skillindex.store.engine import make_engine
from tests.conftest import OpenIndex, write_skill


@pytest.fixture
def index(tmp_path: Path, open_index: OpenIndex) -> SkillIndex:
    root = tmp_path / "skills"
    skill = write_skill(root, "pdf", body="# PDF\n")
    (skill / "guide.md").write_text("guide\n")
    opened = open_index(root)
    opened.reindex()
    return opened


def attempt(index: SkillIndex, uri: str, **options: Any) -> None:
    with contextlib.suppress(SkillIndexError):
        index.read(uri, reason=options.pop("reason", "test"), **options)


def three_events(index: SkillIndex) -> list[dict[str, Any]]:
    attempt(index, "skill://pdf", session="s-1")
    attempt(index, "skill://pdf/guide.md", session="s-1")
    attempt(index, "skill://nope", session="s-2")
    return rows(index.engine)


def rows(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as connection:
        return [dict(row) for row in connection.execute(
            select(audit.LOAD_EVENT).order_by(audit.LOAD_EVENT.c.id)).mappings()]


# -- the chain ------------------------------------------------------------------------------------

def test_every_event_links_to_the_one_before(index: SkillIndex) -> None:
    events = three_events(index)
    assert events[0]["prev_hash"] == audit.GENESIS
    assert [e["prev_hash"] for e in events[1:]] == [e["row_hash"] for e in events[:-1]]
    report = index.verify_audit()
    assert report.ok
    assert (report.events, report.head, report.broken) == (3, events[-1]["row_hash"], None)


def test_the_head_changes_with_every_event(index: SkillIndex) -> None:
    heads = [index.verify_audit().head]
    for number in range(4):
        attempt(index, "skill://pdf", session=f"s-{number}")
        heads.append(index.verify_audit().head)
    assert len(set(heads)) == 5
    assert heads[0] == audit.GENESIS


def test_text_of_every_kind_hashes_alike_on_both_backends(index: SkillIndex) -> None:
    """The PostgreSQL trigger and the Python verifier must see the same bytes."""
    attempt(index, "skill://pdf/caf%C3%A9\u202e😀.md", reason="é \x00 \u202e 😀 \n\t\"'\\",
            session="ünïcode")
    index.append_event(AuditRecord(event="catalog.published", level=Level.CATALOG, outcome="ok",
                                   bytes=2**40, digest=None, reason=None, session=None))
    report = index.verify_audit()
    assert report.ok, report.broken
    assert report.events == 2


def test_chains_of_two_indexes_are_separate(index: SkillIndex, tmp_path: Path,
                                            open_index: OpenIndex) -> None:
    other = open_index(tmp_path / "skills", index="other")
    attempt(index, "skill://pdf")
    attempt(other, "skill://pdf")
    attempt(index, "skill://pdf")
    assert (index.verify_audit().events, other.verify_audit().events) == (2, 1)
    assert index.verify_audit().ok and other.verify_audit().ok


def test_a_pinned_head_is_found_later_and_a_foreign_one_is_not(index: SkillIndex) -> None:
    attempt(index, "skill://pdf")
    pinned = index.verify_audit().head
    attempt(index, "skill://pdf")
    attempt(index, "skill://pdf")
    report = index.verify_audit(head=pinned)
    assert report.ok
    assert report.as_dict()["pinned"] == {"hash": pinned, "found": True, "position": 1,
                                          "events_after": 2}
    stranger = index.verify_audit(head="ab" * 32)
    assert not stranger.ok
    assert stranger.broken is None
    assert stranger.as_dict()["pinned"]["found"] is False  # type: ignore[index]


# -- tampering, with every guard of the database dropped first -----------------------------------

def drop_guards(connection: Connection) -> None:
    """What the owner of the database (or of the SQLite file) can always do."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("ALTER TABLE load_event DISABLE TRIGGER USER"))
    else:
        for name in ("load_event_no_update", "load_event_no_delete", "load_event_no_replace"):
            connection.execute(text(f"DROP TRIGGER {name}"))
    connection.execute(text("DROP INDEX ix_load_event_chain"))


def _insert(connection: Connection, row: dict[str, Any], *, replace: bool = False) -> None:
    statement = insert(audit.LOAD_EVENT)
    connection.execute(statement.prefix_with("OR REPLACE") if replace else statement, [row])


def edit_row(connection: Connection, events: list[dict[str, Any]]) -> int:
    connection.execute(text("UPDATE load_event SET outcome = 'refused', bytes = 0 WHERE id = :i"),
                       {"i": events[1]["id"]})
    return int(events[1]["id"])


def delete_row(connection: Connection, events: list[dict[str, Any]]) -> int:
    connection.execute(text("DELETE FROM load_event WHERE id = :i"), {"i": events[1]["id"]})
    return int(events[2]["id"])


def insert_row(connection: Connection, events: list[dict[str, Any]]) -> int:
    # A forged first event with a hash that is right for itself: the real first one no longer
    # follows what comes before it.
    forged = {**events[0], "id": 0, "outcome": "refused", "bytes": 0}
    fields = {n: forged[n] for n in audit.TEXT_FIELDS}
    fields["time"] = audit.canonical_time(forged["time"])
    forged["row_hash"] = audit.row_hash(audit.GENESIS, fields)
    _insert(connection, forged)
    return int(events[0]["id"])


def replace_row(connection: Connection, events: list[dict[str, Any]]) -> int:
    forged = {**events[1], "outcome": "refused", "bytes": 0}
    if connection.dialect.name == "postgresql":
        connection.execute(text("DELETE FROM load_event WHERE id = :i"), {"i": forged["id"]})
        _insert(connection, forged)
    else:
        _insert(connection, forged, replace=True)
    return int(forged["id"])


TAMPERING: dict[str, Callable[[Connection, list[dict[str, Any]]], int]] = {
    "edited": edit_row, "deleted": delete_row, "inserted": insert_row,
    "replaced": replace_row}


@pytest.mark.parametrize("tamper", TAMPERING.values(), ids=TAMPERING.keys())
def test_verify_finds_the_first_broken_row(index: SkillIndex,
                                           tamper: Callable[..., int]) -> None:
    events = three_events(index)
    assert index.verify_audit().ok
    with index.engine.begin() as connection:
        drop_guards(connection)
        broken_id = tamper(connection, events)
    report = index.verify_audit()
    assert not report.ok
    assert report.broken is not None
    assert report.broken.id == broken_id


def test_a_rewritten_history_loses_its_published_head(index: SkillIndex) -> None:
    """Recomputing every hash after an edit keeps the chain whole, but not the pinned head."""
    events = three_events(index)
    pinned = index.verify_audit().head
    with index.engine.begin() as connection:
        drop_guards(connection)
        prev = audit.GENESIS
        for event in events:
            fields = {n: event[n] for n in audit.TEXT_FIELDS}
            fields["outcome"] = "refused"
            fields["time"] = audit.canonical_time(event["time"])
            digest = audit.row_hash(prev, fields)
            connection.execute(text("UPDATE load_event SET outcome = 'refused', prev_hash = :p, "
                                    "row_hash = :h WHERE id = :i"),
                               {"p": prev, "h": digest, "i": event["id"]})
            prev = digest
    assert index.verify_audit().ok
    assert not index.verify_audit(head=pinned).ok


@pytest.fixture
def sqlite_index(tmp_path: Path, env: Any) -> SkillIndex:
    from tests.conftest import root_settings

    root = tmp_path / "skills"
    write_skill(root, "pdf")
    opened = SkillIndex.open(root_settings(root), db=f"sqlite:///{tmp_path / 's.sqlite'}",
                             env=env)
    opened.reindex()
    return opened


def test_sqlite_refuses_insert_or_replace_over_an_event(sqlite_index: SkillIndex) -> None:
    attempt(sqlite_index, "skill://pdf")
    [event] = rows(sqlite_index.engine)
    forged = {**event, "outcome": "refused", "bytes": 0}
    with pytest.raises(DatabaseError, match="append-only"), \
            sqlite_index.engine.begin() as connection:
        _insert(connection, forged, replace=True)
    assert rows(sqlite_index.engine) == [event]
    sqlite_index.close()


# -- time and text, set and bounded by the store ---------------------------------------------------

def test_the_store_sets_the_time(index: SkillIndex) -> None:
    before = datetime.now(UTC)
    index.append_event(AuditRecord(event="catalog.published", level=Level.CATALOG, outcome="ok"))
    [event] = index.audit()
    # The server's clock on PostgreSQL: allow for a little skew between the two clocks.
    assert before - timedelta(seconds=5) <= event.time <= datetime.now(UTC) + timedelta(seconds=5)
    assert not hasattr(AuditRecord, "time")


def test_postgresql_chains_and_times_even_a_raw_insert(pg_url: str, env: Any,
                                                       tmp_path: Path) -> None:
    """A role that may only insert cannot backdate a row or leave it out of the chain."""
    with SkillIndex.open(None, db=pg_url, env=env) as index:
        attempt(index, "skill://pdf")
        with index.engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO load_event (id, index_name, time, event, level, bytes, outcome, "
                "reason, prev_hash, row_hash) VALUES (1, 'default', '2001-01-01T00:00:00Z', "
                "'skill.read', 2, 0, 'ok', :reason, 'forged', 'forged')"),
                {"reason": "r" * 5000})
        events = index.audit()
        assert events[-1].time > datetime.now(UTC) - timedelta(minutes=1)
        assert len(events[-1].reason or "") == audit.LIMITS["reason"]
        report = index.verify_audit()
        assert report.ok and report.events == 2


@pytest.mark.parametrize("field", ["resource", "reason", "session"])
def test_caller_text_is_bounded_with_a_marker(index: SkillIndex, field: str) -> None:
    huge = "x" * 100_000
    if field == "resource":
        attempt(index, f"skill://pdf/{huge}")
    else:
        attempt(index, "skill://pdf", **{field: huge})
    [event] = rows(index.engine)
    stored = event[field]
    assert len(stored) == audit.LIMITS[field]
    assert stored.startswith("xxx")
    assert stored.endswith("…[cut from 100000 characters]")
    assert index.verify_audit().ok


def test_bounded_keeps_short_text_and_is_idempotent() -> None:
    assert audit.bounded("short", 10) == "short"
    assert audit.bounded(None, 10) is None
    cut = audit.bounded("y" * 500, 100)
    assert cut is not None and len(cut) == 100
    assert audit.bounded(cut, 100) == cut


# -- concurrent appenders --------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from skillindex.api import SkillIndex
    from skillindex.config import Settings
    from skillindex.model import AuditRecord
    index = SkillIndex.open(Settings(presets=False), db=sys.argv[1], cwd=sys.argv[2])
    for number in range(int(sys.argv[3])):
        index.append_event(AuditRecord(event="skill.read", level=2, outcome="ok",
                                       session=f"{sys.argv[4]}-{number}"))
    index.close()
""")


def test_concurrent_appenders_keep_one_linear_chain(db_url: str, tmp_path: Path) -> None:
    SkillIndex.open(None, db=db_url, cwd=tmp_path).close()  # migrated before the race
    each = 25
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, db_url, str(tmp_path), str(each),
                                 name], stderr=subprocess.PIPE, text=True)
               for name in ("a", "b", "c")]
    for writer in writers:
        _, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
    with SkillIndex.open(None, db=db_url, cwd=tmp_path) as index:
        report = index.verify_audit()
        assert report.ok, report.broken
        assert report.events == 3 * each


# -- migrations ------------------------------------------------------------------------------------

@pytest.mark.unmigrated
def test_the_upgrade_chains_events_already_logged(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine, "0002")
    with engine.begin() as connection:
        for number, index_name in enumerate(["default", "other", "default"]):
            connection.execute(text(
                "INSERT INTO load_event (index_name, time, event, level, bytes, outcome, "
                "session) VALUES (:n, :t, 'skill.read', 2, 10, 'ok', :s)"),
                {"n": index_name, "t": datetime(2026, 1, 1, 12, 0, number, 123456, tzinfo=UTC),
                 "s": f"s-{number}"})
    migrate.upgrade(engine)
    engine.dispose()
    with SkillIndex.open(None, db=db_url, cwd=Path.cwd()) as index:
        assert index.verify_audit().events == 2
        assert index.verify_audit().ok
        index.append_event(AuditRecord(event="skill.read", level=2, outcome="ok"))
        report = index.verify_audit()
        assert report.ok and report.events == 3
    with SkillIndex.open(None, db=db_url, cwd=Path.cwd(), index="other") as other:
        assert other.verify_audit().ok and other.verify_audit().events == 1


@pytest.mark.parametrize("target", ["base", "0003"])
def test_a_downgrade_keeps_a_nonempty_audit_unless_told(index: SkillIndex, target: str) -> None:
    attempt(index, "skill://pdf")
    index.close()
    engine = make_engine(index.url)
    with pytest.raises(AuditKeptError, match="--discard-audit"):
        migrate.downgrade(engine, target)
    assert migrate.current(engine) == migrate.HEAD
    assert len(rows(engine)) == 1
    migrate.downgrade(engine, target, discard_audit=True)
    assert migrate.current(engine) == (None if target == "base" else target)
    engine.dispose()


# -- the command line ------------------------------------------------------------------------------

def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_audit_verify_prints_the_head_and_exits_1_at_a_broken_row(index: SkillIndex) -> None:
    events = three_events(index)
    db = ["--db", index.url, "--config", "/dev/null"]
    ok = run(*db, "audit", "verify")
    assert ok.exit_code == 0, ok.output
    assert events[-1]["row_hash"] in ok.output
    shape = json.loads(run(*db, "--json", "audit", "verify", "--head",
                           events[0]["row_hash"]).stdout)
    assert shape == {"ok": True, "index": "default", "events": 3,
                     "head": events[-1]["row_hash"], "broken": None,
                     "pinned": {"hash": events[0]["row_hash"], "found": True, "position": 1,
                                "events_after": 2}}
    assert run(*db, "audit", "verify", "--head", "0" * 63 + "1").exit_code == 1
    with index.engine.begin() as connection:
        drop_guards(connection)
        edit_row(connection, events)
    broken = run(*db, "audit", "verify")
    assert broken.exit_code == 1
    assert f"broken: event {events[1]['id']}" in broken.output
    # The log itself is still listed.
    assert run(*db, "audit").exit_code == 0


def test_cli_downgrade_refuses_in_one_line_then_discards_when_told(index: SkillIndex) -> None:
    attempt(index, "skill://pdf")
    index.close()
    db = ["--db", index.url, "--config", "/dev/null"]
    refused = CliRunner().invoke(cli, [*db, "db", "downgrade", "base"])
    assert refused.exit_code == 1
    assert refused.stderr.count("\n") == 1
    assert "--discard-audit" in refused.stderr
    done = run(*db, "db", "downgrade", "base", "--discard-audit")
    assert done.exit_code == 0, done.output


# -- the digest of what a refused read found -------------------------------------------------------

def _grow_guide(skill: Path) -> Path:
    path = skill / "guide.md"
    path.write_text("guide\nand a line added after the reindex\n")
    return path


def _grow_body(skill: Path) -> Path:
    path = skill / "SKILL.md"
    path.write_text(path.read_text() + "more body\n")
    return path


def _add_file(skill: Path) -> Path:
    path = skill / "new.md"
    path.write_text("added after the reindex\n")
    return path


FOUND = {"grown-resource": ("skill://pdf/guide.md", _grow_guide),
         "grown-body": ("skill://pdf", _grow_body),
         "unindexed": ("skill://pdf/new.md", _add_file)}


@pytest.mark.parametrize(("uri", "change"), FOUND.values(), ids=FOUND.keys())
def test_a_mismatch_keeps_the_digest_of_what_was_found(index: SkillIndex, tmp_path: Path,
                                                       uri: str,
                                                       change: Callable[[Path], Path]) -> None:
    path = change(tmp_path / "skills" / "pdf")
    attempt(index, uri)
    [event] = index.audit()
    assert event.outcome == "mismatch"
    assert event.digest == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_grown_past_the_limit_is_not_hashed_for_the_audit(index: SkillIndex,
                                                                 tmp_path: Path) -> None:
    with (tmp_path / "skills" / "pdf" / "guide.md").open("r+b") as handle:
        handle.truncate(disclose.AUDIT_DIGEST_LIMIT + 10)
    attempt(index, "skill://pdf/guide.md")
    [event] = index.audit()
    # Past the file limit the read is refused as too large before anything is hashed.
    assert (event.outcome, event.digest) == ("refused", None)
