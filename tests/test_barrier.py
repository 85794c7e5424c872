"""No skill stops a reindex: whatever goes wrong in the work for one skill (read, parse, judge,
risk rules, rows), in this process or a worker, is a finding of that skill; whatever goes
wrong walking a root is a problem of that root. Every other skill is indexed."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest
from click.testing import CliRunner

from skillindex.cli import cli
from skillindex.index import frontmatter, parallel, policy, scanner, skilldir
from skillindex.model import Status, Validation
from tests.conftest import OpenIndex, isolate_cli, write_skill

T = TypeVar("T")
GOOD = "name: good\ndescription: ok\n"
HUGE_DIGITS = "9" * 4_500
# A tag whose value its type cannot take: what PyYAML's constructors raise below yaml.YAMLError
# (KeyError, IndexError, AttributeError, ValueError, OverflowError), and numbers no conversion
# to text survives. In strict mode each is refused with the code; in lenient mode a line YAML
# refuses is read again as text, and the rules judge what it gives.
HOSTILE = {
    "bool-maybe": ("enabled: !!bool maybe\n", "yaml-invalid"),
    "int-empty": ('x: !!int ""\n', "yaml-invalid"),
    "float-underscore": ("x: !!float _\n", "yaml-invalid"),
    "timestamp-nope": ("x: !!timestamp nope\n", "yaml-invalid"),
    "timestamp-year-0": ("x: !!timestamp 0000-01-01\n", "yaml-invalid"),
    "float-overflow": ("x: !!float 1" + ":59" * 400 + ".5\n", "number-too-large"),
    "tagged-key": ("!!bool maybe: x\n", "yaml-invalid"),
    "decimal-key": (f"? {HUGE_DIGITS}\n: 1\n", "number-too-large"),
    "hex-key": (f"? 0x{'f' * 4_500}\n: 1\n", "number-too-large"),
    "hex-value": (f"x: [0x{'f' * 4_500}]\n", "number-too-large"),
    "base-60": ("x: 1" + ":59" * 3_000 + "\n", "number-too-large"),
}


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "good", GOOD)
    write_skill(root, "other", "name: other\ndescription: Another good one.\n")
    return root


@pytest.mark.parametrize("validation", [Validation.STRICT, Validation.LENIENT])
@pytest.mark.parametrize("case", sorted(HOSTILE), ids=str)
def test_a_hostile_value_is_a_finding_of_its_skill(tmp_path: Path, open_index: OpenIndex,
                                                   case: str, validation: Validation) -> None:
    root = _tree(tmp_path)
    hostile, code = HOSTILE[case]
    write_skill(root, "bad", "name: bad\ndescription: ok\n" + hostile)
    index = open_index(root, validation=validation)

    report = index.reindex()

    found = {c.directory.name: c for c in index.candidates()}
    assert report.seen == 3
    assert found["good"].status is found["other"].status is Status.ACCEPTED
    codes = {f.code for f in found["bad"].findings}
    assert "internal-error" not in codes
    if validation is Validation.STRICT or code == "number-too-large":
        assert found["bad"].status is Status.REJECTED
        assert code in codes
    else:  # read again line by line: kept as text, or rejected by the rules
        assert "yaml-repaired" in codes or code in codes


def test_the_reported_example_from_the_command_line(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "r"
    write_skill(root, "good", "name: good\ndescription: ok\n", body="b\n")
    write_skill(root, "bad", "name: bad\ndescription: ok\nenabled: !!bool maybe\n", body="b\n")
    isolate_cli(tmp_path, monkeypatch, root)

    run = CliRunner().invoke(cli, ["reindex"])
    listed = CliRunner().invoke(cli, ["list"])

    assert run.exit_code == 0, run.output
    assert "internal error" not in run.output
    assert "good" in listed.stdout


def test_worker_processes_judge_behind_the_same_barrier(tmp_path: Path,
                                                        open_index: OpenIndex) -> None:
    root = _tree(tmp_path)
    for number in range(parallel.PARALLEL_MIN):
        write_skill(root, f"skill-{number:03d}", f"name: skill-{number:03d}\ndescription: d\n")
    for case, (hostile, _code) in HOSTILE.items():
        write_skill(root, case, f"name: {case}\ndescription: ok\n{hostile}")
    index = open_index(root)

    report = index.reindex(jobs=2)

    assert report.seen == parallel.PARALLEL_MIN + 2 + len(HOSTILE)
    assert report.rejected == len(HOSTILE)
    found = {c.directory.name: c for c in index.candidates()}
    for case, (_hostile, code) in HOSTILE.items():
        assert code in {f.code for f in found[case].findings}, case


class Unforeseen(Exception):
    """A failure no rule knows about: what the barrier exists for."""


def _fails_for(name: str, original: Callable[..., T]) -> Callable[..., T]:
    """`original`, except that it fails when given `name` (or a list holding it)."""
    def failing(*args: object, **kwargs: object) -> T:
        given = (*args, *kwargs.values())
        if name in given or any(isinstance(arg, list) and name in arg for arg in given):
            raise Unforeseen("x" * 10_000)
        return original(*args, **kwargs)
    return failing


def test_a_failure_while_judging_rejects_that_skill_alone(tmp_path: Path, open_index: OpenIndex,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    write_skill(root, "doomed", "name: doomed\ndescription: ok\n")
    index = open_index(root)
    monkeypatch.setattr(policy, "judge", _fails_for("doomed", policy.judge))

    report = index.reindex()

    found = {c.directory.name: c for c in index.candidates()}
    assert report.seen == 3
    assert found["good"].status is Status.ACCEPTED
    assert found["doomed"].status is Status.REJECTED
    [finding] = found["doomed"].findings
    assert finding.code == "internal-error"
    assert finding.message.startswith("judging the skill failed: Unforeseen: xxx")
    assert len(finding.message) < 400

    monkeypatch.undo()  # the defect is mended: the next reindex judges the skill again
    again = index.reindex()
    assert again.rejudged == 1  # the same bytes, judged again
    assert {c.directory.name: c for c in index.candidates()}["doomed"].status is \
        Status.ACCEPTED


def test_a_failure_while_reading_rejects_that_skill_alone(tmp_path: Path, open_index: OpenIndex,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    write_skill(root, "doomed", "name: doomed\ndescription: ok\n")
    index = open_index(root)
    index.reindex()
    (root / "doomed" / "notes.md").write_text("changed\n")
    monkeypatch.setattr(scanner, "scan_skill", _fails_for("doomed", skilldir.scan_skill))

    report = index.reindex()

    found = {c.directory.name: c for c in index.candidates()}
    assert (report.changed, report.removed) == (1, 0)
    assert found["good"].status is Status.ACCEPTED
    assert [f.code for f in found["doomed"].findings] == ["internal-error"]
    assert "reading the skill failed: Unforeseen" in found["doomed"].findings[0].message


def test_a_failure_in_the_line_wise_repair_is_a_finding(tmp_path: Path, open_index: OpenIndex,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    write_skill(root, "repaired", "name: repaired\ndescription: Build for AWS: ECS\n")

    def failing(*_args: object, **_kwargs: object) -> None:
        raise Unforeseen("repair")

    monkeypatch.setattr(frontmatter, "repair", failing)
    index = open_index(root, validation=Validation.LENIENT)

    index.reindex()

    found = {c.directory.name: c for c in index.candidates()}
    assert found["good"].status is Status.ACCEPTED
    assert [f.code for f in found["repaired"].findings] == ["internal-error"]


def test_a_failure_walking_a_root_keeps_what_it_did_not_reach(
        tmp_path: Path, open_index: OpenIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    write_skill(elsewhere, "far", "name: far\ndescription: ok\n")
    index = open_index(root, elsewhere)
    index.reindex()
    write_skill(root, "late", "name: late\ndescription: ok\n")
    walk = scanner._RootWalk.run

    def breaks_after_one(self: scanner._RootWalk, *args: object):  # type: ignore[no-untyped-def]
        if self.spec.path != root:
            yield from walk(self, *args)  # type: ignore[arg-type]
            return
        for number, found in enumerate(walk(self, *args)):  # type: ignore[arg-type]
            if number == 1:
                raise Unforeseen("the walk")
            yield found

    monkeypatch.setattr(scanner._RootWalk, "run", breaks_after_one)
    report = index.reindex()

    assert report.removed == 0  # what the walk did not reach is left as stored
    assert [(p.path, p.code) for p in report.problems] == [(root, "internal-error")]
    assert {c.directory.name for c in index.candidates()} == {"good", "other", "far"}
    monkeypatch.undo()
    assert index.reindex().added == 1


def test_a_failure_on_an_entry_that_is_no_skill_is_a_problem_of_the_root(
        tmp_path: Path, open_index: OpenIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    (root / "group").mkdir()
    visit = scanner._RootWalk.visit

    def failing(self: scanner._RootWalk, entry, frame):  # type: ignore[no-untyped-def]
        if entry.name == "group":
            raise Unforeseen("visit")
        return visit(self, entry, frame)

    monkeypatch.setattr(scanner._RootWalk, "visit", failing)
    index = open_index(root)

    report = index.reindex()

    assert report.seen == 2
    assert [(p.path.name, p.code) for p in report.problems] == [("group", "internal-error")]


def test_the_entries_no_worker_finished_are_walked_by_the_indexer(
        tmp_path: Path, open_index: OpenIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    names = [f"skill-{number:03d}" for number in range(parallel.PARALLEL_MIN + 10)]
    for name in names:
        write_skill(root, name, f"name: {name}\ndescription: d\n")
    # Workers in threads, so that the second shard's worker can fail as a dying process would
    # (a process pool raises BrokenProcessPool there).
    monkeypatch.setattr(parallel.Workers, "executor",
                        lambda self: ThreadPoolExecutor(max_workers=self.jobs))
    monkeypatch.setattr(parallel, "_scan_shard",
                        _fails_for(names[parallel.SHARD], parallel._scan_shard))
    index = open_index(root)

    report = index.reindex(jobs=2)

    assert report.seen == len(names) + 2
    assert {c.directory.name for c in index.candidates()} == {*names, "good", "other"}
    assert all(c.status is Status.ACCEPTED for c in index.candidates())


def test_a_shard_that_failed_under_one_root_leaves_the_next_root_its_own_shards(
        tmp_path: Path, open_index: OpenIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    # The workers take the shards of every root in turn, several in flight: the ones of the
    # first root not yet staged when one of them failed must not reach the second root.
    roots = [tmp_path / "first", tmp_path / "second"]
    names = {root: [f"{root.name}-{number:03d}" for number in range(parallel.PARALLEL_MIN + 10)]
             for root in roots}
    for root in roots:
        for name in names[root]:
            write_skill(root, name, f"name: {name}\ndescription: d\n")
    monkeypatch.setattr(parallel.Workers, "executor",
                        lambda self: ThreadPoolExecutor(max_workers=self.jobs))
    monkeypatch.setattr(parallel, "_scan_shard",
                        _fails_for(names[roots[0]][parallel.SHARD], parallel._scan_shard))
    index = open_index(*roots)

    report = index.reindex(jobs=2)

    assert report.seen == 2 * (parallel.PARALLEL_MIN + 10)
    found = {(c.root.name, c.directory.name) for c in index.candidates()}
    assert found == {(root.name, name) for root in roots for name in names[root]}
    assert all(c.status is Status.ACCEPTED for c in index.candidates())
