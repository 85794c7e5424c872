"""Targeted reindex: only the skill directories holding changed paths are scanned again."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from skillindex.index.indexer import targets_of
from skillindex.model import RootSpec, Scope
from skillindex.store import queries, resolved
from skillindex.store.models import ResolvedSet
from tests.conftest import OpenIndex, write_skill
from tests.test_incremental import stored_and_fresh


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


def edit_one_remove_another(root: Path) -> None:
    write_skill(root, "skill-04", description="Once more.")
    shutil.rmtree(root / "skill-05")


def test_a_resolution_is_carried_over_only_when_it_cannot_change(
        tmp_path: Path, open_index: OpenIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    # A reindex that only replaces skills without changing what resolution reads of them
    # (name, switch, status, paths) swaps the winners' ids in the stored resolution instead
    # of resolving every skill again; anything else resolves again. Either way the stored
    # resolution must equal one resolved from scratch.
    high, low = tmp_path / "high", tmp_path / "low"
    make_tree(high, 6)
    make_tree(low, 3)  # skill-00..02 declared in both roots: contested names
    index = open_index(high, low)
    index.reindex()
    first, stored, fresh = stored_and_fresh(index)
    assert stored == fresh and any(collision for _, _, collision in stored)

    resolutions = []  # every time a reindex resolves the candidates again (a spy, no stub)
    resolvable = resolved.resolvable

    def counted(*args: Any) -> Any:
        resolutions.append(args)
        return resolvable(*args)

    def edit(change: Callable[[], object], *paths: Path) -> tuple[int, bool]:
        change()
        monkeypatch.setattr(resolved, "resolvable", counted)
        resolutions.clear()
        index.reindex(paths=list(paths) or None)
        monkeypatch.setattr(resolved, "resolvable", resolvable)
        after, stored, fresh = stored_and_fresh(index)
        assert stored == fresh
        return after, not resolutions

    carried = [
        # a description (an uncontested name), then a body (a contested one), then all
        edit(lambda: write_skill(high, "skill-04", description="Edited."), high / "skill-04"),
        edit(lambda: write_skill(low, "skill-01", body="# Other\n"), low / "skill-01"),
        edit(lambda: write_skill(high, "skill-05", description="Again."))]
    assert [kept for _, kept in carried] == [True, True, True]
    assert all(set_id == first for set_id, _ in carried)
    assert index.winner("skill-04").candidate.description == "Edited."
    assert "Edited." in index.catalog(max_chars=10**6).text
    # A rename, a rejection, an addition, a removal: the stored resolution is updated in
    # place, judging only the names they touch (never every candidate again).
    updated = [
        edit(lambda: write_skill(high, "skill-03", name="renamed"), high / "skill-03"),
        edit(lambda: write_skill(high, "skill-02", "name: skill-02\n"), high / "skill-02"),
        edit(lambda: (write_skill(high, "fresh"), write_skill(high, "skill-04")),
             high / "fresh", high / "skill-04"),
        edit(lambda: shutil.rmtree(low / "skill-00"), low / "skill-00"),
        edit(lambda: edit_one_remove_another(high), high / "skill-04", high / "skill-05")]
    assert [kept for _, kept in updated] == [True] * 5
    assert all(set_id == first for set_id, _ in updated)
    assert index.winner("skill-02").candidate.root == low  # its copy in high is rejected now
    # A change of more candidates than an update in place takes resolves everything again.
    monkeypatch.setattr(resolved, "CHANGE_MAX", 1)
    _, kept = edit(lambda: (write_skill(high, "one", name="one"), write_skill(high, "two")),
                   high / "one", high / "two")
    assert not kept


def test_an_edit_drops_the_other_resolutions_over_its_root(tmp_path: Path,
                                                          open_index: OpenIndex) -> None:
    shared, other = tmp_path / "shared", tmp_path / "other"
    make_tree(shared, 3)
    make_tree(other, 2)
    index, elsewhere = open_index(shared), open_index(shared, other)
    index.reindex()
    elsewhere.reindex()
    assert len(elsewhere.winners()) == 3 and len(index.winners()) == 3
    write_skill(shared, "skill-01", description="Edited.")
    index.reindex(paths=[shared / "skill-01"])
    with Session(index.engine) as session:
        sets = session.execute(select(func.count()).select_from(ResolvedSet)).scalar_one()
    assert sets == 1  # this directory's, carried over; the other's is resolved when asked
    assert elsewhere.winner("skill-01").candidate.description == "Edited."


def test_a_targeted_reindex_reads_only_the_known_skills_of_its_entries(
        tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    for name in ("a_b", "axb", "a%b", "group/one", "group/two", "groupie"):
        write_skill(root, name)
    index = open_index(root, max_depth=2)
    index.reindex()
    with Session(index.engine) as session:
        known = queries.known_skills(session, index.index_name, [str(root)],
                                     {str(root): frozenset({"a_b", "group"})})
    assert sorted(known[str(root)]) == ["a_b", "group/one", "group/two"]
