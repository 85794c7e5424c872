"""Validation as a user meets it: lenient by default, strict on request, and said plainly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from skillindex.cli import cli
from tests.conftest import isolate_cli, write_skill


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A registry-like root: names that differ from their folders, YAML that needs repair."""
    root = tmp_path / "skills"
    for number in range(4):
        write_skill(root, f"folder-{number}", name=f"skill-{number}", description="Does a thing.")
    write_skill(root, "aws", "name: aws\ndescription: Build for AWS: ECS and EKS\n")
    write_skill(root, "long", description="d" * 1068)
    isolate_cli(tmp_path, monkeypatch, root)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def configure(setup: Path, root_mode: str = "", skills_mode: str = "") -> None:
    lines = ["[skills]", "presets = false"]
    if skills_mode:
        lines.append(f'validation = "{skills_mode}"')
    lines += ["", "[[roots]]", f'path = "{setup / "skills"}"', "precedence = 10"]
    if root_mode:
        lines.append(f'validation = "{root_mode}"')
    (setup / "config.toml").write_text("\n".join(lines) + "\n")


def test_an_explicit_root_is_lenient_by_default(setup: Path) -> None:
    report = json.loads(run("--json", "reindex").stdout)
    assert (report["seen"], report["rejected"]) == (6, 0)
    listed = {entry["name"] for entry in json.loads(run("--json", "list").stdout)}
    assert listed == {"skill-0", "skill-1", "skill-2", "skill-3", "aws", "long"}


@pytest.mark.parametrize("where", ["root", "skills"])
def test_strict_mode_is_still_there_and_says_why_most_were_rejected(setup: Path,
                                                                    where: str) -> None:
    configure(setup, **({"root_mode": "strict"} if where == "root" else
                        {"skills_mode": "strict"}))
    result = run("reindex")
    assert result.exit_code == 0, result.output
    assert "6 rejected" in result.stdout
    assert ("most skills were rejected (6 of 6); the top reasons: name-dir-mismatch (4), "
            "description-too-long (1), yaml-invalid (1); `skillindex rejections --summary` "
            "counts them all") in result.stdout


def test_a_few_rejections_do_not_raise_the_alarm(setup: Path) -> None:
    (setup / "skills" / "aws" / "SKILL.md").write_text("no frontmatter\n")
    result = run("reindex")
    assert "1 rejected" in result.stdout
    assert "most skills were rejected" not in result.stdout


def test_switching_the_mode_judges_again_without_calling_it_a_change(setup: Path) -> None:
    assert json.loads(run("--json", "reindex").stdout)["added"] == 6
    configure(setup, root_mode="strict")
    report = json.loads(run("--json", "reindex").stdout)
    assert (report["changed"], report["rejudged"], report["rejected"]) == (0, 6, 6)
    configure(setup)
    (setup / "skills" / "aws" / "SKILL.md").write_text(
        "---\nname: aws\ndescription: Now valid YAML.\n---\n")
    result = run("reindex")
    assert "0 added, 1 changed, 5 judged again (same content), 0 unchanged" in (
        result.stdout)
