"""Targeted reindex: only the skill directories holding changed paths are scanned again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skillindex.index.indexer import targets_of
from skillindex.model import RootSpec, Scope
from tests.conftest import OpenIndex, write_skill


def make_tree(root: Path, count: int) -> None:
    for number in range(count):
        write_skill(root, f"skill-{number:02d}")


def test_an_edited_skill_is_rescanned_alone(tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    make_tree(root, 10)
    index = open_index(root)
    index.reindex()
    write_skill(root, "skill-03", description="Edited.")
    report = index.reindex(paths=[root / "skill-03" / "SKILL.md"])
    assert (report.seen, report.changed, report.added, report.removed) == (1, 1, 0, 0)
    assert index.winner("skill-03").candidate.description == "Edited."
    assert len(index.candidates()) == 10
    assert "Edited." in index.catalog().text


def test_added_and_removed_directories(tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    make_tree(root, 5)
    index = open_index(root)
    index.reindex()
    shutil.rmtree(root / "skill-01")
    write_skill(root, "fresh-one")
    report = index.reindex(paths=[root / "skill-01", root / "fresh-one" / "SKILL.md"])
    assert (report.seen, report.added, report.removed, report.changed) == (1, 1, 1, 0)
    assert sorted(w.name for w in index.winners()) == [
        "fresh-one", "skill-00", "skill-02", "skill-03", "skill-04"]


def test_a_path_under_no_root_changes_nothing(tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    make_tree(root, 3)
    index = open_index(root)
    index.reindex()
    (tmp_path / "elsewhere.txt").write_text("x")
    report = index.reindex(paths=[tmp_path / "elsewhere.txt"])
    assert (report.seen, report.added, report.removed, report.changed) == (0, 0, 0, 0)
    assert len(index.winners()) == 3


def test_the_root_itself_rescans_the_whole_root(tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    make_tree(root, 4)
    index = open_index(root)
    index.reindex()
    write_skill(root, "skill-09")
    report = index.reindex(paths=[root])
    assert (report.seen, report.added, report.unchanged) == (5, 1, 4)


def test_scan_problems_outside_the_target_are_kept(tmp_path: Path,
                                                  open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    make_tree(root, 2)
    loop = root / "group"
    loop.mkdir()
    (loop / "again").symlink_to(root, target_is_directory=True)
    index = open_index(root, max_depth=2)
    index.reindex()
    [state] = index.roots()
    assert [p.code for p in state.problems] == ["symlink-loop"]
    write_skill(root, "skill-00", description="Edited.")
    index.reindex(paths=[root / "skill-00" / "SKILL.md"])
    [state] = index.roots()
    assert [p.code for p in state.problems] == ["symlink-loop"]


ROOTS = [RootSpec(path=Path("/r/a"), scope=Scope.USER, provider="t", precedence=1),
         RootSpec(path=Path("/r/a/nested"), scope=Scope.USER, provider="t", precedence=2),
         RootSpec(path=Path("/s"), scope=Scope.USER, provider="t", precedence=3)]


@pytest.mark.parametrize(("paths", "expected"), [
    (["/r/a/pdf/SKILL.md", "/r/a/pdf/references/x.md", "/r/a/docx"],
     {"/r/a": frozenset({"pdf", "docx"})}),
    (["/r/a/nested/pdf/SKILL.md"], {"/r/a": frozenset({"nested"}),
                                    "/r/a/nested": frozenset({"pdf"})}),
    (["/r"], {"/r/a": None, "/r/a/nested": None}),
    (["/s", "/s/pdf/SKILL.md"], {"/s": None}),
    (["/elsewhere/pdf"], {}),
    (["/r/ab/pdf"], {}),
], ids=["entries", "nested-roots", "above", "whole-wins", "outside", "prefix-is-not-inside"])
def test_targets_of_paths(paths: list[str], expected: dict[str, frozenset[str] | None]) -> None:
    assert targets_of(paths, ROOTS, {"/r/a", "/r/a/nested", "/s"}) == expected


def test_a_root_never_indexed_is_scanned_whole() -> None:
    assert targets_of(["/s/pdf/SKILL.md"], ROOTS, set()) == {"/s": None}
