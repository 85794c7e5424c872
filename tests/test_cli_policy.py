"""`skillindex list`, `explain` and `context` as a user runs them: output, JSON and exit codes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillindex.cli import cli
from skillindex.errors import EXIT_NOT_FOUND
from tests.skilltrees import World, make_world, symlink, write_skill

CANDIDATE_KEYS = {"name", "path", "root", "scope", "provider", "precedence", "status",
                  "findings"}


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def indexed(world: World, config: str = "") -> None:
    result = world.run("reindex", config=config)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", ["list", "explain", "context"])
def test_every_new_command_has_help(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"], catch_exceptions=False)
    assert result.exit_code == 0
    assert len(result.output.split("\n\n")[1].strip()) > 20


def test_list_shows_the_winners_and_warns_about_collisions(world: World) -> None:
    project = write_skill(world.repo / ".claude" / "skills", "pdf")
    user = write_skill(world.home / ".claude" / "skills", "pdf")
    write_skill(world.home / ".agents" / "skills", "docx")
    indexed(world)
    result = world.run("list")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "SCOPE", "PROVIDER", "PREC", "WARNINGS", "PATH"]
    assert [line.split()[0] for line in lines[1:]] == ["pdf", "docx"]
    assert str(project) in lines[1]
    assert str(user) not in result.output
    assert result.stderr == ("note: 1 name declared by more than one skill (pdf); `skillindex "
                             "explain NAME` shows which one is used and why\n")


def test_many_collisions_are_one_line_and_none_with_json(world: World) -> None:
    for name in ("pdf", "docx", "xlsx", "pptx"):
        for where in (world.repo / ".claude", world.home / ".claude", world.home / ".agents"):
            write_skill(where / "skills", name)
    indexed(world)
    result = world.run("list")
    assert result.stderr.splitlines() == [
        "note: 4 names declared by more than one skill (docx, pdf, pptx, …); "
        "`skillindex explain NAME` shows which one is used and why"]
    shown = world.run("--json", "list")
    assert shown.stderr == ""
    assert {entry["collision"]["name"] for entry in json.loads(shown.stdout)} == {
        "pdf", "docx", "xlsx", "pptx"}


def test_warnings_show_in_human_output(world: World) -> None:
    root = world.home / ".claude" / "skills"
    write_skill(root, "pdf", description="Build for AWS: ECS")  # YAML refuses the second colon
    secret = world.tmp / "secret.txt"
    secret.write_text("outside\n")
    (root / "pdf" / "leak.txt").symlink_to(secret)
    indexed(world)
    listed = world.run("list").stdout
    candidates = world.run("candidates").stdout
    for table in (listed, candidates):
        row = next(line for line in table.splitlines() if line.startswith("pdf "))
        assert "symlink-escape" in row and "yaml-repaired" in row
    explained = world.run("explain", "pdf").stdout
    assert "warning symlink-escape: " in explained
    assert "warning yaml-repaired: " in explained


@pytest.mark.parametrize("where", ["before", "after"])
def test_list_json_is_a_list_of_candidate_dicts(world: World, where: str) -> None:
    write_skill(world.home / ".claude" / "skills", "pdf")
    indexed(world)
    args = ["--json", "list"] if where == "before" else ["list", "--json"]
    [entry] = json.loads(world.run(*args).stdout)
    assert set(entry) >= CANDIDATE_KEYS
    assert (entry["name"], entry["declared_name"], entry["scope"], entry["status"],
            entry["collision"]) == ("pdf", "pdf", "user", "accepted", None)


def test_list_with_an_empty_catalog_says_where_to_look(world: World) -> None:
    write_skill(world.home / ".claude" / "skills", "pdf")
    indexed(world)
    result = world.run("list", config="[skills]\nenabled = false\n")
    assert result.exit_code == 0
    assert "no skills in the catalog" in result.stdout
    assert json.loads(world.run("--json", "list", config="[skills]\nenabled = false\n")
                      .stdout) == []


def test_list_json_carries_qualified_names(world: World) -> None:
    write_skill(world.repo / ".claude" / "skills", "pdf")
    write_skill(world.home / ".claude" / "skills", "pdf")
    indexed(world)
    entries = json.loads(world.run("--json", "list",
                                   config='[skills]\ncollision_policy = "qualify"\n').stdout)
    assert [(e["name"], e["declared_name"]) for e in entries] == [
        ("project:pdf", "pdf"), ("user:pdf", "pdf")]


def build(world: World, case: str) -> tuple[str, Path]:
    """A tree where the user-level claude `pdf` ends with the outcome `case`; its config."""
    user = world.home / ".claude" / "skills"
    target = write_skill(user, "pdf", extra="enabled: false" if case == "disabled" else "")
    config = ""
    if case == "shadowed":
        write_skill(world.repo / ".claude" / "skills", "pdf")
    elif case == "filtered":
        config = "[skills]\nenableClaudeUser = false\n"
    elif case == "duplicate":
        real = write_skill(world.repo / ".xcsh" / "skills", "pdf").parent
        target.parent.rename(world.tmp / "unused")
        symlink(real, target.parent)
    elif case == "rejected":
        target.write_text("Just a body, no frontmatter.\n", encoding="utf-8")
    return config, target


@pytest.mark.parametrize(("case", "reason"), [
    ("winner", "the only usable candidate (user claude root, precedence 80)"),
    ("shadowed", "shadowed by {repo}/.claude/skills/pdf/SKILL.md (same precedence 80; "
                 "its root {repo}/.claude/skills is registered before {home}/.claude/skills)"),
    ("filtered", "source switched off (enable_claude_user = false)"),
    ("disabled", "its frontmatter says enabled: false"),
    ("duplicate", "same skill directory as {repo}/.xcsh/skills/pdf/SKILL.md"),
    ("rejected", "invalid: frontmatter-missing"),
])
def test_explain_names_the_outcome_and_the_reason(world: World, case: str,
                                                  reason: str) -> None:
    config, target = build(world, case)
    indexed(world, config)
    result = world.run("explain", "pdf", config=config)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    used = [line for line in lines if line.startswith("pdf: ")]
    row = next(n for n, line in enumerate(lines)
               if line.startswith("  ") and line.endswith(str(target)))
    assert lines[row].split()[:4] == [case, "80", "user", "claude"]
    assert reason.format(repo=world.repo, home=world.home) in lines[row + 1]
    assert len(lines) <= 24  # one screen
    if case == "winner":
        assert used == [f"pdf: in the catalog: {target}"]
    elif case in ("filtered", "disabled", "rejected"):
        assert used == ["pdf: not in the catalog"]

    document = json.loads(world.run("explain", "pdf", "--json", config=config).stdout)
    assert set(document) >= {"name", "winner", "candidates"}
    [mine] = [c for c in document["candidates"] if c["path"] == str(target)]
    assert set(mine) >= CANDIDATE_KEYS
    assert mine["outcome"] == case
    assert reason.format(repo=world.repo, home=world.home) in mine["reason"]
    if case == "winner":
        assert document["winner"]["path"] == str(target)


def test_explain_of_an_ambiguous_tie_shows_no_winner(world: World) -> None:
    agents = write_skill(world.home / ".agents" / "skills", "pdf")
    codex = write_skill(world.home / ".codex" / "skills", "pdf")
    config = '[skills]\ncollision_policy = "reject-ambiguous"\n'
    indexed(world, config)
    document = json.loads(world.run("--json", "explain", "pdf", config=config).stdout)
    assert document["winner"] is None
    assert [(c["path"], c["outcome"]) for c in document["candidates"]] == [
        (str(agents), "rejected"), (str(codex), "rejected")]
    assert document["collision"]["kept"] == []
    text = world.run("explain", "pdf", config=config).stdout
    assert text.startswith("pdf: not in the catalog\n")
    assert "ambiguous" in text


def test_explain_of_an_unknown_name_exits_3(world: World) -> None:
    write_skill(world.home / ".claude" / "skills", "pdf")
    indexed(world)
    result = world.run("explain", "docx")
    assert result.exit_code == EXIT_NOT_FOUND
    assert result.stderr == "skillindex: error: skill not found: docx\n"
    assert result.stdout == ""


def test_context_lists_the_files_with_size_and_hash(world: World) -> None:
    (world.repo / "XCSH.md").write_text("Use tabs.\n", encoding="utf-8")
    (world.cwd / "AGENTS.md").write_text("Be brief.\n", encoding="utf-8")
    result = world.run("context")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["DEPTH", "SIZE", "SHA256", "PATH"]
    assert lines[1].split() == ["2", "10", hashlib.sha256(b"Use tabs.\n").hexdigest()[:16],
                                str(world.repo / "XCSH.md")]
    assert len(lines) == 2

    config = '[skills]\ncontext_files = ["AGENTS.md", "XCSH.md"]\n'
    entries = json.loads(world.run("--json", "context", config=config).stdout)
    assert [(e["path"], e["depth"], e["size"]) for e in entries] == [
        (str(world.cwd / "AGENTS.md"), 0, 10), (str(world.repo / "XCSH.md"), 2, 10)]
    assert entries[0]["sha256"] == hashlib.sha256(b"Be brief.\n").hexdigest()


def test_context_without_files_says_what_it_looked_for(world: World) -> None:
    result = world.run("context")
    assert result.exit_code == 0
    assert result.stdout == "no context files (XCSH.md) in this directory or its ancestors\n"
