"""The sqlite3 start-up path of read, /skill:, and the audit listing: the same answers and audit
rows as the full path, a fallback wherever it does not apply, no SQLAlchemy ORM or Alembic."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from skillindex import ModifiedFileError, SkillIndex, SkillIndexError
from skillindex.cli import cli
from skillindex.model import AuditRecord
from skillindex.query import oneshot
from skillindex.store import chain, fastpath
from tests.conftest import isolate_home, two_roots, write_skill

BODY = "\n# Alpha\n\nDo the alpha thing.\n"
# The columns of an audit row that do not depend on when or after what it was written.
SAME = ("index_name", "event", "skill", "resource", "level", "bytes", "digest", "outcome",
        "reason", "session", "path")


@dataclass
class Setup:
    root: Path
    config: Path
    db: str
    cwd: Path

    def where(self, **extra: Any) -> dict[str, Any]:
        return {"db": self.db, "cwd": self.cwd, "index": None, **extra}

    def full(self) -> SkillIndex:
        return SkillIndex.open(str(self.config), db=self.db, cwd=self.cwd, create=False)

    def rows(self) -> list[dict[str, Any]]:
        with sqlite3.connect(self.db) as connection:
            connection.row_factory = sqlite3.Row
            return [dict(row) for row in connection.execute(
                "SELECT * FROM load_event ORDER BY id")]

    def change(self, old: str, new: str) -> None:
        self.config.write_text(self.config.read_text().replace(old, new))


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    """Two indexed roots (one name in both), a settings file, a migrated SQLite index whose
    reindex stored the resolution of these roots."""
    high, low = tmp_path / "high", tmp_path / "low"
    alpha = write_skill(high, "alpha", body=BODY)
    (alpha / "references").mkdir()
    (alpha / "references" / "guide.md").write_text("guide\n")
    (alpha / "data.bin").write_bytes(b"\x00\xff\x10")
    write_skill(low, "alpha", body="# The shadowed one\n")
    write_skill(low, "beta", body="# Beta\n\nUse beta.\n")
    config = two_roots(tmp_path / "config.toml", high, low)
    isolate_home(tmp_path, monkeypatch)
    found = Setup(high, config, str(tmp_path / "index.sqlite"), tmp_path)
    with SkillIndex.open(str(config), db=found.db, cwd=tmp_path) as index:
        index.reindex()
    yield found


def both(setup: Setup, call: str, **kwargs: Any) -> tuple[Any, Any, list[dict[str, Any]]]:
    """The answer of the start-up path and of the full path, and the two audit rows written."""
    before = len(setup.rows())
    quick = getattr(oneshot, call)(str(setup.config), **setup.where(**kwargs))
    assert quick is not None, "the start-up path did not answer"
    with setup.full() as index:
        full = getattr(index, call)(**kwargs)
    rows = setup.rows()[before:]
    assert len(rows) == 2
    return quick, full, rows


def same_row(rows: list[dict[str, Any]]) -> None:
    first, second = rows
    assert {k: first[k] for k in SAME} == {k: second[k] for k in SAME}
    assert second["prev_hash"] == first["row_hash"]


@pytest.mark.parametrize(("uri", "kwargs"), [
    ("skill://alpha", {}),
    ("skill://alpha", {"reason": "asked\nfor it", "session": "s-1"}),
    ("skill://alpha/references/guide.md", {"session": "s-2"}),
    ("skill://alpha/references%2Fguide.md", {}),
    ("skill://alpha/data.bin", {"max_bytes": 3}),
    ("skill://beta", {"reason": "r" * 3000}),
], ids=["body", "body-reason-session", "resource", "encoded-slash", "binary", "long-reason"])
def test_a_read_answers_and_audits_as_the_full_path(setup: Setup, uri: str,
                                                    kwargs: dict[str, Any]) -> None:
    quick, full, rows = both(setup, "read", uri=uri, **kwargs)
    assert quick == full
    same_row(rows)
    assert rows[0]["outcome"] == "ok"


@pytest.mark.parametrize("args", [(), ("summarize", "report.pdf"), "  one  text  ", ("  ",)],
                         ids=["none", "words", "text", "blank"])
def test_a_command_answers_and_audits_as_the_full_path(setup: Setup, args: Any) -> None:
    quick, full, rows = both(setup, "skill_command", name="alpha", args=args, session="s")
    assert quick == full
    assert quick.message.startswith("# Alpha\n\nDo the alpha thing.")
    same_row(rows)


@pytest.mark.parametrize(("uri", "outcome"), [
    ("skill://alpha/references/guide.md", "mismatch"),
    ("skill://alpha", "mismatch"),
], ids=["resource", "body"])
def test_a_modified_file_is_refused_and_audited_alike(setup: Setup, uri: str,
                                                      outcome: str) -> None:
    (setup.root / "alpha" / "references" / "guide.md").write_text("changed\n")
    (setup.root / "alpha" / "SKILL.md").write_text("---\nname: alpha\ndescription: x\n---\nnew\n")
    before = len(setup.rows())
    with pytest.raises(ModifiedFileError) as quick:
        oneshot.read(str(setup.config), **setup.where(uri=uri))
    with setup.full() as index, pytest.raises(ModifiedFileError) as full:
        index.read(uri)
    assert str(quick.value) == str(full.value)
    rows = setup.rows()[before:]
    same_row(rows)
    assert rows[0]["outcome"] == outcome and rows[0]["digest"] is not None


def test_a_refused_path_inside_the_skill_is_refused_and_audited_alike(setup: Setup) -> None:
    os.symlink(setup.cwd / "config.toml", setup.root / "alpha" / "link.md")
    uri = "skill://alpha/link.md"
    before = len(setup.rows())
    with pytest.raises(SkillIndexError) as quick:
        oneshot.read(str(setup.config), **setup.where(uri=uri))
    with setup.full() as index, pytest.raises(SkillIndexError) as full:
        index.read(uri)
    assert (type(quick.value), str(quick.value)) == (type(full.value), str(full.value))
    same_row(setup.rows()[before:])


@pytest.mark.parametrize("uri", ["skill://nope", "skill://alpha/../x", "skill://\udcff",
                                 "http://alpha", "skill://"],
                         ids=["unknown", "dotdot", "not-utf8", "scheme", "no-name"])
def test_what_the_start_up_path_leaves_alone_it_leaves_unaudited(setup: Setup, uri: str) -> None:
    before = setup.rows()
    assert oneshot.read(str(setup.config), **setup.where(uri=uri)) is None
    assert setup.rows() == before


@pytest.mark.parametrize("name", ["nope", "\udcff", "", "alpha/x"])
def test_a_command_for_no_skill_is_left_to_the_full_path(setup: Setup, name: str) -> None:
    before = setup.rows()
    assert oneshot.skill_command(str(setup.config), **setup.where(name=name)) is None
    assert setup.rows() == before


def test_a_file_the_skill_never_had_is_refused_and_audited_alike(setup: Setup) -> None:
    uri = "skill://beta/absent.md"
    before = len(setup.rows())
    with pytest.raises(SkillIndexError) as quick:
        oneshot.read(str(setup.config), **setup.where(uri=uri))
    with setup.full() as index, pytest.raises(SkillIndexError) as full:
        index.read(uri)
    assert (type(quick.value), str(quick.value)) == (type(full.value), str(full.value))
    rows = setup.rows()[before:]
    same_row(rows)
    assert rows[0]["outcome"] == "not-found"


@pytest.mark.parametrize("change", [
    "policy", "quarantine", "commands-off", "older-schema", "no-set", "postgresql", "no-file",
])
def test_the_full_path_answers_what_is_uncommon(setup: Setup, change: str) -> None:
    where = setup.where()
    if change == "policy":  # rules no stored resolution was made under
        setup.change("presets = false", 'presets = false\ncollision_policy = "qualify"')
    elif change == "quarantine":
        setup.change("precedence = 20", 'precedence = 20\nrisk_policy = "quarantine"')
    elif change == "commands-off":
        setup.change("presets = false", "presets = false\nenable_skill_commands = false")
    elif change == "older-schema":
        with sqlite3.connect(setup.db) as connection:
            connection.execute("UPDATE alembic_version SET version_num = '0001'")
    elif change == "no-set":
        with sqlite3.connect(setup.db) as connection:
            connection.execute("DELETE FROM resolved_winner")
            connection.execute("DELETE FROM resolved_set")
    elif change == "postgresql":
        where["db"] = "postgresql://nobody@127.0.0.1:1/none"
    elif change == "no-file":
        where["db"] = str(setup.cwd / "absent" / "index.sqlite")
    before = setup.rows()
    assert oneshot.skill_command(str(setup.config), **where, name="alpha") is None
    if change != "commands-off":  # reads are still served then
        assert oneshot.read(str(setup.config), **where, uri="skill://alpha") is None
        assert oneshot.audit(str(setup.config), **where) is None or change in (
            "policy", "quarantine", "no-set")  # the listing needs no resolution
    assert setup.rows() == before
    assert not (setup.cwd / "absent").exists()


def test_a_failed_audit_write_falls_back_and_discloses_nothing(setup: Setup) -> None:
    with sqlite3.connect(setup.db) as connection:
        connection.execute("CREATE TRIGGER no_audit BEFORE INSERT ON load_event "
                           "BEGIN SELECT RAISE(ABORT, 'audit is closed'); END")
    assert oneshot.read(str(setup.config), **setup.where(uri="skill://alpha")) is None
    assert oneshot.skill_command(str(setup.config), **setup.where(name="alpha")) is None
    (setup.root / "alpha" / "SKILL.md").write_text("changed")
    assert oneshot.read(str(setup.config), **setup.where(uri="skill://alpha")) is None
    assert setup.rows() == []
    result = CliRunner().invoke(cli, ["--config", str(setup.config), "--db", setup.db, "--cwd",
                                      str(setup.cwd), "read", "skill://beta"])
    assert result.exit_code == 4
    assert result.stdout == ""
    assert "cannot disclose: the audit log of " in result.stderr
    assert "audit is closed" in result.stderr


def test_the_chain_holds_over_rows_of_both_paths(setup: Setup) -> None:
    for number in range(3):
        oneshot.read(str(setup.config), **setup.where(uri="skill://alpha", session=f"q{number}"))
        with setup.full() as index:
            index.read("skill://beta", session=f"f{number}")
            index._append_event(AuditRecord(event="catalog.published", level=1, outcome="ok",
                                            reason="\x00 and é", session=f"e{number}"))
        oneshot.skill_command(str(setup.config), **setup.where(name="beta", args=("x",)))
    rows = setup.rows()
    assert len(rows) == 12
    assert [row["time"] for row in rows] == sorted(row["time"] for row in rows)
    with setup.full() as index:
        report = index.verify_audit()
    assert report.ok and report.events == 12 and report.head == rows[-1]["row_hash"]
    result = CliRunner().invoke(cli, ["--config", str(setup.config), "--db", setup.db, "--json",
                                      "audit", "verify"])
    assert result.exit_code == 0 and json.loads(result.stdout)["events"] == 12


@pytest.mark.parametrize("filters", [
    {}, {"session": "s-1"}, {"skill": "beta"}, {"outcome": "mismatch"},
    {"since": "2000-01-01"}, {"since": "2999-01-01T00:00:00+02:00"}, {"levels": True},
    {"levels": True, "outcome": "ok"},
], ids=["all", "session", "skill", "outcome", "since-past", "since-future", "levels",
        "levels-ok"])
def test_the_audit_listing_is_the_full_paths(setup: Setup, filters: dict[str, Any]) -> None:
    oneshot.read(str(setup.config), **setup.where(uri="skill://alpha", session="s-1"))
    with setup.full() as index:
        index.read("skill://beta", session="s-2")
    (setup.root / "alpha" / "SKILL.md").write_text("changed")
    with pytest.raises(ModifiedFileError):
        oneshot.read(str(setup.config), **setup.where(uri="skill://alpha", session="s-1"))
    quick = oneshot.audit(str(setup.config), **setup.where(**filters))
    with setup.full() as index:
        full = index.audit(**filters)
    assert quick == full
    assert filters.get("since", "").startswith("2999") or quick


def test_a_since_between_two_events_splits_them_alike(setup: Setup) -> None:
    for number in range(3):
        oneshot.read(str(setup.config), **setup.where(uri="skill://alpha", session=f"s{number}"))
    with setup.full() as index:
        middle = index.audit()[1].time
    for since in (middle, middle + timedelta(microseconds=1),
                  middle.astimezone(timezone(timedelta(hours=9)))):
        with setup.full() as index:
            full = index.audit(since=since)
        quick = oneshot.audit(str(setup.config), **setup.where(since=since.isoformat()))
        assert quick == full
    assert [e.session for e in oneshot.audit(str(setup.config), **setup.where(
        since=middle.isoformat())) or []] == ["s1", "s2"]


@pytest.mark.parametrize("filters", [{"since": "yesterday"}, {"outcome": "fine"},
                                     {"session": "\udcff"}], ids=["since", "outcome", "bytes"])
def test_an_audit_listing_it_cannot_judge_goes_to_the_full_path(
        setup: Setup, filters: dict[str, Any]) -> None:
    assert oneshot.audit(str(setup.config), **setup.where(**filters)) is None


def test_stored_times_are_written_as_sqlalchemy_writes_them() -> None:
    from sqlalchemy import DateTime
    from sqlalchemy.dialects import sqlite

    dialect = sqlite.dialect()
    store = DateTime(timezone=True).dialect_impl(dialect).bind_processor(dialect)
    assert store is not None
    for value in (datetime(2026, 12, 1, 6, 0, 0, tzinfo=UTC),
                  datetime(2026, 12, 1, 6, 0, 0, 7, tzinfo=UTC),
                  datetime(1999, 1, 2, 3, 4, 5, 999999)):
        assert chain.stored_time(value) == store(value)
        assert chain.utc(chain.stored_time(value)) == chain.utc(value)


def test_a_link_never_goes_back_in_time() -> None:
    fields = chain.fields_of("default", AuditRecord(event="e", level=1, outcome="ok"))
    later = datetime.now(UTC) + timedelta(hours=1)
    row = chain.linked(fields, ("a" * 64, chain.stored_time(later)), datetime.now(UTC))
    assert row["time"] == chain.stored_time(later) and row["prev_hash"] == "a" * 64
    first = chain.linked(fields, None, later)
    assert first["prev_hash"] == chain.GENESIS
    assert first["row_hash"] == chain.row_hash(
        chain.GENESIS, {**fields, "time": chain.stored_time(later)})


APPENDER = textwrap.dedent("""
    import sys
    from skillindex.model import AuditRecord
    from skillindex.store import fastpath
    with fastpath.opened(sys.argv[1]) as connection:
        for number in range(int(sys.argv[2])):
            record = AuditRecord(event="skill.read", level=2, outcome="ok",
                                 session=f"{sys.argv[3]}-{number}")
            assert fastpath.append_event(connection, "default", record)
