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
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Connection, Engine, insert, inspect, select, text
from sqlalchemy.exc import DatabaseError

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.errors import AuditKeptError, SkillIndexError
from skillindex.model import AuditRecord, Level
from skillindex.query import disclose, oneshot
from skillindex.store import audit, chain, migrate, sql
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


def append(index: SkillIndex, record: AuditRecord) -> None:
    """An event as the library's own flows append it (there is no public way in)."""
    index._append_event(record)


def rows(engine: Engine) -> list[dict[str, Any]]:
    """Every event with the columns its revision has (an older one has fewer)."""
    with engine.connect() as connection:
        present = {column["name"] for column in inspect(connection).get_columns("load_event")}
        columns = [column for column in audit.LOAD_EVENT.c if column.name in present]
        return [dict(row) for row in connection.execute(
            select(*columns).order_by(audit.LOAD_EVENT.c.id)).mappings()]


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
    append(index, AuditRecord(event="catalog.published", level=Level.CATALOG, outcome="ok",
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
        for name in ("load_event_no_update", "load_event_no_delete", "load_event_no_replace",
                     "load_event_in_order"):
            connection.execute(text(f"DROP TRIGGER IF EXISTS {name}"))
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
    fields["time"] = audit.time_text(forged["time"])
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


def rewrite_history(connection: Connection, events: list[dict[str, Any]]) -> None:
    """Every event refused, and every hash computed again: a chain whole in itself."""
    prev = audit.GENESIS
    for event in events:
        fields = {n: event[n] for n in audit.TEXT_FIELDS}
        fields["outcome"] = "refused"
        fields["time"] = audit.time_text(event["time"])
        digest = audit.row_hash(prev, fields)
        connection.execute(text("UPDATE load_event SET outcome = 'refused', prev_hash = :p, "
                                "row_hash = :h WHERE id = :i"),
                           {"p": prev, "h": digest, "i": event["id"]})
        prev = digest


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
        rewrite_history(connection, events)
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


def backdated(event: dict[str, Any], when: str) -> dict[str, Any]:
    """An ordinary event after `event`, chained right, with its time set to `when`."""
    forged = {**event, "id": event["id"] + 1, "time": when, "prev_hash": event["row_hash"]}
    fields = {n: forged[n] for n in audit.TEXT_FIELDS}
    fields["time"] = when
    forged["row_hash"] = audit.row_hash(event["row_hash"], fields)
    return forged


def test_sqlite_refuses_an_event_earlier_than_the_one_before(sqlite_index: SkillIndex) -> None:
    attempt(sqlite_index, "skill://pdf")
    [event] = rows(sqlite_index.engine)
    with pytest.raises(DatabaseError, match="in time order"), \
            sqlite_index.engine.begin() as connection:
        connection.execute(text(sql.AUDIT_APPEND),
                           backdated(event, "2000-01-01 00:00:00.000000"))
    assert rows(sqlite_index.engine) == [event]
    sqlite_index.close()


def test_verify_flags_an_event_earlier_than_the_one_before(index: SkillIndex) -> None:
    """The chain proves order: a row chained right but dated before its predecessor (written
    with the guards set aside) is where `audit verify` stops."""
    attempt(index, "skill://pdf")
    [event] = rows(index.engine)
    forged = backdated(event, "2000-01-01 00:00:00.000000")
    with index.engine.begin() as connection:
        drop_guards(connection)
        connection.execute(text(sql.AUDIT_APPEND), forged)
    [*_, last] = rows(index.engine)
    assert audit.time_text(last["time"]) == "2000-01-01 00:00:00.000000"
    report = index.verify_audit()
    assert report.broken is not None and report.broken.id == last["id"]
    assert "earlier than the event before it" in report.broken.problem
    assert report.events == 1


# -- time and text, set and bounded by the store ---------------------------------------------------

def test_the_store_sets_the_time(index: SkillIndex) -> None:
    before = datetime.now(UTC)
    append(index, AuditRecord(event="catalog.published", level=Level.CATALOG, outcome="ok"))
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


# -- principals (migration 0013) -------------------------------------------------------------------

def with_principals(index: SkillIndex) -> list[dict[str, Any]]:
    """An event of a local read (no principal), then two of a server's, one name too long."""
    attempt(index, "skill://pdf", session="s-1")
    for name in ("alice", "p" * 1000):
        index.read_stored("skill://pdf", disclose.SkillRef("pdf", None), None, reason="test",
                          session="mcp:host/1", principal=name)
    return rows(index.engine)


def test_a_principal_is_kept_bounded_and_chained(index: SkillIndex) -> None:
    events = with_principals(index)
    assert [e["principal"] for e in events[:2]] == [None, "alice"]
    assert len(events[2]["principal"]) == audit.LIMITS["principal"]
    assert events[2]["principal"].endswith("…[cut from 1000 characters]")
    assert [e.principal for e in index.audit()][:2] == [None, "alice"]
    assert index.verify_audit().ok


@pytest.mark.parametrize(("row", "value"), [(1, "mallory"), (1, None), (0, "alice")],
                         ids=["changed", "erased", "added"])
def test_an_edited_principal_breaks_the_chain(index: SkillIndex, row: int,
                                              value: str | None) -> None:
    events = with_principals(index)
    with index.engine.begin() as connection:
        drop_guards(connection)
        connection.execute(text("UPDATE load_event SET principal = :p WHERE id = :i"),
                           {"p": value, "i": events[row]["id"]})
    report = index.verify_audit()
    assert report.broken is not None and report.broken.id == events[row]["id"]
    assert "do not match its hash" in report.broken.problem


def test_an_event_without_a_principal_hashes_as_before_the_column() -> None:
    fields: dict[str, object] = {name: "x" for name in audit.TEXT_FIELDS}
    before = audit.row_hash(audit.GENESIS, fields)
    assert audit.row_hash(audit.GENESIS, {**fields, "principal": None}) == before
    assert audit.row_hash(audit.GENESIS, {**fields, "principal": "alice"}) != before
    # Each field is length-prefixed: no principal can pass for a longer path, nor the reverse.
    assert audit.row_hash(audit.GENESIS, {**fields, "path": "x5:alice"}) != audit.row_hash(
        audit.GENESIS, {**fields, "principal": "alice"})


def test_the_principal_view_groups_by_principal(index: SkillIndex) -> None:
    with_principals(index)
    with index.engine.connect() as connection:
        grouped: dict[str, int] = dict(connection.execute(text(
            "SELECT coalesce(principal, '-'), count(*) FROM load_event_view "
            "GROUP BY principal")).all())
    assert grouped["-"] == 1 and grouped["alice"] == 1


def _log_before_principals(connection: Connection, sessions: list[str]) -> None:
    """Events as the code before migration 0013 appended them: no principal column (chained by
    the trigger on PostgreSQL, by the library on SQLite)."""
    columns = [name for name in chain.COLUMNS if name != "principal"]
    statement = text(f"INSERT INTO load_event ({', '.join(columns)}) "
                     f"VALUES ({', '.join(':' + name for name in columns)})")
    for session in sessions:
        fields = chain.fields_of("default", AuditRecord(event="skill.read", level=2,
                                                        outcome="ok", session=session))
        del fields["principal"]
        if connection.dialect.name == "postgresql":
            row = chain.unchained(fields)
        else:
            head = connection.execute(text(sql.AUDIT_HEAD), {"index_name": "default"}).first()
            row = chain.linked(fields, head, datetime.now(UTC))
        connection.execute(statement, row)


@pytest.mark.unmigrated
def test_the_principal_upgrade_keeps_every_head_and_its_downgrade_keeps_the_chain(
        db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine, "0012")
    with engine.begin() as connection:
        _log_before_principals(connection, ["a", "b"])
    with engine.connect() as connection:
        head = connection.execute(text(sql.AUDIT_HEAD), {"index_name": "default"}).one()[0]
    migrate.upgrade(engine)
    engine.dispose()
    with SkillIndex.open(None, db=db_url, cwd=Path.cwd()) as index:
        report = index.verify_audit(head=head)  # nothing was linked again
        assert report.ok and report.events == 2 and report.pinned_at == 2
        append(index, AuditRecord(event="skill.read", level=2, outcome="ok", session="c",
                                  principal="alice"))
        append(index, AuditRecord(event="skill.read", level=2, outcome="ok", session="d"))
        report = index.verify_audit(head=head)
        assert report.ok and report.events == 4 and report.pinned_at == 2
    engine = make_engine(db_url)
    with pytest.raises(AuditKeptError, match="drop the principals"):
        migrate.downgrade(engine, "0012")
    migrate.downgrade(engine, "0012", discard_audit=True)
    kept = rows(engine)
    assert len(kept) == 4 and "principal" not in kept[0]
    prev = audit.GENESIS
    for event in kept:  # the rule before 0013: every field, no principal
        fields = {n: event[n] for n in audit.TEXT_FIELDS}
        fields["time"] = audit.time_text(event["time"])
        assert (event["prev_hash"], event["row_hash"]) == (prev, audit.row_hash(prev, fields))
        prev = event["row_hash"]
    assert kept[1]["row_hash"] == head  # the events before the principal kept their hashes
    migrate.upgrade(engine)
    engine.dispose()
    with SkillIndex.open(None, db=db_url, cwd=Path.cwd()) as index:
        assert index.verify_audit().ok


# -- concurrent appenders --------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from skillindex.api import SkillIndex
    from skillindex.config import Settings
    from skillindex.model import AuditRecord
    index = SkillIndex.open(Settings(presets=False), db=sys.argv[1], cwd=sys.argv[2])
    for number in range(int(sys.argv[3])):
        index._append_event(AuditRecord(event="skill.read", level=2, outcome="ok",
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
        append(index, AuditRecord(event="skill.read", level=2, outcome="ok"))
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
                                "events_after": 2},
                     "anchors": {"reached": 1, "covered": 0, "lost": None}, "unproven": 2}
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


# -- rows that say only what happened --------------------------------------------------------------

def lift_checks(connection: Connection) -> None:
    """The owner can also set aside the CHECK constraints (a SQLite file's, for its connection)."""
    if connection.dialect.name == "postgresql":
        for name in ("event_level", "outcome", "bytes"):
            connection.execute(text(f"ALTER TABLE load_event DROP CONSTRAINT ck_load_event_{name}"))
    else:
        connection.execute(text("PRAGMA ignore_check_constraints = ON"))


def test_a_time_rewritten_as_the_same_instant_is_caught_or_cannot_be(index: SkillIndex) -> None:
    """Another text of the same instant either breaks the chain (SQLite keeps text) or is the
    same stored value (PostgreSQL keeps the instant): `--since` never misses a verified row."""
    events = three_events(index)
    instant = audit.time_text(events[1]["time"])
    other = datetime.fromisoformat(instant).replace(tzinfo=UTC).astimezone(
        timezone(timedelta(hours=-5))).isoformat()
    with index.engine.begin() as connection:
        drop_guards(connection)
        lift_checks(connection)
        connection.execute(text("UPDATE load_event SET time = :t WHERE id = :i"),
                           {"t": other, "i": events[1]["id"]})
    report = index.verify_audit()
    listed = index.audit(since=datetime.fromisoformat(instant).replace(tzinfo=UTC))
    if index.engine.dialect.name == "sqlite":
        assert not report.ok and report.broken is not None
        assert report.broken.id == events[1]["id"]
        assert "not in the store's one form" in report.broken.problem
    else:
        assert report.ok
        assert len(listed) == 2


@pytest.fixture
def sqlite_events(sqlite_index: SkillIndex) -> list[dict[str, Any]]:
    for uri in ("skill://pdf", "skill://nope", "skill://pdf"):
        attempt(sqlite_index, uri)
    return rows(sqlite_index.engine)


@pytest.mark.parametrize("time", ["garbage", "2026-02-30 10:00:00.000000", "", "7",
                                  "2026-12-01T10:00:00+00:00"])
def test_a_time_that_is_no_time_is_named_and_the_rest_still_listed(
        sqlite_index: SkillIndex, sqlite_events: list[dict[str, Any]], time: str) -> None:
    with sqlite_index.engine.begin() as connection:
        drop_guards(connection)
        lift_checks(connection)
        connection.execute(text("UPDATE load_event SET time = :t WHERE id = :i"),
                           {"t": time, "i": sqlite_events[1]["id"]})
    report = sqlite_index.verify_audit()
    assert report.broken is not None and report.broken.id == sqlite_events[1]["id"]
    listed = sqlite_index.audit()
    if "T" in time:  # a time all the same, but not in the store's form: listed
        assert len(listed) == 3
        return
    assert [e.skill for e in listed] == ["pdf", "pdf"]
    assert listed.skipped == (sqlite_events[1]["id"],)
    db = ["--db", sqlite_index.url, "--config", "/dev/null"]
    shown = CliRunner().invoke(cli, [*db, "audit"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.count("skill.read") == 2
    assert f"not listed: a field does not parse (event {sqlite_events[1]['id']})" in shown.stderr
    checked = CliRunner().invoke(cli, [*db, "audit", "verify"])
    assert checked.exit_code == 1
    assert f"broken: event {sqlite_events[1]['id']}" in checked.stdout
    assert "internal error" not in checked.output


@pytest.mark.parametrize("time", ["garbage", "2026-02-30 10:00:00.000000", "", "7"])
def test_a_follower_passes_a_time_that_is_no_time_as_audit_does(
        sqlite_index: SkillIndex, sqlite_events: list[dict[str, Any]], time: str) -> None:
    with sqlite_index.engine.begin() as connection:
        drop_guards(connection)
        lift_checks(connection)
        connection.execute(text("UPDATE load_event SET time = :t WHERE id = :i"),
                           {"t": time, "i": sqlite_events[1]["id"]})
    unlisted: list[int] = []
    followed = list(sqlite_index.follow_audit(after=0, stop=lambda: True,
                                              skipped=unlisted.append))
    assert [e.id for e in followed] == [sqlite_events[0]["id"], sqlite_events[2]["id"]]
    assert unlisted == [sqlite_events[1]["id"]]
    page = sqlite_index.audit_after(0, limit=2)
    assert [e.id for e in page] == [sqlite_events[0]["id"]]
    assert page.skipped == (sqlite_events[1]["id"],)


IMPOSSIBLE = {
    "outcome": {"outcome": "bogus"},
    "level-99": {"level": 99},
    "level-negative": {"level": -7},
    "level-of-another-event": {"event": "catalog.published", "level": 2},
    "bytes": {"bytes": -1_000_000},
    "event": {"event": "made.up"},
}
RAW_EVENT = {"index_name": "default", "time": "2026-12-01 10:00:00.000000",
             "event": "skill.read", "level": 2, "bytes": 0, "outcome": "ok", "session": "victim"}


@pytest.mark.parametrize("change", IMPOSSIBLE.values(), ids=IMPOSSIBLE.keys())
def test_the_store_refuses_an_event_no_disclosure_writes(index: SkillIndex,
                                                         change: dict[str, Any]) -> None:
    record = {**RAW_EVENT, **change}
    with pytest.raises(DatabaseError, match=r"(?i)check"), index.engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO load_event (index_name, time, event, level, bytes, outcome, session) "
            "VALUES (:index_name, :time, :event, :level, :bytes, :outcome, :session)"), record)
    fields = {k: v for k, v in record.items() if k not in ("index_name", "time")}
    with pytest.raises(SkillIndexError, match=r"(?i)check"):
        append(index, AuditRecord(**fields))
    assert index.audit() == [] and index.verify_audit().ok


@pytest.mark.parametrize("change", IMPOSSIBLE.values(), ids=IMPOSSIBLE.keys())
def test_verify_names_an_impossible_event_the_checks_did_not_see(index: SkillIndex,
                                                                 change: dict[str, Any]) -> None:
    """A forged row with hashes right for itself (a database older than the checks, or the
    checks set aside) still fails `audit verify`."""
    attempt(index, "skill://pdf")
    [event] = rows(index.engine)
    forged = {**event, **change, "id": event["id"] + 1, "prev_hash": event["row_hash"]}
    fields = {n: forged[n] for n in audit.TEXT_FIELDS}
    fields["time"] = audit.time_text(forged["time"])
    forged["row_hash"] = audit.row_hash(event["row_hash"], fields)
    with index.engine.begin() as connection:
        drop_guards(connection)
        lift_checks(connection)
        _insert(connection, forged)
    report = index.verify_audit()
    assert report.broken is not None and report.broken.id == forged["id"]
    assert "no disclosure writes that" in report.broken.problem
    assert report.events == 1


# -- anchors ---------------------------------------------------------------------------------------

def anchors(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(
            "SELECT index_name, audit_events, audit_head FROM index_run ORDER BY id"))]


def test_every_reindex_records_the_chains_head_and_length(index: SkillIndex, tmp_path: Path,
                                                          open_index: OpenIndex) -> None:
    other = open_index(tmp_path / "skills", index="other")
    assert anchors(index.engine)[-1] == ("default", 0, audit.GENESIS)
    events = three_events(index)
    attempt(other, "skill://pdf")
    index.reindex()
    assert anchors(index.engine)[-1] == ("default", 3, events[-1]["row_hash"])
    attempt(index, "skill://pdf")
    attempt(other, "skill://pdf")
    attempt(index, "skill://pdf")
    index.reindex()
    other.reindex()
    head = index.verify_audit().head
    assert anchors(index.engine)[-2:] == [("default", 5, head),
                                          ("other", 2, other.verify_audit().head)]
    index.reindex()  # nothing new: the same anchor again
    assert anchors(index.engine)[-1] == ("default", 5, head)
    report = index.verify_audit()
    assert report.ok and (report.anchors, report.anchored, report.unproven) == (3, 5, 0)


def _delete_newest(connection: Connection, count: int) -> None:
    connection.execute(text("DELETE FROM load_event WHERE id IN (SELECT id FROM load_event "
                            "ORDER BY id DESC LIMIT :n)"), {"n": count})


@pytest.mark.parametrize("removed", [1, 3], ids=["newest", "all"])
def test_a_tail_removed_before_the_last_reindex_is_caught_without_a_head(
        index: SkillIndex, removed: int) -> None:
    three_events(index)
    index.reindex()
    with index.engine.begin() as connection:
        drop_guards(connection)
        _delete_newest(connection, removed)
    report = index.verify_audit()
    assert not report.ok and report.broken is None
    assert report.lost is not None and report.lost.anchor.events == 3
    assert f"the chain ends at event {3 - removed}" in report.lost.problem
    db = ["--db", index.url, "--config", "/dev/null"]
    shown = run(*db, "audit", "verify")
    assert shown.exit_code == 1
    assert shown.output.startswith("not ok: ")
    assert "anchor lost: run" in shown.output and "removed from its end" in shown.output


def test_a_history_rewritten_before_the_last_reindex_is_caught_without_a_head(
        index: SkillIndex) -> None:
    events = three_events(index)
    index.reindex()
    with index.engine.begin() as connection:
        drop_guards(connection)
        rewrite_history(connection, events)
    report = index.verify_audit()
    assert not report.ok and report.broken is None
    assert report.lost is not None and "rewritten" in report.lost.problem


def test_verify_says_what_it_cannot_prove_without_a_head(index: SkillIndex) -> None:
    three_events(index)
    index.reindex()
    attempt(index, "skill://pdf")
    attempt(index, "skill://pdf")
    db = ["--db", index.url, "--config", "/dev/null"]
    shown = run(*db, "audit", "verify")
    assert shown.exit_code == 0, shown.output
    assert "the newest covers the first 3 events" in shown.output
    assert ("not proven without --head: that none of the 2 events after the newest anchor was "
            "removed") in shown.output
    assert "rewritten together with its anchors" in shown.output
    shape = json.loads(run(*db, "--json", "audit", "verify").stdout)
    assert shape["anchors"] == {"reached": 2, "covered": 3, "lost": None}
    assert shape["unproven"] == 2
    # The newest two are gone: nothing recorded them, and only a pinned head can tell.
    pinned = shape["head"]
    with index.engine.begin() as connection:
        drop_guards(connection)
        _delete_newest(connection, 2)
    assert run(*db, "audit", "verify").exit_code == 0
    assert run(*db, "audit", "verify", "--head", pinned).exit_code == 1


def test_an_unchanged_reindex_by_the_start_up_path_records_its_anchor(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\n'
                      "precedence = 10\n")
    db = f"sqlite:///{tmp_path / 'index.sqlite'}"
    with SkillIndex.open(str(config), db=db, cwd=tmp_path) as index:
        index.reindex()
        attempt(index, "skill://pdf")
        attempt(index, "skill://pdf")
        head = index.verify_audit().head
    report = oneshot.reindex(str(config), db=db, cwd=tmp_path, index=None)
    assert report is not None and report.unchanged == 1
    engine = make_engine(db)
    assert anchors(engine)[-1] == ("default", 2, head)
    engine.dispose()


# -- the upgrade that changes the hash rule --------------------------------------------------------

OLD_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def old_rule_ok(engine: Engine, index_name: str = "default") -> int:
    """How many events verify under 0004's rule (the time hashed as `...THH:MM:SS.ffffffZ`)."""
    prev = audit.GENESIS
    count = 0
    for event in rows(engine):
        if event["index_name"] != index_name:
            continue
        fields = {n: event[n] for n in audit.TEXT_FIELDS}
        fields["time"] = chain.utc(event["time"]).strftime(OLD_TIME)
        if event["prev_hash"] != prev or event["row_hash"] != audit.row_hash(prev, fields):
            break
        prev, count = event["row_hash"], count + 1
    return count


def _log_at_0008(connection: Connection, times: list[str]) -> None:
    """Events as revision 0008 logged them: chained by the trigger on PostgreSQL, by the
    library (0004's rule) on SQLite, in any text of a time SQLite was given."""
    prev = audit.GENESIS
    for number, time in enumerate(times):
        row = {"index_name": "default", "time": time, "event": "skill.read", "skill": "pdf",
               "resource": None, "level": 2, "bytes": 10 + number, "digest": None,
               "outcome": "ok", "reason": "r", "session": f"s-{number}", "path": None}
        fields = {**row, "time": chain.utc(time).strftime(OLD_TIME)}
        digest = audit.row_hash(prev, fields)
        connection.execute(text(
            "INSERT INTO load_event (index_name, time, event, skill, level, bytes, outcome, "
            "reason, session, prev_hash, row_hash) VALUES (:index_name, :time, :event, :skill, "
            ":level, :bytes, :outcome, :reason, :session, :prev, :hash)"),
            {**row, "prev": prev, "hash": digest})
        prev = digest


@pytest.mark.unmigrated
def test_upgrade_downgrade_upgrade_keeps_every_event_chained(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine, "0008")
    with engine.begin() as connection:
        _log_at_0008(connection, ["2026-01-01 12:00:00.123456", "2026-01-01 12:00:01",
                                  "2026-01-01T12:00:02.5+00:00"])
    assert old_rule_ok(engine) == 3
    migrate.upgrade(engine)
    engine.dispose()
    with SkillIndex.open(None, db=db_url, cwd=Path.cwd()) as index:
        report = index.verify_audit()
        assert report.ok and report.events == 3, report.broken
        append(index, AuditRecord(event="skill.read", level=2, outcome="ok"))
        assert index.verify_audit().ok
    engine = make_engine(db_url)
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            assert [t for (t,) in connection.execute(text(
                "SELECT time FROM load_event ORDER BY id"))][:3] == [
                "2026-01-01 12:00:00.123456", "2026-01-01 12:00:01.000000",
                "2026-01-01 12:00:02.500000"]
    with pytest.raises(AuditKeptError, match="--discard-audit"):
        migrate.downgrade(engine, "0008")
    migrate.downgrade(engine, "0008", discard_audit=True)
    assert len(rows(engine)) == 4 and old_rule_ok(engine) == 4
    migrate.upgrade(engine)
    engine.dispose()
    with SkillIndex.open(None, db=db_url, cwd=Path.cwd()) as index:
        report = index.verify_audit()
        assert report.ok and report.events == 4, report.broken


@pytest.mark.unmigrated
def test_the_upgrade_does_not_launder_a_broken_chain(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine, "0008")
    with engine.begin() as connection:
        _log_at_0008(connection, [f"2026-01-01 12:00:0{n}.000000" for n in range(4)])
    second = rows(engine)[1]["id"]
    with engine.begin() as connection:
        drop_guards(connection)
        connection.execute(text("UPDATE load_event SET bytes = 0 WHERE id = :i"), {"i": second})
        if connection.dialect.name == "postgresql":
            connection.execute(text("ALTER TABLE load_event ENABLE TRIGGER USER"))
    assert old_rule_ok(engine) == 1
    migrate.upgrade(engine)
    engine.dispose()
    with SkillIndex.open(None, db=db_url, cwd=Path.cwd()) as index:
        report = index.verify_audit()
        assert report.broken is not None and report.broken.id == second
        assert report.events == 1
