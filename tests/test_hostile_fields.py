"""Hostile frontmatter in a whole reindex, on both backends: findings, never an aborted run."""

from __future__ import annotations

from pathlib import Path

from skillindex.api import SkillIndex
from skillindex.model import Status, Validation
from tests.conftest import OpenIndex, write_skill


def outcome(index: SkillIndex, directory: str) -> tuple[str, list[str]]:
    for candidate in index.candidates():
        if candidate.directory.name == directory:
            return str(candidate.status), [f.code for f in candidate.findings]
    raise AssertionError(f"{directory} was not indexed")


def test_frontmatter_nested_to_the_parsers_limit_is_a_finding(tmp_path: Path,
                                                              open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good")
    write_skill(root, "deep", "name: deep\ndescription: d\nmetadata: " + "[" * 990 + "]" * 990
                + "\n")
    index = open_index(root, validation=Validation.LENIENT)
    report = index.reindex()
    assert report.seen == 2
    assert outcome(index, "good") == (Status.ACCEPTED, [])
    assert outcome(index, "deep") == (Status.REJECTED, ["yaml-invalid"])
