"""Other hosts' frontmatter and folders: what skillindex does with each, on real trees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from skillindex.cli import cli
from skillindex.config import Settings, parse_settings
from skillindex.errors import NotUserInvocableError
from skillindex.index import dialect
from skillindex.model import Severity
from skillindex.providers import plan_roots
from tests.conftest import isolate_cli
from tests.skilltrees import World, make_world, symlink, write_skill

DIALECTS = "[skills]\ndialects = true\n"


# -- The fields, as judged --------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "expected"), [
    ({"when_to_use": "  When a PDF is attached.  "},
     dialect.HostFields(when_to_use="When a PDF is attached.")),
    ({"paths": "src/**/*.py, *.toml"}, dialect.HostFields(paths=("src/**/*.py", "*.toml"))),
    ({"paths": ["docs/**"], "globs": ["docs/**", "*.md"]},
     dialect.HostFields(paths=("docs/**", "*.md"))),
    ({"alwaysApply": True}, dialect.HostFields(always_apply=True)),
    ({"user-invocable": False}, dialect.HostFields(user_invocable=False)),
    ({"user-invocable": "false"}, dialect.HostFields(user_invocable=False)),
    ({"argument-hint": ["issue-number"]}, dialect.HostFields(argument_hint="[issue-number]")),
    ({"argument-hint": "<file> [mode]"}, dialect.HostFields(argument_hint="<file> [mode]")),
    ({"arguments": "file mode"}, dialect.HostFields(arguments=("file", "mode"))),
    ({"arguments": ["file", "mode"]}, dialect.HostFields(arguments=("file", "mode"))),
], ids=["when_to_use", "paths-string", "paths-and-globs", "alwaysApply", "user-invocable",
        "user-invocable-repaired", "argument-hint-list", "argument-hint", "arguments-string",
        "arguments-list"])
def test_host_fields_are_read_as_their_hosts_read_them(fields: dict[str, object],
                                                       expected: dialect.HostFields) -> None:
    host, findings = dialect.host_fields(fields)
    assert host == expected
    assert findings == []
    assert dialect.HostFields.from_json(host.to_json()) == expected


@pytest.mark.parametrize("fields", [
    {"when_to_use": ["a"]}, {"paths": 3}, {"globs": [1, 2]}, {"alwaysApply": "sometimes"},
    {"user-invocable": 0}, {"argument-hint": {"a": 1}}, {"arguments": 7},
], ids=["when_to_use", "paths", "globs", "alwaysApply", "user-invocable", "argument-hint",
        "arguments"])
def test_a_host_field_of_the_wrong_type_is_a_warning_and_ignored(
        fields: dict[str, object]) -> None:
    host, findings = dialect.host_fields(fields)
    assert host == dialect.NONE
    assert [(f.code, f.severity) for f in findings] == [("field-type", Severity.WARNING)]
    assert next(iter(fields)) in findings[0].message


def test_host_fields_are_known_fields_not_unknown_ones(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    write_skill(world.repo / ".claude" / "skills", "pdf",
                extra="when_to_use: When a PDF is attached.\npaths: ['*.pdf']\n"
                      "user-invocable: false\nargument-hint: '[file]'\nalwaysApply: false\n"
                      "globs: ['*.pdf']\narguments: [file]\nhooks: {}")
    world.run("reindex")
    result = world.run("--json", "list")
    codes = [(f["code"], f["message"]) for f in json.loads(result.output)[0]["findings"]]
    assert codes == [("unknown-field", "unknown frontmatter field 'hooks' kept as metadata")]


# -- `/skill:` commands -----------------------------------------------------------------------

def _command_world(tmp_path: Path, body: str, extra: str = "") -> tuple[World, Path]:
    world = make_world(tmp_path)
    skill = write_skill(world.repo / ".claude" / "skills", "fix", extra=extra, body=body)
    assert world.run("reindex").exit_code == 0
    return world, skill.parent


@pytest.mark.parametrize(("body", "args", "message"), [
    ("Fix issue $ARGUMENTS now.", ["12", "high"], "Fix issue 12 high now."),
    ("First $ARGUMENTS[0], then $ARGUMENTS[1].", ["a b", "c"], "First a b, then c."),
    ("First $0, then $1, never $2.", ["a", "b"], "First a, then b, never $2."),
    ("Run ${CLAUDE_SKILL_DIR}/scripts/go.sh and ${SKILL_DIR}/x.", [], "Run {dir}/scripts/go.sh "
     "and {dir}/x."),
], ids=["arguments", "indexed", "positional-missing-stays", "skill-dir"])
def test_command_substitutes_placeholders_where_dialects_are_on(
        tmp_path: Path, body: str, args: list[str], message: str) -> None:
    world, directory = _command_world(tmp_path, body)
    result = world.run("command", "fix", *args, config=DIALECTS)
    assert result.exit_code == 0, result.output
    expected = message.format(dir=directory)
    assert result.output == f"{expected}\n\n---\n\nSkill: {directory / 'SKILL.md'}\n"
    # The seed's message, where dialects are off: the body as written, the arguments after it.
    seed = world.run("command", "fix", *args)
    assert seed.output.startswith(f"{body}\n\n---\n\nSkill: ")
    assert seed.output.endswith(f"\nUser: {' '.join(args)}\n" if args else "SKILL.md\n")


def test_a_body_without_placeholders_keeps_the_seed_user_line(tmp_path: Path) -> None:
    world, directory = _command_world(tmp_path, "Fix it.")
    result = world.run("command", "fix", "now", "please", config=DIALECTS)
    assert result.output == (f"Fix it.\n\n---\n\nSkill: {directory / 'SKILL.md'}\n"
                             "User: now please\n")


def test_a_dollar_figure_past_the_last_word_takes_no_input_and_the_input_is_kept(
        tmp_path: Path) -> None:
    # "$5" names no word of a one-word input: it stays, and the input is appended, not lost.
    world, directory = _command_world(tmp_path, "It costs $5 a month.")
    result = world.run("command", "fix", "now", config=DIALECTS)
    assert result.output == (f"It costs $5 a month.\n\n---\n\nSkill: {directory / 'SKILL.md'}\n"
                             "User: now\n")


def test_arguments_as_one_text_are_split_as_a_shell_splits_them(tmp_path: Path) -> None:
    world, _ = _command_world(tmp_path, "A=$0 B=$1 file=$file", "arguments: [f, file]")
    with world.opened(Settings(dialects=True), env=world.env) as index:
        message = index.skill_command("fix", 'one "two words"').message
    assert message.startswith("A=one B=two words file=two words\n")


def test_user_invocable_false_refuses_the_command(tmp_path: Path) -> None:
    world, _ = _command_world(tmp_path, "Background knowledge.", "user-invocable: false")
    result = world.run("command", "fix", config=DIALECTS)
    assert result.exit_code == 4
    assert result.output.strip().splitlines() == [
        "skillindex: error: skill fix is not a command: its frontmatter says "
        "user-invocable: false (the model may still load it)"]
    with world.opened(Settings(dialects=True)) as index, pytest.raises(NotUserInvocableError):
        index.skill_command("fix")
    with world.opened(Settings(dialects=True)) as index:
        assert index.read("skill://fix", reason="t").text == "Background knowledge."
        assert [e.outcome for e in index.audit()][-2:] == ["refused", "ok"]
    # The seed runs it as any other command.
    assert world.run("command", "fix").exit_code == 0


# -- Load-time commands -----------------------------------------------------------------------

@pytest.mark.parametrize(("body", "lines"), [
    ("Status:\n!`git status --short`\n", [2]),
    ("# Diff\n\n```!\ngit diff\n```\n", [3]),
    ("Inline `code` and a ! mark, and ``` fences:\n```sh\nls\n```\n", []),
], ids=["inline", "fenced", "none"])
def test_load_time_commands_are_a_risk_finding(tmp_path: Path, body: str,
                                               lines: list[int]) -> None:
    world = make_world(tmp_path)
    write_skill(world.repo / ".claude" / "skills", "ctx", body=body)
    world.run("reindex")
    result = world.run("--json", "risks", "--code", "load-time-exec")
    found = json.loads(result.output)
    # The frontmatter takes the first four lines of SKILL.md.
    assert [item["line"] for item in found] == [4 + line for line in lines]
    assert all(item["path"] == "SKILL.md" for item in found)


def test_load_time_commands_in_other_files_are_not_run_by_a_host(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    skill = write_skill(world.repo / ".claude" / "skills", "ctx")
    (skill.parent / "notes.md").write_text("!`date`\n", encoding="utf-8")
    world.run("reindex")
    assert json.loads(world.run("--json", "risks").output) == []


# -- Codex's agents/openai.yaml ---------------------------------------------------------------

def _codex_skill(world: World, sidecar: str) -> Path:
    skill = write_skill(world.repo / ".claude" / "skills", "deploy").parent
    (skill / "agents").mkdir()
    (skill / "agents" / "openai.yaml").write_text(sidecar, encoding="utf-8")
    return skill


def test_the_codex_sidecar_is_a_file_of_the_skill(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    _codex_skill(world, "policy:\n  allow_implicit_invocation: false\n")
    world.run("reindex")
    result = world.run("read", "skill://deploy/agents/openai.yaml")
    assert result.exit_code == 0
    assert result.output == "policy:\n  allow_implicit_invocation: false\n"
    assert json.loads(world.run("--json", "list").output)[0]["findings"] == []


@pytest.mark.parametrize("sidecar", ["policy: [unclosed\n", "- a list\n",
                                     "policy:\n  allow_implicit_invocation: maybe\n"],
                         ids=["broken-yaml", "not-a-mapping", "not-a-flag"])
def test_an_unusable_codex_sidecar_is_a_warning(tmp_path: Path, sidecar: str) -> None:
    world = make_world(tmp_path)
    _codex_skill(world, sidecar)
    world.run("reindex")
    (listed,) = json.loads(world.run("--json", "list").output)
    assert listed["status"] == "accepted"
    assert [(f["code"], f["severity"]) for f in listed["findings"]] == [
        ("sidecar-invalid", "warning")]


def test_a_changed_sidecar_is_judged_again_with_its_skill(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    skill = _codex_skill(world, "policy: [unclosed\n")
    world.run("reindex")
    (skill / "agents" / "openai.yaml").write_text("policy: {}\n", encoding="utf-8")
    world.run("reindex")
    assert json.loads(world.run("--json", "list").output)[0]["findings"] == []
    # SKILL.md changes, the sidecar does not: its warning stays.
    (skill / "agents" / "openai.yaml").write_text("policy: [\n", encoding="utf-8")
    world.run("reindex")
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Ships.\n---\nBody\n",
                                    encoding="utf-8")
    world.run("reindex")
    codes = [f["code"] for f in json.loads(world.run("--json", "list").output)[0]["findings"]]
    assert codes == ["sidecar-invalid"]


# -- Other hosts' folders ---------------------------------------------------------------------

HOST_ROOTS = {
    "enable_gemini": ("gemini", ["{cwd}/.gemini/skills", "{home}/.gemini/skills"]),
    "enable_copilot": ("copilot", ["{repo}/.github/skills", "{home}/.copilot/skills"]),
    "enable_cursor": ("cursor", ["{cwd}/.cursor/skills", "{home}/.cursor/skills"]),
    "enable_opencode": ("opencode", ["{cwd}/.opencode/skills", "{cwd_up}/.opencode/skills",
                                     "{repo}/.opencode/skills",
                                     "{home}/.config/opencode/skills"]),
}


@pytest.mark.parametrize("toggle", sorted(HOST_ROOTS))
def test_host_presets_add_their_folders_only_when_switched_on(tmp_path: Path,
                                                              toggle: str) -> None:
    world = make_world(tmp_path)
    seed = plan_roots(Settings(), world.env).roots
    provider, paths = HOST_ROOTS[toggle]
    planned = plan_roots(parse_settings({"skills": {toggle: True}}), world.env).roots
    assert planned[:len(seed)] == seed
    added = planned[len(seed):]
    names = {"cwd": world.cwd, "cwd_up": world.cwd.parent, "repo": world.repo,
             "home": world.home}
    assert [str(root.path) for root in added] == [p.format(**names) for p in paths]
    assert {(root.provider, root.precedence, root.disabled_by) for root in added} == {
        (provider, 60, None)}
    assert [root.scope.value for root in added][-1] == "user"


def test_the_same_skill_in_several_hosts_folders_is_one_winner(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    skill = write_skill(world.home / "skills", "pdf").parent
    for folder in (".claude/skills", ".gemini/skills", ".github/skills"):
        symlink(skill, world.repo / folder / "pdf")
    write_skill(world.home / ".copilot" / "skills", "lint")
    config = "[skills]\nenable_gemini = true\nenable_copilot = true\n"
    world.run("reindex", config=config)
    listed = json.loads(world.run("--json", "list", config=config).output)
    assert [(item["name"], item["provider"]) for item in listed] == [
        ("pdf", "claude"), ("lint", "copilot")]
    # Without the presets, the seed's roots alone.
    world.run("reindex")
    assert [item["name"] for item in json.loads(world.run("--json", "list").output)] == ["pdf"]


def test_host_presets_are_settings_of_their_own(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    result = world.run("roots", config="[skills]\nenable_gemini = 1\n")
    assert result.exit_code == 2
    assert "skills.enable_gemini must be true or false" in result.output


# -- The catalog ------------------------------------------------------------------------------

def _catalog(world: World, *args: str, config: str = "") -> dict[str, object]:
    result = world.run("--json", "catalog", *args, config=config)
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


def _entries(data: dict[str, object]) -> list[dict[str, object]]:
    entries = data["entries"]
    assert isinstance(entries, list)
    return entries


def test_when_to_use_joins_the_description_where_dialects_are_on(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    skills = world.repo / ".claude" / "skills"
    write_skill(skills, "pdf", description="Fills PDF forms.",
                extra="when_to_use: |\n  When a PDF\n  is attached <or> linked.")
    write_skill(skills, "lint")
    world.run("reindex")
    seed = world.run("catalog").output
    assert "<description>Fills PDF forms.</description>" in seed
    text = world.run("catalog", config=DIALECTS).output
    assert ("<description>Fills PDF forms. When a PDF is attached &lt;or&gt; linked."
            "</description>") in text
    assert "<description>Does a thing.</description>" in text
    markdown = _catalog(world, "--format", "markdown", config=DIALECTS)
    assert "Fills PDF forms. When a PDF is attached &lt;or&gt; linked." in str(markdown["text"])
    with world.opened(Settings(dialects=True)) as index:
        entry = index.catalog(format="json").entries[1]
    assert entry.name == "pdf"
    assert entry.description == "Fills PDF forms. When a PDF is attached <or> linked."


def test_the_per_skill_cap_counts_the_rendered_text(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    write_skill(world.repo / ".claude" / "skills", "amp", description="a & b " * 20,
                extra="when_to_use: " + "c & d " * 20)
    world.run("reindex")
    config = DIALECTS + "catalog_entry_chars = 40\n"
    (entry,) = _entries(_catalog(world, config=config))
    description = str(entry["description"])
    assert entry["truncated"] is True and description.endswith("…")
    rendered = description.replace("&", "&amp;")
    assert len(rendered) <= 40 < len(rendered) + len("&amp;")
    (seed,) = _entries(_catalog(world))
    assert seed["truncated"] is False and "c & d" not in str(seed["description"])


def test_conditional_skills_are_kept_only_for_the_files_in_play(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    skills = world.repo / ".claude" / "skills"
    write_skill(skills, "py", extra="paths: 'src/**/*.py'")
    write_skill(skills, "docs", extra="globs: ['*.md', 'docs/**']")
    write_skill(skills, "always")
    world.run("reindex")
    listed = _entries(_catalog(world))
    assert [(e["name"], e.get("conditional")) for e in listed] == [
        ("always", None), ("docs", ["*.md", "docs/**"]), ("py", ["src/**/*.py"])]
    # Files relative to the working directory (repo/src/app) or absolute.
    data = _catalog(world, "--files", "main.py")
    assert [e["name"] for e in _entries(data)] == ["always", "py"]
    assert data["omitted"] == [{"name": "docs", "reason": "conditional: its paths match none "
                                "of the files in play (*.md, docs/**)"}]
    data = _catalog(world, "--files", str(world.repo / "src" / "tool.py"))
    assert [e["name"] for e in _entries(data)] == ["always", "py"]
    data = _catalog(world, "--files", str(world.home / "notes" / "todo.txt"))
    assert [e["name"] for e in _entries(data)] == ["always"]
    several = _catalog(world, "--files", "y.txt", "--files", "x.md")
    assert [e["name"] for e in _entries(several)] == ["always", "docs"]
    with world.opened() as index:
        assert [e.name for e in index.catalog(files=["a/b/notes.md"]).entries] == [
            "always", "docs"]


def test_always_apply_pins_and_codex_policy_keeps_a_skill_out(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    skills = world.repo / ".claude" / "skills"
    write_skill(skills, "first")
    write_skill(skills, "rules", extra="alwaysApply: true")
    _codex_skill(world, "policy:\n  allow_implicit_invocation: false\n")
    world.run("reindex")
    assert [e["name"] for e in _entries(_catalog(world))] == ["deploy", "first", "rules"]
    data = _catalog(world, config=DIALECTS)
    assert [e["name"] for e in _entries(data)] == ["rules", "first"]
    assert data["omitted"] == [{"name": "deploy", "reason": "manual-only: its agents/openai.yaml"
                                " says allow_implicit_invocation: false"}]
    # Manual-only still loads by name.
    assert world.run("command", "deploy", config=DIALECTS).exit_code == 0


# -- MCP --------------------------------------------------------------------------------------

def test_mcp_list_skills_shows_hints_and_takes_the_files_in_play(tmp_path: Path) -> None:
    anyio = pytest.importorskip("anyio")
    mcp_client = pytest.importorskip("mcp")
    from skillindex.serve.mcp import create_server

    world = make_world(tmp_path)
    skills = world.repo / ".claude" / "skills"
    write_skill(skills, "fix", extra="argument-hint: '[issue]'")
    write_skill(skills, "py", extra="paths: ['src/**/*.py']")
    seen: dict[str, list[dict[str, object]]] = {}

    async def main(index: object) -> None:
        async with mcp_client.Client(create_server(index)) as client:  # type: ignore[arg-type]
            for label, arguments in (("all", {}), ("md", {"files": ["README.md"]}),
                                     ("py", {"files": ["src/a/b.py"]})):
                result = await client.call_tool("list_skills", arguments)
                seen[label] = json.loads(result.content[0].text)

    with world.opened() as index:
        anyio.run(main, index)
    assert [(s["name"], s.get("argument_hint"), s.get("conditional")) for s in seen["all"]] == [
        ("fix", "[issue]", None), ("py", None, ["src/**/*.py"])]
    assert [s["name"] for s in seen["md"]] == ["fix"]
    assert [s["name"] for s in seen["py"]] == ["fix", "py"]



def test_mcp_search_skills_takes_the_files_in_play(tmp_path: Path) -> None:
    anyio = pytest.importorskip("anyio")
    mcp_client = pytest.importorskip("mcp")
    from skillindex.serve.mcp import create_server

    world = make_world(tmp_path)
    skills = world.repo / ".claude" / "skills"
    write_skill(skills, "lint-any",
                description="Check the code of a project for lint in any language, python too.")
    write_skill(skills, "lint-py", description="Lint python code.",
                extra="paths: ['src/**/*.py']")
    seen: dict[str, list[str]] = {}

    async def main(index: object) -> None:
        async with mcp_client.Client(create_server(index)) as client:  # type: ignore[arg-type]
            for label, arguments in (("all", {}), ("md", {"files": ["README.md"]}),
                                     ("py", {"files": ["src/a/b.py"]})):
                result = await client.call_tool(
                    "search_skills", {"query": "lint python code", "limit": 1, **arguments})
                seen[label] = [hit["name"] for hit in result.structured_content["result"]]

    with world.opened() as index:
        anyio.run(main, index)
    best = seen["all"]
    assert best == seen["py"] == ["lint-py"]
    # With only a README in play the conditional skill is left out, and the limit is still met.
    assert seen["md"] == ["lint-any"]


# -- `list` -----------------------------------------------------------------------------------

def test_list_shows_the_argument_hint_where_a_skill_declares_one(
        tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # SQLite's text table comes from the sqlite3 fast path, PostgreSQL's from the library.
    root = tmp_path / "skills"
    write_skill(root, "fix", extra="argument-hint: '[issue-number]'")
    write_skill(root, "plain")
    isolate_cli(tmp_path, monkeypatch, root)
    monkeypatch.setenv("SKILLINDEX_DB", db_url)
    runner = CliRunner()
    assert runner.invoke(cli, ["reindex"]).exit_code == 0
    table = runner.invoke(cli, ["list"]).output.splitlines()
    assert table[0].split() == ["NAME", "ARGS", "SCOPE", "PROVIDER", "PREC", "WARNINGS", "PATH"]
    assert [line.split()[:2] for line in table[1:]] == [["fix", "[issue-number]"],
                                                          ["plain", "-"]]
    listed = json.loads(runner.invoke(cli, ["--json", "list"]).output)
    assert [entry.get("argument_hint") for entry in listed] == ["[issue-number]", None]


def test_list_has_no_args_column_where_no_skill_declares_a_hint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "skills"
    write_skill(root, "plain")
    isolate_cli(tmp_path, monkeypatch, root)
    runner = CliRunner()
    assert runner.invoke(cli, ["reindex"]).exit_code == 0
    assert runner.invoke(cli, ["list"]).output.split()[:2] == ["NAME", "SCOPE"]


def _applied_one_by_one(arranged: Any, hosts: Any, *, files: Any, dialects: bool) -> Any:
    """The rule `query.dialect.apply` follows, winner by winner, without its shortcut for the
    common case (no winner's fields change the order): what the shortcut must agree with."""
    from skillindex.query.dialect import Applied
    from skillindex.query.modes import Arranged, Mode

    pinned: list[Any] = []
    rest: list[Any] = []
    manual = list(arranged.manual)
    gated: list[tuple[str, str]] = []
    conditional: dict[int, tuple[str, ...]] = {}
    for shown in arranged.listed:
        host = hosts.get(shown.candidate_id)
        if host is None:
            (pinned if shown.mode is Mode.PINNED else rest).append(shown)
        elif files is not None and not dialect.in_play(host, files):
            gated.append((shown.name, "conditional: its paths match none of the files in "
                          f"play ({', '.join(host.paths)})"))
        elif dialects and not host.implicit:
            manual.append((shown.name, "manual-only: its agents/openai.yaml says "
                           "allow_implicit_invocation: false"))
        else:
            if host.conditional:
                conditional[shown.candidate_id] = host.paths
            if dialects and host.always_apply and shown.mode is not Mode.PINNED:
                pinned.append(shown._replace(mode=Mode.PINNED))
            else:
                (pinned if shown.mode is Mode.PINNED else rest).append(shown)
    return Applied(Arranged(tuple(pinned + rest), tuple(manual), arranged.ranked_by),
                   tuple(gated), conditional)


_HOSTS = st.builds(dialect.HostFields, paths=st.sampled_from([(), ("*.py",), ("docs/**",)]),
                   always_apply=st.booleans(), implicit=st.booleans(),
                   when_to_use=st.sampled_from([None, "when asked"]))


@settings(max_examples=300, deadline=None)
@given(modes=st.lists(st.booleans(), max_size=12), fielded=st.dictionaries(
    st.integers(0, 11), _HOSTS, max_size=4), files=st.sampled_from(
    [None, (), ("a.py",), ("docs/x.md", "b.txt")]), dialects=st.booleans())
def test_applying_hosts_fields_agrees_with_the_rule_winner_by_winner(
        modes: list[bool], fielded: dict[int, Any], files: Any, dialects: bool) -> None:
    from skillindex.query import dialect as catalog_dialect
    from skillindex.query.modes import Arranged, Mode, Shown

    # Pinned winners first, as `modes.arrange` gives them.
    listed = tuple(Shown(f"skill-{n}", f"/s/{n}/SKILL.md", n,
                         Mode.PINNED if pinned else Mode.LISTED, True)
                   for n, pinned in enumerate(sorted(modes, reverse=True)))
    arranged = Arranged(listed, (("manual", "manual-only: a pattern"),), "precedence")
    hosts = {cid: host for cid, host in fielded.items() if cid < len(listed)}
    got = catalog_dialect.apply(arranged, hosts, files=files, dialects=dialects)
    want = _applied_one_by_one(arranged, hosts, files=files, dialects=dialects)
    assert (got.arranged, got.gated, dict(got.conditional)) == \
        (want.arranged, want.gated, dict(want.conditional))


def test_explain_says_why_alwaysapply_pins_a_skill(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    skills = world.repo / ".claude" / "skills"
    write_skill(skills, "rules", extra="alwaysApply: true")
    _codex_skill(world, "policy:\n  allow_implicit_invocation: false\n")
    world.run("reindex")
    pinned = json.loads(world.run("--json", "explain", "rules", config=DIALECTS).output)
    plain = json.loads(world.run("--json", "explain", "rules").output)
    manual = json.loads(world.run("--json", "explain", "deploy", config=DIALECTS).output)
    shown = world.run("explain", "rules", config=DIALECTS).output

    assert pinned["catalog_mode"] == {
        "mode": "pinned", "reason": "its frontmatter says alwaysApply: true (dialects = true)"}
    assert "alwaysApply: true" in shown and "pinned" in shown
    assert plain["catalog_mode"]["mode"] == "listed"
    assert "pins it only with dialects = true" in plain["catalog_mode"]["reason"]
    assert manual["catalog_mode"]["mode"] == "manual-only"