""")
WRITER = textwrap.dedent("""
    import sys
    from skillindex.api import SkillIndex
    from skillindex.config import Settings
    from skillindex.model import AuditRecord
    with SkillIndex.open(Settings(presets=False), db=sys.argv[1], cwd=".") as index:
        for number in range(int(sys.argv[2])):
            index._append_event(AuditRecord(event="skill.read", level=2, outcome="ok",
                                            session=f"{sys.argv[3]}-{number}"))
""")


def test_appenders_of_both_paths_at_once_keep_one_chain(setup: Setup) -> None:
    each = 15
    writers = [subprocess.Popen([sys.executable, "-c", script, setup.db, str(each), name],
                                stderr=subprocess.PIPE, text=True)
               for script, name in ((APPENDER, "a"), (WRITER, "w"), (APPENDER, "b"))]
    for writer in writers:
        _, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
    with setup.full() as index:
        report = index.verify_audit()
    assert report.ok, report.broken
    assert report.events == 3 * each


IMPORTS = textwrap.dedent("""
    import sys
    from skillindex.cli import main
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    # Nor the risk rules' matcher: only what reads skill files for a reindex needs it. Nor
    # the HTTP client and TLS (what urllib.request brings): nothing here speaks to a network.
    heavy = ("sqlalchemy", "alembic", "yaml", "ahocorasick_rs", "ssl", "http", "email")
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
    print(code, " ".join(loaded), file=sys.stderr)
