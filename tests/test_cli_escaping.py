"""Hostile names, descriptions and paths through every command: the terminal only ever receives
them escaped, JSON keeps them exact, and the XML catalog stays well-formed."""

from __future__ import annotations

import ast
import json
import os
import sqlite3
import unicodedata
import xml.dom.minidom
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import skillindex.cli as cli_package
from skillindex.cli import cli
from tests.conftest import write_skill

# YAML escapes: an OSC title sequence, a screen clear, a C1 CSI, bidi, zero-width, a tag character.
HOSTILE_DESCRIPTION = ('"\\e]0;pwned\\a then \\e[2J\\x9b31m look \\u202eevil\\u2066 '
                       'hid\\u200bden\\uFEFF tag\\U000E0041 next\\x85line"')
DESCRIPTION = ("\x1b]0;pwned\x07 then \x1b[2J\x9b31m look \u202eevil\u2066 hid\u200bden\ufeff "
               "tag\U000e0041 next\x85line")
# Folder names as a hostile archive could unpack them; each holds a skill with a plain name.
FOLDERS = {"escdir": "esc\x1b]0;folder\x07dir", "newline": "new\nline", "bidi": "bidi\u202eevil",
           "zw": "zw\u200b", "cone": "c1\x9bdir", "tag": "tag\U000e0041"}
RESOURCE = "refs/\x1b]0;file\x07.md"
GONE_ROOT = "gone\x1b]2;root\x07"
LOOP = "loop\x1b[5m\u202e"
REJECTED = "rej\x1b]0;r\x07\u202e"


def raw_unsafe(text: str) -> list[str]:
    """What a terminal must not receive: controls (newlines excepted), format characters (bidi,
    zero-width, tags), surrogates, line and paragraph separators."""
    return [c for c in text if c != "\n" and (
        unicodedata.category(c) in {"Cc", "Cf", "Cs", "Zl", "Zp"} or c in "\ufffe\uffff")]


def run(*args: str) -> Result:
    # color=True: click must not strip anything on its own, so the test sees what a terminal would.
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, color=True)


