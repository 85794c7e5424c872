"""Every command through click's runner: output, --json, exit codes, errors without tracebacks."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from skillindex.cli import cli, common
from skillindex.store import migrate
from tests.conftest import isolate_cli, write_skill


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with one good and one broken skill and a settings file naming the root."""
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Read PDFs.")
    (write_skill(root, "broken") / "SKILL.md").write_text("no frontmatter at all\n")
    isolate_cli(tmp_path, monkeypatch, root)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_reindex_prints_a_summary(setup: Path) -> None:
    result = run("reindex")
    assert result.exit_code == 0, result.output
    assert "indexed 2 skills in 1 root: 2 added" in result.output
    assert "`skillindex rejections` why some were rejected" in result.output
    assert "1 rejected" in result.output


@pytest.mark.parametrize("position", ["before", "after"])
def test_json_before_or_after_the_command(setup: Path, position: str) -> None:
    args = ["--json", "reindex"] if position == "before" else ["reindex", "--json"]
    report = json.loads(run(*args).output)
    assert {"run_id", "seen", "added", "changed", "unchanged", "removed", "rejected",
            "duration_s"} <= set(report)
    assert (report["seen"], report["rejected"]) == (2, 1)


def test_candidates_and_rejections(setup: Path) -> None:
    run("reindex")
    table = run("candidates").output
    assert "pdf" in table
    assert "rejected" in table
    rows = json.loads(run("candidates", "--json").output)
    assert [(r["name"], r["status"]) for r in rows] == [("broken", "rejected"),
                                                        ("pdf", "accepted")]
    assert set(rows[0]) >= {"name", "path", "root", "scope", "provider", "precedence", "status",
                            "findings"}
    rejected = json.loads(run("--json", "rejections").output)
    assert [f["code"] for f in rejected[0]["findings"]] == ["frontmatter-missing"]
    assert "frontmatter-missing" in run("rejections").output


def test_roots(setup: Path) -> None:
    run("reindex")
    [root] = json.loads(run("roots", "--json").output)
    assert (root["path"], root["candidates"], root["rejected"], root["present"]) == (
        str(setup / "skills"), 2, 1, True)
    assert "indexed" in run("roots").output


def test_db_commands(setup: Path) -> None:
    assert run("db", "current").exit_code == 3  # no database file yet: nothing is created
    assert run("db", "upgrade").output.strip() == migrate.HEAD
    assert run("db", "downgrade", "base").output.strip() == "(empty database)"
    assert run("db", "current").output.strip() == "(empty database)"
    assert json.loads(run("--json", "db", "upgrade").output) == {"revision": migrate.HEAD}


def test_bad_settings_are_a_usage_error_without_traceback(setup: Path) -> None:
    (setup / "config.toml").write_text("[skills]\nnope = 1\n")
    result = run("reindex")
    assert result.exit_code == 2
    assert "unknown setting skills.nope" in result.output
    assert "Traceback" not in result.output


def test_a_missing_settings_file_is_a_usage_error(setup: Path) -> None:
    result = run("--config", str(setup / "absent.toml"), "roots")
    assert result.exit_code == 2
    assert "settings file not found" in result.output


def test_an_overlong_index_name_is_a_usage_error(setup: Path) -> None:
    result = run("--index", "x" * 101, "candidates")
    assert result.exit_code == 2
    assert "index must be a non-empty name of at most 100 characters" in result.output


def test_unknown_command_is_a_usage_error(setup: Path) -> None:
    assert run("frobnicate").exit_code == 2


def test_an_unusable_database_is_an_error_line(setup: Path) -> None:
    (setup / "not-a-db.sqlite").write_text("this is not sqlite" * 100)
    result = run("--db", str(setup / "not-a-db.sqlite"), "candidates")
    assert result.exit_code == 1
    assert result.output.startswith("skillindex: error:")
    assert "Traceback" not in result.output


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, name
        found.append((*prefix, name))
        if isinstance(command, click.Group):
            found.extend(_commands(command, (*prefix, name)))
    return found


@pytest.mark.parametrize("command", _commands(cli), ids=" ".join)
def test_every_command_has_help(command: tuple[str, ...]) -> None:
    result = run(*command, "--help")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert any(line.strip() and not line.startswith("Usage") for line in lines[1:4])
    assert re.search(r"Examples:\n +skillindex ", result.output)
    assert "seed system" not in result.output


@pytest.mark.parametrize("group", [(), ("db",)], ids=["skillindex", "db"])
def test_command_summaries_are_whole_sentences(group: tuple[str, ...]) -> None:
    listing = run(*group, "--help").output.split("Commands:\n", 1)[1]
    assert not re.search(r"\w\.\.\.(\s|$)", listing)  # click's mark of a summary it cut
    assert "e.g" not in listing


def test_catalog_command(setup: Path) -> None:
    run("reindex")
    text = run("catalog").output
    assert text.startswith("<available_skills>")
    assert "<name>pdf</name>" in text
    assert "broken" not in text
    data = json.loads(run("catalog", "--json", "--format", "markdown").output)
    assert data["format"] == "markdown"
    assert data["text"].startswith("# Skills\n\n## pdf\n")
    assert {"text", "format", "chars", "max_chars", "entries", "omitted"} <= set(data)


def test_catalog_reports_shortening_on_stderr(setup: Path) -> None:
    run("reindex")
    result = CliRunner().invoke(cli, ["catalog", "--max-chars", "80"], catch_exceptions=False)
    assert len(result.stdout) <= 80
    assert "omitted" in result.stderr or "shortened" in result.stderr
    both = run("catalog", "--max-chars", "10", "--context-window", "1000")
    assert both.exit_code == 2
    window = json.loads(run("catalog", "--json", "--context-window", "1000").stdout)
    assert window["max_chars"] == 80


def test_context_needs_no_database(setup: Path) -> None:
    (setup / "XCSH.md").write_text("be brief\n")
    result = run("context", "--json")
    assert [item["name"] for item in json.loads(result.stdout)] == ["XCSH.md"]
    assert not (setup / "cli.sqlite").exists()


def test_each_command_is_loaded_from_the_module_that_defines_it() -> None:
    # The group imports a command's module when the command is looked up: a name missing from
    # COMMAND_MODULES would be "No such command", a wrong module a command that loads another's.
    for module in sorted(Path(common.__file__).parent.glob("*.py")):
        importlib.import_module(f"skillindex.cli.{module.stem}")
    defined = {name: command.callback.__module__ for name, command in cli.commands.items()
               if command.callback is not None}
    assert defined == {name: f"skillindex.cli.{module}"
                       for name, module in common.COMMAND_MODULES.items()}


def test_a_one_shot_command_imports_only_its_own_module() -> None:
    code = ("import sys; from skillindex.cli import main\n"
            "try:\n    main(['list', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('skillindex.cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()[-1]
    # Beside its own module: what every command shares (options, errors, parameter types).
    assert out == str(["skillindex.cli.common", "skillindex.cli.index", "skillindex.cli.params"])
