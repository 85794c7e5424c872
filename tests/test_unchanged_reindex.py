"""A reindex that finds nothing new, recorded through sqlite3 (oneshot.reindex): the same run and
index as the full path leaves, and the full path whenever there is anything else to write."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from skillindex import SkillIndex
from skillindex.cli import cli
from skillindex.index import recheck
from skillindex.model import IndexReport
from skillindex.query import oneshot
from skillindex.store import fastpath
from tests.conftest import isolate_home, two_roots, write_skill
from tests.test_lock import ME, held_in_a_thread

# What differs between two runs that found the same: when they ran and how long they took.
RUN_TIMES = ("id", "started_at", "finished_at", "duration_s")


@dataclass
class Tree:
    high: Path
    low: Path
    config: Path
    db: str
    cwd: Path

    def argv(self, db: str | None = None) -> list[str]:
        return ["--config", str(self.config), "--db", db or self.db, "--cwd", str(self.cwd)]

    def quick(self, db: str | None = None, *, all_roots: bool = False,
              jobs: int = 1) -> IndexReport | None:
        return oneshot.reindex(str(self.config), db=db or self.db, cwd=self.cwd, index=None,
                               all_roots=all_roots, jobs=jobs)

    def full(self, db: str | None = None) -> SkillIndex:
        return SkillIndex.open(str(self.config), db=db or self.db, cwd=self.cwd)

    def copy(self) -> str:
        copied = str(self.cwd / "copy.sqlite")
        with sqlite3.connect(self.db) as source, sqlite3.connect(copied) as target:
            source.backup(target)
        return copied


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tree]:
    """Two roots (one name in both, a rejected skill, a skill with resources) indexed once."""
    high, low = tmp_path / "high", tmp_path / "low"
    alpha = write_skill(high, "alpha")
    (alpha / "references").mkdir()
    (alpha / "references" / "guide.md").write_text("guide\n")
    write_skill(high, "group/nested")
    write_skill(low, "alpha", body="# The shadowed one\n")
    write_skill(low, "beta")
    write_skill(low, "broken", frontmatter="name: [unclosed\n")
    config = two_roots(tmp_path / "config.toml", high, low, high_options="max_depth = 2\n")
    isolate_home(tmp_path, monkeypatch)
    found = Tree(high, low, config, str(tmp_path / "index.sqlite"), tmp_path)
    with found.full() as index:
        index.reindex()
    yield found


def dump(db: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, sorted; of the runs, what does not depend on when they ran."""
    with sqlite3.connect(db) as connection:
        connection.row_factory = sqlite3.Row
        tables = [name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE '%fts%' AND name != 'reindex_lock'")]
        found = {}
        for table in tables:
            rows = [dict(row) for row in connection.execute(f"SELECT * FROM {table}")]
            if table == "index_run":
                rows = [{k: v for k, v in row.items() if k not in RUN_TIMES} for row in rows]
            found[table] = sorted(tuple(sorted(row.items())) for row in rows)
    return found


def runs(db: str) -> int:
    with sqlite3.connect(db) as connection:
        (count,) = connection.execute("SELECT COUNT(*) FROM index_run").fetchone()
    return int(count)


def report_fields(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in ("run_id", "duration_s")}


def test_an_unchanged_tree_is_recorded_as_the_full_path_records_it(tree: Tree) -> None:
    other = tree.copy()
    quick = CliRunner().invoke(cli, [*tree.argv(), "--json", "reindex"], catch_exceptions=False)
    assert quick.exit_code == 0, quick.output
    with tree.full(other) as index:
        full = index.reindex()
    assert report_fields(json.loads(quick.stdout)) == report_fields(full.as_dict())
    assert full.unchanged == 5 and full.rejected == 1
    assert dump(tree.db) == dump(other)
    # And it was the sqlite3 path that wrote it: it answers for the tree as it is.
    before = runs(tree.db)
    report = tree.quick()
    assert report is not None and report.run_id > json.loads(quick.stdout)["run_id"]
    assert runs(tree.db) == before + 1


def _non_utf8_folder(tree: Tree) -> None:
    os.mkdir(os.fsencode(tree.low) + b"/bad-\xff")


def _rename_root(tree: Tree) -> None:
    moved = tree.low.with_name("moved")
    shutil.copytree(tree.low, moved)
    tree.config.write_text(tree.config.read_text().replace(f'"{tree.low}"', f'"{moved}"'))


def _hidden_folder(tree: Tree) -> None:
    (tree.high / "alpha" / ".tools").mkdir()
    (tree.high / "alpha" / ".tools" / "setup.sh").write_text("echo set up\n")


CHANGES: dict[str, Callable[[Tree], object]] = {
    "edited": lambda t: write_skill(t.low, "beta", description="Does another thing."),
    "touched": lambda t: os.utime(t.high / "alpha" / "references" / "guide.md", (1, 1)),
    "added": lambda t: write_skill(t.high, "gamma"),
    "added-resource": lambda t: (t.low / "beta" / "notes.md").write_text("notes\n"),
    "added-hidden-file": lambda t: (t.low / "beta" / ".env").write_text("MODE=1\n"),
    "added-hidden-folder": _hidden_folder,
    "removed": lambda t: shutil.rmtree(t.low / "beta"),
    "removed-root": lambda t: shutil.rmtree(t.high),
    "root-precedence": lambda t: t.config.write_text(
        t.config.read_text().replace("precedence = 10", "precedence = 30")),
    "root-validation": lambda t: t.config.write_text(
        t.config.read_text().replace("precedence = 10\n", 'precedence = 10\nvalidation = '
                                     '"strict"\n')),
    "new-root": _rename_root,
    "scan-problem": _non_utf8_folder,
    "collision-policy": lambda t: t.config.write_text(
        t.config.read_text().replace("presets = false", 'presets = false\n'
                                     'collision_policy = "qualify"')),
    "ignored-skill": lambda t: t.config.write_text(
        t.config.read_text().replace("presets = false", 'presets = false\n'
                                     'ignored_skills = ["beta"]')),
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_anything_more_to_write_takes_the_full_path(tree: Tree,
                                                   change: Callable[[Tree], object]) -> None:
    change(tree)
    other = tree.copy()
    before = runs(tree.db)
    assert tree.quick() is None
    assert runs(tree.db) == before  # nothing written
    done = CliRunner().invoke(cli, [*tree.argv(), "--json", "reindex"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    with tree.full(other) as index:
        full = index.reindex()
        index.winners()  # the resolution a query stores, where the reindex did not
    with tree.full() as index:
        index.winners()
    assert report_fields(json.loads(done.stdout)) == report_fields(full.as_dict())
    assert dump(tree.db) == dump(other)
    # Written by the full path, the change leaves an index the quick path then finds as is.
    assert tree.quick() is not None


def test_a_problem_found_again_is_reported_and_the_run_recorded(tree: Tree) -> None:
    _non_utf8_folder(tree)
    with tree.full() as index:
        full = index.reindex()
    assert [p.code for p in full.problems] == ["name-not-utf8"]
    quick = tree.quick()
    assert quick is not None
    assert quick.problems == full.problems
    shown = CliRunner().invoke(cli, [*tree.argv(), "reindex", "--quiet"])
    assert shown.exit_code == 0 and shown.stdout == ""
    assert "not UTF-8" in shown.stderr and "[name-not-utf8]" in shown.stderr


def test_a_reindex_in_progress_is_waited_for_not_overtaken(tree: Tree) -> None:
    with held_in_a_thread(f"sqlite:///{tree.db}"):
        assert tree.quick() is None
        busy = CliRunner().invoke(cli, [*tree.argv(), "reindex", "--no-wait"])
    assert busy.exit_code == 1
    assert f"is being reindexed by {ME}" in busy.stderr


def test_a_write_committed_during_the_walk_fails_the_record(tree: Tree) -> None:
    with tree.full() as index:
        last = index.reindex()
        planned = index.plan.roots
    row = {"index_name": "default", "started_at": "2026-01-01 00:00:00.000000",
           "finished_at": "2026-01-01 00:00:01.000000", "cwd": str(tree.cwd), "all_roots": 0,
           "roots": 2, "duration_s": 1.0, **dict.fromkeys(
               ("seen", "added", "changed", "unchanged", "removed", "rejected", "files_read"), 0)}

    def anchored(stored: fastpath.StoredRoots) -> dict[str, object]:
        return {**row, "audit_head": stored.anchor[0], "audit_events": stored.anchor[1]}

    def meanwhile(stored: fastpath.StoredRoots) -> dict[str, object] | None:
        assert stored.roots == tuple(planned) and len(stored.known[str(tree.low)]) == 3
        with sqlite3.connect(tree.db) as other:
            other.execute("UPDATE root SET present = 1 - present")
        return anchored(stored)

    before = runs(tree.db)
    with fastpath.opened(tree.db) as connection:
        assert connection is not None
        assert fastpath.record_unchanged(connection, "default", planned, all_roots=False,
                                         key_of=None, check=meanwhile) is None
        assert runs(tree.db) == before
        recorded = fastpath.record_unchanged(connection, "default", planned, all_roots=False,
                                             key_of=None, check=anchored)
    assert recorded is not None and recorded > last.run_id
    assert runs(tree.db) == before + 1


def test_a_change_inside_a_git_folder_stays_on_the_fast_path(tree: Tree) -> None:
    (tree.low / "beta" / ".git").mkdir()
    (tree.low / "beta" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    report = tree.quick()
    assert report is not None and report.unchanged == 5


def test_an_index_never_built_or_not_sqlite_takes_the_full_path(tree: Tree) -> None:
    assert tree.quick(str(tree.cwd / "absent.sqlite")) is None
    assert not (tree.cwd / "absent.sqlite").exists()
    assert oneshot.reindex(str(tree.config), db="sqlite://", cwd=tree.cwd, index=None) is None


def test_all_roots_walks_every_root_the_index_knows(tree: Tree) -> None:
    elsewhere = tree.cwd / "elsewhere"
    write_skill(elsewhere, "delta")
    wider = tree.cwd / "wider.toml"
    wider.write_text(tree.config.read_text() + f'\n[[roots]]\npath = "{elsewhere}"\n')
    with SkillIndex.open(str(wider), db=tree.db, cwd=tree.cwd) as index:
        index.reindex()
    other = tree.copy()
    quick = CliRunner().invoke(cli, [*tree.argv(), "--json", "reindex", "--all"],
                               catch_exceptions=False)
    assert quick.exit_code == 0, quick.output
    with tree.full(other) as index:
        full = index.reindex(all_roots=True)
    assert full.roots == 3 and full.unchanged == 6
    assert report_fields(json.loads(quick.stdout)) == report_fields(full.as_dict())
    assert dump(tree.db) == dump(other)
    assert tree.quick(all_roots=True) is not None
    # A change under the root this directory does not use: only --all walks it.
    write_skill(elsewhere, "delta", description="Changed.")
    assert tree.quick(all_roots=True) is None
    assert tree.quick() is not None


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux",
                    reason="the walk is shared with forked processes on Linux only")
@pytest.mark.parametrize("jobs", [2, 3])
@pytest.mark.parametrize("change", [None, *CHANGES.values()], ids=["none", *CHANGES.keys()])
def test_a_walk_shared_between_processes_finds_what_one_process_finds(
        tree: Tree, monkeypatch: pytest.MonkeyPatch, jobs: int,
        change: Callable[[Tree], object] | None) -> None:
    # Every stored skill lies in some process's share (entries are dealt out in turn), so each
    # kind of difference is found by a forked process for some of the skills it concerns.
    monkeypatch.setattr(recheck, "SHARED_FROM", 1)
    if change is not None:
        change(tree)
    alone = tree.quick(tree.copy(), jobs=1)
    before = _children()
    drawn: list[tuple[int, int | None]] = []
    shared = oneshot.reindex(str(tree.config), db=tree.db, cwd=tree.cwd, index=None, jobs=jobs,
                             progress=lambda done, expected, root: drawn.append((done, expected)))
    if change is None:
        assert alone is not None and shared is not None
        assert report_fields(shared.as_dict()) == report_fields(alone.as_dict())
        assert drawn and all(done <= (expected or 0) for done, expected in drawn)
    else:
        assert alone is None and shared is None
    assert _children() == before  # every forked walker was reaped


def _children() -> set[str]:
    """This process's children, running or not yet reaped."""
    return {pid for task in Path("/proc/self/task").iterdir()
            for pid in (task / "children").read_text().split()}


def _names_in_both_roots(tree: Tree) -> None:
    """Names under both roots, each one place further along in the low root's listing than in
    the high one's, so that for any number of processes some name is dealt to a forked
    process under one root and left to the first process under the other."""
    for number in range(1, 6):
        write_skill(tree.high, f"shared-{number}")
        write_skill(tree.low, f"shared-{number}", body="# The shadowed copy\n")
    with tree.full() as index:
        index.reindex()


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux",
                    reason="the walk is shared with forked processes on Linux only")
@pytest.mark.parametrize("jobs", [2, 3, 4])
def test_names_in_two_roots_dealt_to_different_processes_stay_on_the_fast_path(
        tree: Tree, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    monkeypatch.setattr(recheck, "SHARED_FROM", 1)
    _names_in_both_roots(tree)
    alone = tree.quick(tree.copy(), jobs=1)
    shared = tree.quick(jobs=jobs)
    assert alone is not None and shared is not None
    assert report_fields(shared.as_dict()) == report_fields(alone.as_dict())
    # And a change to such a name is still found, whichever process walks it.
    write_skill(tree.low, "shared-3", description="Edited under the low root.")
    assert tree.quick(jobs=jobs) is None


# A whole `skillindex` process with the walk shared from the first skill on, reporting whether
# it loaded SQLAlchemy (the full path) besides its exit code.
SHARED_PROCESS = """
import sys
from skillindex.index import recheck
from skillindex.cli import main
recheck.SHARED_FROM = 1
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(code, "sqlalchemy" in sys.modules, file=sys.stderr)
"""


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux",
                    reason="the walk is shared with forked processes on Linux only")
@pytest.mark.parametrize("jobs", [1, 2, 3, 4])
def test_reindex_of_names_in_two_roots_takes_the_fast_path_at_every_jobs(
        tree: Tree, jobs: int) -> None:
    _names_in_both_roots(tree)
    before = runs(tree.db)
    done = subprocess.run([sys.executable, "-c", SHARED_PROCESS, *tree.argv(), "--json",
                           "reindex", "--jobs", str(jobs)],
                          capture_output=True, text=True, check=False)
    assert done.stderr.strip().splitlines()[-1] == "0 False", done.stderr
    assert json.loads(done.stdout)["unchanged"] == 15
    assert runs(tree.db) == before + 1


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux",
                    reason="the walk is shared with forked processes on Linux only")
def test_a_difference_in_a_forked_share_stops_the_walk(tree: Tree,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # "beta" is the second entry of the low root: the second of two processes walks it.
    monkeypatch.setattr(recheck, "SHARED_FROM", 1)
    write_skill(tree.low, "beta", description="Edited where the other process walks.")
    before = _children()
    assert tree.quick(jobs=2) is None
    assert _children() == before


def test_without_a_process_to_spare_one_process_walks_everything(
        tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    # fork fails as it does at the process limit (EAGAIN): the walk is not cut short.
    def refused() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(recheck, "SHARED_FROM", 1)
    monkeypatch.setattr(os, "fork", refused)
    alone = tree.quick(tree.copy(), jobs=1)
    shared = tree.quick(jobs=3)
    assert alone is not None and shared is not None
    assert report_fields(shared.as_dict()) == report_fields(alone.as_dict())
    write_skill(tree.low, "broken", description="Edited where a child would have walked.")
    assert tree.quick(jobs=3) is None
