"""The README and the manual: every link leads somewhere; every command and setting is in it."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import fields
from pathlib import Path

import pytest

from skillindex import config
from skillindex.cli import reference

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.DOTALL | re.MULTILINE)
CODE = re.compile(r"`[^`\n]*`")


def prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets are not links."""
    return CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor a forge (GitHub's rule) gives a Markdown heading."""
    text = heading.strip().lower()
    text = "".join(ch for ch in text
                   if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        if match := re.match(r"#{1,6} (.*)", line):
            base = slug(match.group(1).replace("`", ""))
            anchor, n = base, 1
            while anchor in found:
                anchor, n = f"{base}-{n}", n + 1
            found.add(anchor)
    return found


def links() -> list[tuple[Path, str]]:
    return [(page, target) for page in PAGES for target in LINK.findall(prose(page.read_text()))]


@pytest.mark.parametrize(("page", "target"), links(),
                         ids=[f"{p.name}:{t}" for p, t in links()])
def test_every_link_leads_to_a_file_or_heading_that_exists(page: Path, target: str) -> None:
    if re.match(r"[a-z]+:", target):  # https:, mailto: ... : not followed offline
        return
    path, _, anchor = target.partition("#")
    destination = (page.parent / path).resolve() if path else page
    assert destination.exists(), f"{page.name} links to {target}, which is not there"
    if anchor:
        assert destination.suffix == ".md", f"{page.name}: an anchor into {path}"
        where = path or page.name
        assert anchor in anchors(destination), f"{page.name}: no heading #{anchor} in {where}"


def test_the_link_check_sees_a_broken_link_and_a_missing_heading(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    page.write_text("# Title\n\n## Two words\n\n[x](b.md) [y](#two-words) `[z](c.md)`\n")
    assert LINK.findall(prose(page.read_text())) == ["b.md", "#two-words"]
    assert anchors(page) == {"title", "two-words"}
    heading = "Least privilege: who may touch the audit"
    assert slug(heading) == "least-privilege-who-may-touch-the-audit"


def test_every_page_of_the_manual_is_reachable_from_the_readme() -> None:
    reached, todo = {REPO / "README.md"}, [REPO / "README.md"]
    while todo:
        page = todo.pop()
        for target in LINK.findall(prose(page.read_text())):
            path = target.partition("#")[0]
            if path and not re.match(r"[a-z]+:", path):
                found = (page.parent / path).resolve()
                if found.suffix == ".md" and found.exists() and found not in reached:
                    reached.add(found)
                    todo.append(found)
    assert sorted(p.name for p in set(PAGES) - reached) == []


def test_the_command_reference_is_what_the_command_tree_says() -> None:
    page = REPO / "docs" / "commands.md"
    assert page.read_text() == reference.reference(), (
        "docs/commands.md is out of date: python -m skillindex.cli.reference docs/commands.md")


def test_the_command_reference_lists_every_command_and_option() -> None:
    text = reference.reference()
    for command in ("skillindex read", "skillindex audit verify", "skillindex db upgrade",
                    "skillindex hosts", "skillindex check"):
        assert f"\n## {command}\n" in text
    assert "--max-bytes N" in text and "--context-window" in text


def setting_keys() -> dict[str, set[str]]:
    """Every key the settings file takes, per table, from the settings reader's own lists."""
    return {
        "Top level": config._TOP_LEVEL_KEYS - {"skills", "roots", "serve"},
        "`[skills]`": config._SKILL_KEYS - {"catalog"},  # [skills.catalog] is a table of its own
        "`[skills.catalog]`": {f.name for f in fields(config.CatalogModes)},
        "`[[roots]]`": set(config._ROOT_KEYS),
        "`[serve]`": {f.name for f in fields(config.ServeLimits)},
    }


def test_every_setting_is_in_the_settings_reference() -> None:
    text = (REPO / "docs" / "settings.md").read_text()
    reference_part = text.split("\n## Reference\n", 1)[1]
    for table, keys in setting_keys().items():
        section = reference_part.split(f"\n### {table}\n", 1)[1].split("\n### ", 1)[0]
        rows = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))
        assert keys - rows == set(), f"undocumented in {table}"
        assert rows - keys == set(), f"documented in {table} but not a setting"


def test_the_readme_is_short_and_has_the_two_set_up_commands() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    quick = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)```", quick, flags=re.DOTALL)
    assert [c.strip() for c in commands] == [
        "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/skillindex reindex",
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest",
    ]
    ci = (REPO / ".ci" / "run").read_text()
    assert ".venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]'" in ci
    assert ".venv/bin/pytest" in ci


def test_no_page_installs_from_a_package_index_skillindex_is_not_on() -> None:
    # `pip install 'skillindex[mcp]'` fails with "No matching distribution" (or installs a
    # project of that name someone else registered).
    wrong = re.compile(r"pip install (-U )?['\"]?skillindex(\[[^\]]*\])?['\"]?(?![-\w./]|\s*@)")
    for page in PAGES:
        code = "\n".join(FENCE.findall(page.read_text()))
        if page.name == "commands.md":
            code = page.read_text()
        assert not wrong.search(code), f"{page.name}: {wrong.search(code)}"


def test_the_wheel_the_docs_name_is_this_version() -> None:
    import skillindex

    for page in PAGES:
        for version in re.findall(r"skillindex-([0-9][^-]*)-py3-none-any\.whl", page.read_text()):
            assert version == skillindex.__version__, page.name


def test_json_is_accepted_after_every_command_as_commands_md_says() -> None:
    import click

    from tests.clitree import commands

    assert "`--json` is also accepted after it" in (REPO / "docs" / "commands.md").read_text()
    without = [" ".join(path) for path, command in commands()
               if path and not (isinstance(command, click.Group)
                                and not command.invoke_without_command)
               and not any("--json" in getattr(p, "opts", ()) for p in command.params)]
    assert without == []


def test_db_current_json_after_the_command_prints_the_revision(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from skillindex.cli import cli

    db = str(tmp_path / "index.sqlite")
    runner = CliRunner()
    upgraded = runner.invoke(cli, ["--db", db, "db", "upgrade", "--json"])
    assert upgraded.exit_code == 0, upgraded.output
    current = runner.invoke(cli, ["--db", db, "db", "current", "--json"])
    assert current.exit_code == 0, current.output
    assert json.loads(current.output) == json.loads(upgraded.output)


def test_roots_lists_in_precedence_order_as_its_help_and_getting_started_say(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from click.testing import CliRunner

    from skillindex.cli import cli
    from tests.conftest import isolate_cli

    isolate_cli(tmp_path, monkeypatch, tmp_path / "unused")
    low, high = tmp_path / "low", tmp_path / "high"
    (tmp_path / "config.toml").write_text(  # registered lowest first
        f'[skills]\npresets = false\n\n[[roots]]\npath = "{low}"\nprecedence = 10\n\n'
        f'[[roots]]\npath = "{high}"\nprecedence = 20\n')
    assert "roots in precedence order" in (REPO / "docs" / "getting-started.md").read_text()
    runner = CliRunner()
    assert "In precedence order" in runner.invoke(cli, ["roots", "--help"]).output
    assert runner.invoke(cli, ["reindex"]).exit_code == 0
    listed = runner.invoke(cli, ["roots", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [entry["path"] for entry in json.loads(listed.output)] == [str(high), str(low)]


def test_the_catalog_says_names_only_when_descriptions_are_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from click.testing import CliRunner

    from skillindex.cli import cli
    from tests.conftest import isolate_cli, write_skill

    root = tmp_path / "skills"
    for number in range(6):
        write_skill(root, f"skill-{number}", description="A fairly long description of what "
                    f"skill {number} does for the people who ask for it.")
    isolate_cli(tmp_path, monkeypatch, root)
    runner = CliRunner()
    assert runner.invoke(cli, ["reindex"]).exit_code == 0
    shown = json.loads(runner.invoke(cli, ["catalog", "--max-chars", "400", "--json"]).stdout)
    entries = shown["entries"]
    assert entries and all(entry["description"] == "" for entry in entries)
    said = runner.invoke(cli, ["catalog", "--max-chars", "400"]).stderr
    assert f"by name only, {len(shown['omitted'])} skills omitted" in said
    assert f"; {len(entries)} skill{'s' if len(entries) != 1 else ''} by name only" in said
    assert "shortened" not in said


def test_hosts_md_says_what_write_does_to_a_one_line_entry_and_whose_paths_it_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from click.testing import CliRunner

    from skillindex.cli import cli
    from tests.conftest import isolate_cli

    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    text = " ".join((REPO / "docs" / "hosts.md").read_text().split())
    assert "this `.mcp.json` is per machine" in text
    assert "comes back one key a line" in text and "kept as it was written, line for line" in text
    assert "stays `Pending approval` until the folder's trust has been accepted" in text
    other = '    "other": {"command": "x", "args": ["a"]},\n'
    (tmp_path / ".mcp.json").write_text(
        '{\n  "mcpServers": {\n' + other
        + '    "skillindex": {"command": "old", "args": ["serve"], "env": {"A": "1"}}\n  }\n}\n')
    assert CliRunner().invoke(cli, ["hosts", "claude", "--write"]).exit_code == 0
    written = (tmp_path / ".mcp.json").read_text()
    assert other in written and '        "A": "1"\n' in written
    entry = json.loads(written)["mcpServers"]["skillindex"]
    assert entry["env"] == {"A": "1"}
    assert Path(entry["command"]).is_absolute() and str(tmp_path) in entry["args"]


def test_the_readme_names_the_runtime_it_reproduces_before_using_its_words() -> None:
    text = (REPO / "README.md").read_text()
    assert "seed" not in text.lower()
    first_xcsh = text.index("xcsh")
    assert text.index("the coding-agent runtime") < text.index("`.xcsh` (", first_xcsh) + 200
    assert text.index("XCSH.md") < text.index("## Use it from an agent host")
    for page in PAGES:
        assert "the seed" not in page.read_text(), page.name


def test_the_readme_says_how_long_the_tests_take_and_what_they_need() -> None:
    quick = (REPO / "README.md").read_text().split("\n## Quick start\n", 1)[1].split("\n## ")[0]
    words = " ".join(quick.split())
    assert "about 10 minutes" in words
    assert "PostgreSQL server binaries" in words and "Chromium" in words
    assert "skipped" in words and "`CI`" in words


def test_serve_http_json_logs_where_it_listens_as_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import time
    import urllib.request

    from click.testing import CliRunner

    from skillindex.cli import cli
    from tests.conftest import isolate_cli, write_skill
    from tests.serving import serving

    write_skill(tmp_path / "skills", "pdf")
    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    assert CliRunner().invoke(cli, ["reindex"]).exit_code == 0
    log = tmp_path / "access.log"
    with serving(tmp_path, "--json", log=log) as port:
        # The socket listens before the server runs: stop it once it has said where it is.
        for _ in range(600):
            if log.read_text().endswith("\n"):
                break
            time.sleep(0.1)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30).close()
    first = json.loads(log.read_text().splitlines()[0])
    assert first["message"] == f"serving http://127.0.0.1:{port}/mcp"


def _documented_commands(page: Path, heading: str) -> list[list[str]]:
    """The `skillindex ...` lines of the first sh block under `heading`, comments dropped."""
    import shlex

    section = page.read_text().split(f"\n{heading}\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None
    return [shlex.split(line, comments=True)[1:] for line in block.group(1).splitlines()
            if line.startswith("skillindex ")]


# Commands that run until stopped, serve, or need files of their own (a skill's trigger evals):
# run elsewhere (test_watch, test_serve_*, the eval tests).
_LONG_RUNNING = {"watch", "serve", "eval"}
# What a placeholder of the docs stands for in the small tree below.
_FILLED = {"NAME": "pdf", "[PATH]...": "skills", "current|upgrade": "current"}


@pytest.mark.parametrize(("page", "heading"), [
    ("README.md", "## The commands most people use"), ("docs/getting-started.md", "## Commands")])
def test_the_everyday_commands_run_as_documented(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page: str, heading: str) -> None:
    from click.testing import CliRunner

    from skillindex.cli import cli
    from tests.conftest import isolate_cli, write_skill

    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Fill in a PDF form and read the text of a PDF.")
    write_skill(root, "broken", frontmatter="name: [unclosed\n")
    isolate_cli(tmp_path, monkeypatch, root)
    runner = CliRunner()
    ran = 0
    for documented in _documented_commands(REPO / page, heading):
        if documented[0] in _LONG_RUNNING:
            continue
        args = [_FILLED.get(arg, arg) for arg in documented]
        if "[REV]|downgrade" in args:  # one line for three commands: the first
            args = args[:args.index("[REV]|downgrade")]
        result = runner.invoke(cli, args)
        # 1 is the documented answer of a lint that finds problems (check of a broken skill).
        assert result.exit_code in (0, 1) if args[0] == "check" else result.exit_code == 0, (
            args, result.output)
        ran += 1
    assert ran >= 10
