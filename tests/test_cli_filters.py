"""Narrowing a large index: summaries by finding code, one code, the first N."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from skillindex.cli import cli
from tests.conftest import OpenIndex, isolate_cli, write_skill


def hostile_tree(root: Path) -> None:
    """Five good skills, three without frontmatter, two with a bad name and one with both."""
    for number in range(5):
        write_skill(root, f"good-{number}")
    for number in range(3):
        (write_skill(root, f"bare-{number}") / "SKILL.md").write_text("no frontmatter\n")
    write_skill(root, "bad-0", "name: Bad_Name\ndescription: x\n")
    write_skill(root, "bad-1", "name: Bad_Name\ndescription: x\n")
    write_skill(root, "both", "name: Bad--x\n")


def test_the_library_filters_in_the_database(tmp_path: Path, open_index: OpenIndex) -> None:
    hostile_tree(tmp_path / "skills")
    index = open_index(tmp_path / "skills")  # strict: the name rules reject
    index.reindex()
    assert index.count() == 11
    assert index.count(rejected=True) == 6
    counts = [(c.code, str(c.severity), c.candidates)
              for c in index.finding_counts(rejected=True)]
    assert counts == [("frontmatter-missing", "error", 3), ("name-dir-mismatch", "error", 3),
                      ("name-invalid", "error", 3), ("description-missing", "error", 1)]
    named = index.rejections(code="name-invalid")
    assert sorted(c.directory.name for c in named) == ["bad-0", "bad-1", "both"]
    assert all(any(f.code == "name-invalid" for f in c.findings) for c in named)
    first = index.candidates(limit=4)
    assert [c.path for c in first] == [c.path for c in index.candidates()][:4]
    assert len(index.rejections(code="name-invalid", limit=2)) == 2
    assert index.candidates(code="no-such-code") == []


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    hostile_tree(tmp_path / "skills")
    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    assert run("reindex").exit_code == 0
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_rejections_summary(setup: Path) -> None:
    result = run("rejections", "--summary")
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[0] == ["SKILLS", "SEVERITY", "CODE"]
    assert rows[1] == ["3", "error", "frontmatter-missing"]
    assert ["1", "error", "description-missing"] in rows
    data = json.loads(run("--json", "rejections", "--summary").stdout)
    assert data["rejected"] == 4
    assert {"code": "frontmatter-missing", "severity": "error", "candidates": 3} in data["codes"]


def test_candidates_summary_counts_warnings_too(setup: Path) -> None:
    data = json.loads(run("candidates", "--summary", "--json").stdout)
    assert data["candidates"] == 11
    assert {"code": "name-dir-mismatch", "severity": "warning", "candidates": 3} in data["codes"]


def test_rejections_of_one_code(setup: Path) -> None:
    shown = json.loads(run("--json", "rejections", "--code", "frontmatter-missing").stdout)
    assert sorted(Path(c["path"]).parent.name for c in shown) == ["bare-0", "bare-1", "bare-2"]
    assert "no skills rejected with nope" in run("rejections", "--code", "nope").stdout


def test_the_first_n(setup: Path) -> None:
    result = run("candidates", "--limit", "3")
    assert len(result.stdout.splitlines()) == 4  # the header and three rows
    assert "raise --limit" in result.stderr
    assert len(json.loads(run("--json", "rejections", "--limit", "2").stdout)) == 2
    assert run("candidates", "--limit", "-1").exit_code == 2
