"""What a newcomer meets first: help without a command, a near miss named, a database or root
that cannot be right said so in one line, counts in the singular where there is one."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from skillindex.cli import cli
from tests.conftest import isolate_cli, write_skill


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    write_skill(tmp_path / "skills", "pdf")
    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    return CliRunner()


def test_skillindex_alone_prints_the_commands_and_examples(runner: CliRunner) -> None:
    result = runner.invoke(cli, [])
    assert result.exit_code == 0
    assert "Commands:" in result.stdout and "Examples:" in result.stdout
    assert "reindex" in result.stdout and result.stderr == ""


@pytest.mark.parametrize(("args", "near"), [(["lsit"], "list"), (["reindx"], "reindex"),
                                            (["db", "curent"], "current")])
def test_a_misspelled_command_gets_the_nearest_one(runner: CliRunner, args: list[str],
                                                    near: str) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == 2
    assert f"did you mean {near!r}?" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_word_near_no_command_is_only_refused(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["xyzzy"])
    assert result.exit_code == 2 and "did you mean" not in result.stderr


@pytest.mark.parametrize("url", ["mysql://u@h/d", "mssql+pyodbc://h/d", "oracle://h/d"])
def test_a_database_of_another_kind_is_named_as_unsupported(runner: CliRunner,
                                                             url: str) -> None:
    result = runner.invoke(cli, ["--db", url, "list"])
    assert result.exit_code == 2
    assert "only SQLite" in result.stderr and "PostgreSQL" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_database_that_is_a_folder_is_said_to_be_one(runner: CliRunner,
                                                       tmp_path: Path) -> None:
    result = runner.invoke(cli, ["--db", str(tmp_path), "list"])
    assert result.exit_code == 2
    assert f"{tmp_path} is a folder" in result.stderr


def test_a_configured_root_that_does_not_exist_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "not-there"
    isolate_cli(tmp_path, monkeypatch, missing)
    runner = CliRunner()
    reindexed = runner.invoke(cli, ["reindex"])
    assert reindexed.exit_code == 0
    assert f"{missing}: the configured root does not exist [root-missing]" in reindexed.stderr
    again = runner.invoke(cli, ["reindex"])  # the unchanged index's quick path says it too
    assert "[root-missing]" in again.stderr
    listed = runner.invoke(cli, ["list"])
    assert listed.exit_code == 0
    assert f"a configured root does not exist ({missing})" in listed.output


def test_a_preset_folder_that_does_not_exist_is_not_a_problem(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["reindex"])
    assert result.exit_code == 0 and "root-missing" not in result.stderr


def test_audit_verify_refuses_a_malformed_head_as_a_usage_error(runner: CliRunner) -> None:
    assert runner.invoke(cli, ["reindex"]).exit_code == 0
    result = runner.invoke(cli, ["audit", "verify", "--head", "X"])
    assert result.exit_code == 2
    assert "is not a head hash" in result.stderr
    head = runner.invoke(cli, ["--json", "audit", "verify"])
    assert head.exit_code == 0


def test_one_of_a_thing_is_counted_in_the_singular(runner: CliRunner) -> None:
    assert runner.invoke(cli, ["reindex"]).exit_code == 0
    verified = runner.invoke(cli, ["verify"])
    assert verified.exit_code == 0
    assert "1 file of 1 skill match" in verified.stdout
    read = runner.invoke(cli, ["read", "skill://pdf/absent.md"])
    assert read.exit_code == 3 and "error: file not found: absent.md" in read.stderr
