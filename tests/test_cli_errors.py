"""What a user sees when something goes wrong: one line, the right verb, the right exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from skillindex.cli import cli
from skillindex.store import migrate
from tests.conftest import isolate_cli, write_skill


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "skills"
    for number in range(3):
        write_skill(root, f"skill-{number}", description="Does a thing.")
    write_skill(root, "broken", "name: broken\ndescription: [unclosed\n  : x\n")
    isolate_cli(tmp_path, monkeypatch, root)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_error_line(result: Result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("skillindex: error: "), lines
    assert "Background on this error" not in result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def to_closed_pipe(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run the real command line with stdout on a pipe whose reader is already gone."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return subprocess.run([sys.executable, "-m", "skillindex", *args], stdout=writer,
                              stderr=subprocess.PIPE, check=False, timeout=120)
    finally:
        os.close(writer)


@pytest.mark.parametrize("args", [("list",), ("candidates",), ("rejections",),
                                  ("--json", "candidates"), ("reindex",), ("explain", "skill-1")],
                         ids=" ".join)
def test_a_reader_that_went_away_ends_the_command_silently(setup: Path,
                                                           args: tuple[str, ...]) -> None:
    assert run("reindex").exit_code == 0
    write_skill(setup / "skills", "late", description="Added after the first reindex.")
    finished = to_closed_pipe(*args)
    assert (finished.returncode, finished.stderr.decode()) == (0, "")
    if args == ("reindex",):  # the pipe broke after the index was written
        names = [row["name"] for row in json.loads(run("--json", "candidates").stdout)]
        assert "late" in names


def test_a_postgresql_server_that_is_not_there_is_one_line(setup: Path) -> None:
    result = run("--db", "postgresql://nobody:secret@127.0.0.1:1/skills", "reindex")
    assert result.exit_code == 1
    line = one_error_line(result)
    assert line.startswith("skillindex: error: cannot open the database "
                           "postgresql+psycopg://nobody:***@127.0.0.1:1/skills: ")
    assert "secret" not in line


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_both_postgresql_spellings_are_understood(setup: Path, scheme: str) -> None:
    result = run("--db", f"{scheme}://nobody@127.0.0.1:1/skills", "list")
    line = one_error_line(result)
    assert "cannot open the database postgresql+psycopg://" in line
    assert "Can't load plugin" not in line


def test_postgres_spelling_reaches_a_real_server(setup: Path, pg_url: str) -> None:
    url = "postgres://" + pg_url.split("://", 1)[1]
    result = run("--db", url, "--json", "reindex")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["seen"] == 4


def test_a_file_that_is_not_a_database_is_one_line(setup: Path) -> None:
    result = run("--db", "/etc/hostname", "candidates")
    assert result.exit_code == 1
    assert one_error_line(result) == ("skillindex: error: cannot open the database "
                                      "/etc/hostname: file is not a database")


def test_a_read_only_database_never_prints_the_statement(setup: Path) -> None:
    assert run("reindex").exit_code == 0
    url = f"sqlite:///file:{setup / 'cli.sqlite'}?mode=ro&uri=true"
    result = run("--db", url, "read", "skill://skill-1", "--reason", "secret reason")
    assert result.exit_code == 4
    line = one_error_line(result)
    assert "cannot disclose: the audit log of " in line
    assert "readonly database" in line
    assert "INSERT" not in line and "secret reason" not in line


def test_an_unknown_revision_is_a_usage_error(setup: Path) -> None:
    result = run("db", "upgrade", "bogus")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "cannot migrate to 'bogus'" in line
    assert "internal error" not in line


def test_downgrade_by_one_step(setup: Path) -> None:
    assert run("db", "upgrade").stdout.strip() == migrate.HEAD
    result = run("db", "downgrade", "-1")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() != migrate.HEAD
    assert run("db", "upgrade").stdout.strip() == migrate.HEAD


def test_an_empty_db_option_is_a_usage_error(setup: Path) -> None:
    result = run("--db", "", "list")
    assert result.exit_code == 2
    assert "not empty" in one_error_line(result)
    assert not (setup / "home" / ".data").exists()


def test_a_mistyped_db_path_creates_nothing(setup: Path) -> None:
    typo = setup / "tpyo" / "index.sqlite"
    for command in (["list"], ["candidates"], ["catalog"], ["read", "skill://x"], ["verify"],
                    ["audit"], ["db", "current"], ["explain", "x"]):
        result = run("--db", str(typo), *command)
        assert result.exit_code == 3, (command, result.output)
        assert f"no index at {typo}" in one_error_line(result)
    assert not typo.parent.exists()
    assert run("--db", str(typo), "reindex").exit_code == 0
    assert typo.exists()


@pytest.mark.parametrize("args", [("reindex", "--bogus"), ("nope",), ("explain",),
                                  ("catalog", "--format", "html")], ids=" ".join)
def test_usage_errors_have_the_same_style(setup: Path, args: tuple[str, ...]) -> None:
    result = run(*args)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "--help`" in line
    assert "Usage:" not in result.output


def test_an_unknown_audit_outcome_is_a_usage_error(setup: Path) -> None:
    assert run("reindex").exit_code == 0
    result = run("audit", "--outcome", "bogus")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert all(outcome in line for outcome in ("ok", "refused", "mismatch", "not-found"))


def test_a_name_without_the_scheme_gets_a_hint(setup: Path) -> None:
    assert run("reindex").exit_code == 0
    result = run("read", "skill-1")
    assert result.exit_code == 4
    assert "skill://skill-1" in one_error_line(result)
