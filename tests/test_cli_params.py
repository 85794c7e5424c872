"""Every command-line value goes through a type of cli/params.py: what a command cannot use is
refused before any library call, as a usage error (exit 2) in one line."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from skillindex.cli import cli, params
from skillindex.config import check_database_url, parse_settings
from skillindex.errors import ConfigError
from skillindex.store import chain, revision
from tests.clitree import commands
from tests.conftest import isolate_cli, write_skill

HUGE = "9" * 20
# One step past the history, whatever its length (`base+9` when there were 8 revisions).
PAST = f"base+{len(revision.REVISIONS) + 1}"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Read PDFs.")
    isolate_cli(tmp_path, monkeypatch, root)
    assert run("reindex").exit_code == 0
    assert run("read", "skill://pdf", "--session", "s-1").exit_code == 0
    return tmp_path


def run(*args: str | bytes, env: dict[str, str] | None = None) -> Result:
    # What the interpreter hands a command for bytes that are not UTF-8: lone surrogates.
    text = [arg.decode("utf-8", "surrogateescape") if isinstance(arg, bytes) else arg
            for arg in args]
    return CliRunner().invoke(cli, text, env=env)


def usage_error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("skillindex: error: "), line
    assert "internal error" not in line and "Traceback" not in result.output
    return line


def test_every_parameter_of_every_command_has_a_type_of_its_own() -> None:
    """So a command added later refuses what it cannot use the same way."""
    untyped = []
    for path, command in commands():
        for param in command.params:
            if isinstance(param, click.Option) and (param.is_flag or "--help" in param.opts
                                                    or param.name == "version"):
                continue
            if not isinstance(param.type, params.KINDS):
                untyped.append(f"skillindex {' '.join(path)} {param.name}: {param.type!r}")
    assert not untyped, "use a type of skillindex/cli/params.py:\n" + "\n".join(untyped)


# The reported examples, each of a class below.
@pytest.mark.parametrize("args", [
    ("candidates", "--code", b"\xff"), ("rejections", "--code", b"\xff"),
    ("audit", "--session", b"\xff"), ("catalog", "--session", b"\xff"),
    ("--index", b"\xff", "list"), ("audit", "--skill", b"a\xffb"),
    ("trust", "pdf", "--note", b"\xff"), ("command", "pdf", b"\xff"),
    ("serve", "--page-size", "9" * 32), ("search", "pdf", "--limit", HUGE),
    ("catalog", "--context-window", "1" + "0" * 400),
    ("audit", "--since", "0001-01-01T00:00:00+01:00"),
    ("audit", "--since", "9999-12-31T23:59:59-01:00"),
    ("--db", "sqlite:///x.sqlite?timeout=abc", "list"),
    ("--db", "sqlite:///x.sqlite?check_same_thread=maybe", "list"),
    ("--db", "postgresql://u@h:abc/db", "list"),
    ("--db", "%00", "reindex"), ("--db", "sqlite:///x%00y.sqlite", "reindex"),
    ("db", "upgrade", PAST), ("db", "upgrade", "0001-01-01"),
    ("watch", "--full-every", "1e20"), ("watch", "--quiet-ms", HUGE),
    ("serve", "--poll", "nan"), ("reindex", "--jobs", "100000"),
    ("usage", "--since", "9999-12-31T23:59:59+14:00"), ("usage", "--since", "9999-12-31"),
    ("usage", "--since", "0001-01-01"), ("usage", "--since", "3650000d"),
], ids=lambda args: " ".join(a if isinstance(a, str) else repr(a) for a in args)[:60])
def test_a_value_a_command_cannot_use_is_a_usage_error(setup: Path,
                                                       args: tuple[str | bytes, ...]) -> None:
    usage_error(run(*args))


@pytest.mark.parametrize("url", ["sqlite:///x.sqlite?timeout=abc", "%00"])
def test_a_database_url_from_the_environment_is_checked_too(setup: Path, url: str) -> None:
    line = usage_error(run("reindex", env={"SKILLINDEX_DB": url}))
    assert "$SKILLINDEX_DB" in line


def test_a_root_path_with_nul_in_the_settings_file_is_a_settings_error(setup: Path) -> None:
    config = setup / "nul.toml"
    config.write_text('[[roots]]\npath = "r\\u0000x"\n')
    line = usage_error(run("--config", str(config), "reindex"))
    assert "roots[1].path holds NUL" in line


@pytest.mark.parametrize("document", [
    {"roots": [{"path": "a\0b"}]}, {"skills": {"custom_directories": ["ok", "a\0"]}},
    {"skills": {"native_dir": "x\0"}}, {"skills": {"ignored_skills": ["\0*"]}},
    {"skills": {"catalog": {"pinned": ["p\0"]}}}, {"index": "a\0"},
    {"roots": [{"path": "ok", "provider": "p\0"}]}, {"skills": {"x\0": True}},
], ids=["root", "custom", "native-dir", "glob", "catalog", "index", "provider", "key"])
def test_no_setting_may_hold_nul(document: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="NUL"):
        parse_settings(document)


# -- the classes, value by value ------------------------------------------------------------

@pytest.mark.parametrize("value", ["-1", HUGE, "1.5", "1e3", "0x10", "", " ", "one", "+",
                                   "9" * 5_000, str(2**31)])
def test_a_count_is_a_whole_number_within_range(value: str) -> None:
    with pytest.raises(click.BadParameter):
        params.COUNT.convert(value, None, None)


@pytest.mark.parametrize(("value", "expected"), [("0", 0), ("+7", 7), (" 12 ", 12),
                                                 (str(2**31 - 1), 2**31 - 1)])
def test_a_count_in_range_is_kept(value: str, expected: int) -> None:
    assert params.COUNT.convert(value, None, None) == expected


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "0.01", "86401", "x", ""])
def test_seconds_are_finite_and_within_range(value: str) -> None:
    with pytest.raises(click.BadParameter):
        params.seconds(0.05, 86_400).convert(value, None, None)


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-05-01", "2026-05-01T00:00:00+00:00"),
    ("2026-05-01T12:00:00+02:00", "2026-05-01T10:00:00+00:00"),
    ("2026-05-01T12:00:00Z", "2026-05-01T12:00:00+00:00"),
    ("0001-01-01", "0001-01-01T00:00:00+00:00"),
    ("0001-01-01T00:00:00-01:00", "0001-01-01T01:00:00+00:00"),
    ("9999-12-31T23:59:59+01:00", "9999-12-31T22:59:59+00:00"),
])
def test_a_time_is_given_on_in_utc(value: str, expected: str) -> None:
    assert params.TIME.convert(value, None, None) == expected


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
                                   "2026-13-01", "2026-02-30", "yesterday", "", "\udcff",
                                   "2026-01-01T25:00:00"])
def test_a_time_the_store_cannot_compare_is_refused(value: str) -> None:
    with pytest.raises(click.BadParameter):
        params.TIME.convert(value, None, None)


def test_an_audit_since_before_the_year_1000_compares_as_a_time(setup: Path) -> None:
    # SQLite compares the stored text: a year of three digits sorted after every real event.
    assert chain.stored_time(datetime(999, 5, 1, tzinfo=UTC)).startswith("0999-05-01 ")
    listed = run("--json", "audit", "--since", "0999-05-01")
    assert listed.exit_code == 0, listed.output
    assert [event["session"] for event in json.loads(listed.stdout)] == ["s-1"]


@pytest.mark.parametrize("url", [
    "sqlite:///x.sqlite", "sqlite:///x.sqlite?timeout=5", "sqlite:///x.sqlite?timeout=0.5",
    "sqlite:///x.sqlite?check_same_thread=false", "sqlite:///file:x?mode=ro&uri=true",
    "postgresql://u:p@h:5432/db", "postgresql://u@[::1]:5432/db?connect_timeout=10",
    "postgresql+psycopg://u@h/db?sslmode=require", "x.sqlite", "relative/dir/x.sqlite",
    "/abs/x\udcff.sqlite",
])
def test_a_database_url_its_driver_takes_is_kept(url: str) -> None:
    check_database_url(url)
    assert params.DATABASE.convert(url, None, None) == url


@pytest.mark.parametrize("url", [
    "sqlite:///x.sqlite?timeout=abc", "sqlite:///x.sqlite?timeout=nan",
    "sqlite:///x.sqlite?timeout=-1", "sqlite:///x.sqlite?check_same_thread=maybe",
    "sqlite:///x.sqlite?uri=maybe", "sqlite:///x.sqlite?detect_types=abc",
    "sqlite:///x.sqlite?timeout=1&timeout=2", "postgresql://u@h:abc/db",
    "postgresql://u@h:99999/db", "postgresql://u@h:0/db", "postgresql://u@[::1/db",
    "postgresql://u@h/db?connect_timeout=abc", "postgresql://u@h/d\udcffb",
    "%00", "dir/x%00.sqlite", "a\0b.sqlite", "sqlite:///x%00y", "postgresql://u@h/d%00b",
])
def test_a_database_url_its_driver_would_choke_on_is_refused(url: str) -> None:
    with pytest.raises(ConfigError):
        check_database_url(url)
    with pytest.raises(click.BadParameter):
        params.DATABASE.convert(url, None, None)


@pytest.mark.parametrize("value", ["head", "heads", "base", "-1", "+2", "0003", "head-2",
                                   f"base+{len(revision.REVISIONS)}", "0001+1", revision.HEAD,
                                   f"head-{len(revision.REVISIONS)}"])
def test_a_revision_the_migrations_resolve_is_kept(value: str) -> None:
    assert params.REVISION.convert(value, None, None) == value


@pytest.mark.parametrize("value", [PAST, "head+1", f"head-{len(revision.REVISIONS) + 1}",
                                   "0001-01-01", "000", "bogus",
                                   "", f"{len(revision.REVISIONS) + 1:04d}", "\udcff", "-99999",
                                   "0001-2"])
def test_a_revision_the_migrations_cannot_resolve_is_refused(value: str) -> None:
    with pytest.raises(click.BadParameter, match="cannot migrate to"):
        params.REVISION.convert(value, None, None)


@pytest.mark.parametrize("value", [PAST, "0001-01-01", "head+1"])
def test_the_library_refuses_such_a_revision_too(tmp_path: Path, value: str) -> None:
    from skillindex.api import migrate_database

    with pytest.raises(ConfigError, match=re.escape(f"cannot migrate to {value!r}")):
        migrate_database("upgrade", value, db=str(tmp_path / "index.sqlite"))


def test_the_revisions_are_the_migrations_history() -> None:
    from skillindex.store import migrate

    assert set(revision.REVISIONS) == migrate.known_revisions()
    assert revision.REVISIONS[-1] == migrate.head_revision()


def test_read_still_audits_a_name_that_is_not_utf8(setup: Path) -> None:
    """The documented exception: a disclosure request is looked up and audited as given."""
    result = run("read", b"skill://\xff")
    assert result.exit_code == 3
    events = json.loads(run("--json", "audit").stdout)
    assert events[-1]["skill"] == "\\xff"


@pytest.mark.parametrize("query", ["sslmode=bogus", "foo=bar", "options=-c%20nope", "port=abc",
                                   "connect_timeout=-5", "target_session_attrs=nope",
                                   "application_name=%00", "host=%2Fnope"])
def test_a_postgresql_url_the_server_judges_is_one_line_at_worst(setup: Path, pg_url: str,
                                                         query: str) -> None:
    separator = "&" if "?" in pg_url else "?"
    result = run("--db", f"{pg_url}{separator}{query}", "list")
    assert result.exit_code in (0, 1, 2), result.output  # 0: a value the server takes
    assert "internal error" not in result.output and "Traceback" not in result.output
    if result.exit_code:
        [line] = result.stderr.splitlines()
        assert line.startswith("skillindex: error: "), line