def human(*args: str, code: int = 0) -> str:
    """Runs a command for a human and checks that neither stream carries a raw character."""
    result = run(*args)
    assert result.exit_code == code, (args, result.output)
    assert raw_unsafe(result.stdout) == [], (args, result.stdout)
    assert raw_unsafe(result.stderr) == [], (args, result.stderr)
    return result.stdout + result.stderr


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root holding a skill with a hostile description and skills in hostile folders, a
    settings file naming it and a root that does not exist, and an isolated home."""
    root = tmp_path / "skills"
    skill = write_skill(root, "osc", f"name: osc\ndescription: {HOSTILE_DESCRIPTION}\n")
    (skill / "refs").mkdir()
    (skill / RESOURCE).write_text("resource\n")
    for name, folder in FOLDERS.items():
        write_skill(root, folder, name=name, description=f"A skill in {name}.")
    write_skill(root, REJECTED, "name: rejected\n")  # no description: rejected
    os.symlink(root, root / LOOP)
    home = tmp_path / "home"
    config = tmp_path / "config.toml"
    gone = json.dumps(str(tmp_path / GONE_ROOT))  # a JSON string is a TOML basic string
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\n'
                      'precedence = 10\nvalidation = "lenient"\n\n'
                      f'[[roots]]\npath = {gone}\nprecedence = 5\n')
    for key, value in {"HOME": home, "XDG_CONFIG_HOME": home / ".config",
                       "XDG_DATA_HOME": home / ".data", "SKILLINDEX_CONFIG": config,
                       "SKILLINDEX_DB": tmp_path / "cli.sqlite"}.items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.chdir(tmp_path)
    assert run("reindex").exit_code == 0
    return root


def test_reindex_problem_lines_show_the_folder_escaped(tree: Path) -> None:
    output = human("reindex")
    assert "loop\\x1b[5m\\u202e" in output


@pytest.mark.parametrize("command", [["candidates"], ["list"], ["rejections"], ["roots"],
                                     ["explain", "osc"], ["explain", "newline"],
                                     ["explain", "escdir"], ["context"]])
def test_tables_and_messages_show_hostile_text_escaped(tree: Path, command: list[str]) -> None:
    human(*command)


def test_folder_names_stay_visible_in_the_candidates_table(tree: Path) -> None:
    output = human("candidates")
    for shown in ("esc\\x1b]0;folder\\x07dir", "new\\nline", "bidi\\u202eevil", "zw\\u200b",
                  "c1\\x9bdir", "tag\\U000e0041"):
        assert shown in output
    # One line per candidate, however many newlines the folder names hold.
    assert len(output.splitlines()) == 1 + 2 + len(FOLDERS)


def test_rejections_show_the_folder_escaped(tree: Path) -> None:
    assert "rej\\x1b]0;r\\x07\\u202e/SKILL.md" in human("rejections")


def test_explain_prints_one_line_per_fact_whatever_the_path_holds(tree: Path) -> None:
    lines = human("explain", "newline").splitlines()
    assert len(lines) == 5  # the catalog line, its mode, the candidate, its reason, its warning
    assert lines[0].endswith("new\\nline/SKILL.md")
    assert lines[4].endswith("differs from its directory 'new\\nline'")


def test_roots_show_a_missing_root_escaped(tree: Path) -> None:
    assert "gone\\x1b]2;root\\x07" in human("roots")


@pytest.mark.parametrize("fmt", ["xml", "markdown", "json"])
def test_catalog_formats_reach_the_terminal_escaped(tree: Path, fmt: str) -> None:
    output = human("catalog", "--format", fmt)
    if fmt == "xml":
        # What XML 1.0 forbids never appears, even as a character reference.
        document = output[:output.rindex("</available_skills>") + len("</available_skills>")]
        skills = ET.fromstring(document).findall("skill")
        xml.dom.minidom.parseString(document)
        assert "&#" not in document
        description = next(s.findtext("description") for s in skills
                           if s.findtext("name") == "osc")
        assert description is not None and "\\x1b]0;pwned\\x07" in description
    elif fmt == "json":
        entries = json.loads(output[:output.rindex("]}") + 2])["skills"]
        assert next(e["description"] for e in entries if e["name"] == "osc") == DESCRIPTION
    else:
        assert "## osc\n\\x1b]0;pwned\\x07" in output


def test_a_folder_name_with_a_newline_adds_no_catalog_line(tree: Path) -> None:
    for fmt in ("xml", "markdown"):
        lines = human("catalog", "--format", fmt).splitlines()
        assert not any(line.startswith("line/SKILL.md") for line in lines), fmt


def test_json_keeps_the_exact_text(tree: Path) -> None:
    for command in (["candidates"], ["list"], ["rejections"], ["explain", "newline"], ["roots"],
                    ["catalog", "--format", "xml"]):
        result = run("--json", *command)
        assert raw_unsafe(result.stdout) == [], command
        json.loads(result.stdout)
    paths = {row["path"] for row in json.loads(run("--json", "candidates").stdout)}
    assert paths >= {str(tree / folder / "SKILL.md") for folder in FOLDERS.values()}
    [osc] = [row for row in json.loads(run("--json", "list").stdout) if row["name"] == "osc"]
    assert osc["description"] == DESCRIPTION
    catalog = json.loads(run("--json", "catalog").stdout)
    assert {e["location"] for e in catalog["entries"]} >= {
        str(tree / folder / "SKILL.md") for folder in FOLDERS.values()}


def test_verify_shows_an_unexpected_file_escaped(tree: Path) -> None:
    (tree / "osc" / "refs" / "\x1b]0;new\x07\u202e.txt").write_text("new\n")
    output = human("verify", code=1)
    assert "refs/\\x1b]0;new\\x07\\u202e.txt" in output
    [drift] = json.loads(run("--json", "verify").stdout)["drift"]
    assert drift["resource"] == "refs/\x1b]0;new\x07\u202e.txt"


def test_errors_and_the_audit_log_show_hostile_paths_escaped(tree: Path) -> None:
    (tree / "osc" / RESOURCE).write_text("changed\n")
    error = human("read", "skill://osc/refs/%1B%5D0%3Bfile%07.md", code=4)
    assert "\\x1b]0;file\\x07.md" in error
    human("read", "skill://osc/refs/%1B%5D0%3Babsent%07%E2%80%AE.md", code=3)
    human("read", "skill://osc", "--session", "s\x1b[8m\u202e", "--reason", "r\x1b]0;x\x07")
    output = human("audit")
    assert "\\x1b]0;absent\\x07\\u202e.md" in output
    assert "s\\x1b[8m\\u202e" in output
    human("audit", "--levels")
    events = json.loads(run("--json", "audit").stdout)
    assert {e["session"] for e in events} >= {"s\x1b[8m\u202e"}


def test_read_stays_byte_exact(tree: Path) -> None:
    result = run("read", f"skill://osc/refs/{'%1B%5D0%3Bfile%07.md'}")
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == b"resource\n"


def test_text_written_by_an_older_version_is_escaped_too(tree: Path, tmp_path: Path) -> None:
    # The renderers must not trust the store: put what an older version might have kept there.
    with sqlite3.connect(tmp_path / "cli.sqlite") as db:
        db.execute("UPDATE candidate SET name = ?, description = ? WHERE name = 'osc'",
                   ("osc\x1b]0;old\x07\u202e", "old\x00\x1b[2J\u2028text"))
        db.execute("DELETE FROM catalog_cache")
        # The resolution the reindex stored still names the old text: resolve again.
        db.execute("DELETE FROM resolved_winner")
        db.execute("DELETE FROM resolved_set")
    assert "osc\\x1b]0;old\\x07\\u202e" in human("list")
    for fmt in ("xml", "markdown", "json"):
        human("catalog", "--format", fmt)
    document = human("catalog")
    ET.fromstring(document[:document.rindex("</available_skills>") + 19])
    human("explain", "osc\x1b]0;old\x07\u202e")
    human("explain", "missing\x1b]0;x\x07", code=3)


# Output the CLI prints exactly as it is: data handed on (a file, a /skill: message, a lock file
# a chunk at a time, a migration revision, a host's configuration file, whose strings are
# escaped as it is built) or text escaped already on the line itself.
EXACT = {"found.data", "message.message", "chunk", "current or '(empty database)'",
         "host_file"}


def test_every_command_prints_through_the_escaping_helpers() -> None:
    """A new command printing skill text with click.echo would bypass the escaping: human output
    goes through cli.common's echo, table, fail and print_json."""
    bypasses = []
    for module in sorted(Path(cli_package.__file__).parent.glob("*.py")):
        if module.name == "common.py":
            continue
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func) in {
                    "click.echo", "click.secho", "print", "sys.stdout.write",
                    "sys.stderr.write"}):
                continue
            first = ast.unparse(node.args[0]) if node.args else ""
            # A line starting with a carriage return redraws the progress line, escaped as built.
            if first in EXACT or first.startswith(("escape.", "f'\\r", 'f"\\r', "'\\r'")):
                continue
            bypasses.append(f"{module.name}:{node.lineno}: {ast.unparse(node)}")
    assert bypasses == []