""")


@pytest.mark.parametrize("command", [
    ["read", "skill://alpha"],
    ["read", "skill://alpha/references/guide.md", "--session", "s"],
    ["--json", "command", "alpha", "do", "--it"],
    ["audit"],
    ["audit", "--levels", "--since", "2000-01-01"],
    ["search", "use beta"],
    ["--json", "search", "alpha", "--limit", "1"],
    ["reindex"],
    ["--json", "reindex", "--jobs", "2"],
    ["reindex", "--all"],
], ids=["read", "resource", "command", "audit", "audit-levels", "search", "search-json",
        "unchanged-reindex", "unchanged-reindex-json", "unchanged-reindex-all"])
def test_one_shot_commands_do_not_import_sqlalchemy(setup: Setup, command: list[str]) -> None:
    oneshot.read(str(setup.config), **setup.where(uri="skill://beta", session="s"))
    argv = ["--config", str(setup.config), "--db", setup.db, "--cwd", str(setup.cwd), *command]
    done = subprocess.run([sys.executable, "-c", IMPORTS, *argv], capture_output=True, text=True,
                          check=False)
    code, _, loaded = done.stderr.strip().splitlines()[-1].partition(" ")
    assert code in ("0", "None"), done.stderr
    assert loaded == "", f"imported: {loaded}"
    assert done.stdout


def test_the_cli_prints_what_the_full_path_prints(setup: Setup) -> None:
    argv = ["--config", str(setup.config), "--db", setup.db, "--cwd", str(setup.cwd)]
    quick = CliRunner().invoke(cli, [*argv, "read", "skill://alpha"], catch_exceptions=False)
    assert quick.exit_code == 0 and quick.stdout_bytes == BODY.encode()
    command = CliRunner().invoke(cli, [*argv, "--json", "command", "alpha", "a", "b"],
                                 catch_exceptions=False)
    with setup.full() as index:
        expected = index.skill_command("alpha", ("a", "b")).as_dict()
    assert json.loads(command.stdout) == json.loads(json.dumps(expected))
    missing = CliRunner().invoke(cli, [*argv, "read", "skill://nope"])
    assert missing.exit_code == 3 and "skill not found: nope" in missing.stderr
    assert [row["outcome"] for row in setup.rows()] == ["ok", "ok", "ok", "not-found"]


def test_the_sqlite_file_of_a_url() -> None:
    assert fastpath.sqlite_file("sqlite:////tmp/x.sqlite") == "/tmp/x.sqlite"
    assert fastpath.sqlite_file("sqlite:///rel.sqlite") == "rel.sqlite"
    for url in ("sqlite://", "sqlite:///:memory:", "sqlite:///x.sqlite?mode=ro",
                "postgresql://h/db"):
        assert fastpath.sqlite_file(url) is None
