"""A reindex that adds, removes or changes a few skills updates the stored resolution in place,
judging only the names it touched: after every kind of change the stored winners, in their
order, equal those resolved from scratch, on both backends and under every collision policy."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.orm import Session

from skillindex.api import SkillIndex
from skillindex.config import COLLISION_POLICIES, Environment, RootConfig, Settings
from skillindex.model import Scope, Validation
from skillindex.query import winners
from skillindex.query.resolve import Rules
from skillindex.store import resolved
from skillindex.store.models import ResolvedWinner
from tests.conftest import OpenIndex

# Three roots: `top` above the two others, which tie (the one registered first wins); `copies`
# may hold links to folders of `low`, the same skill directory found twice.
ROOTS = (("top", Scope.PROJECT, "p", 200), ("low", Scope.USER, "t", 100),
         ("copies", Scope.USER, "t", 100))
FOLDERS = ("a", "b", "c", "d")
# Names that collide, and names a qualified name must avoid ("user" begins "user:alpha").
NAMES = ("alpha", "beta", "gamma", "user", "project", "draft-x")
KINDS = ("write", "edit", "rename", "disable", "reject", "remove", "move", "link")


def _settings(base: Path, policy: str) -> Settings:
    return Settings(presets=False, collision_policy=policy, ignored_skills=("draft-*",),
                    roots=tuple(RootConfig(path=str(base / name), scope=scope, provider=provider,
                                           precedence=precedence, validation=Validation.LENIENT)
                                for name, scope, provider, precedence in ROOTS))


def _write(folder: Path, name: str, *, description: str = "Does a thing.",
           enabled: bool = True, valid: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"name: {name}"] + ([f"description: {description}"] if valid else [])
    lines += [] if enabled else ["enabled: false"]
    if not valid:
        lines.append("name: twice")  # a duplicate key: the file is rejected
    (folder / "SKILL.md").write_text("---\n" + "\n".join(lines) + "\n---\n# Body\n")


def _remove(folder: Path) -> None:
    if folder.is_symlink():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)


RESOLVABLE = resolved.resolvable  # what resolves every candidate: spied on, never replaced


class Spy:
    """Counts the calls of `resolved.resolvable` by the library: each is a resolution of every
    candidate from scratch."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        monkeypatch.setattr(resolved, "resolvable", self)

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return RESOLVABLE(*args)


def stored_and_fresh(index: SkillIndex) -> tuple[int, list[tuple[Any, ...]], list[Any]]:
    """The stored resolution of the index's roots (its id and winners in order) and the same
    resolved from scratch, as (catalog name, candidate id, collision JSON)."""
    roots, rules = index.plan.roots, Rules.from_settings(index.settings)
    with Session(index.engine) as session:
        set_id = winners.lookup(session, index.index_name, roots, rules)
        assert set_id is not None
        stored = [tuple(row) for row in session.execute(
            select(ResolvedWinner.name, ResolvedWinner.candidate_id, ResolvedWinner.collision)
            .where(ResolvedWinner.set_id == set_id).order_by(ResolvedWinner.ordinal))]
        rows, contested = RESOLVABLE(session, index.index_name,
                                     [str(spec.path) for spec in roots])
        fresh = list(winners.materialize(rows, roots, rules, contested))
    return set_id, stored, fresh


class Tree:
    """The three roots on disk; each change returns the paths a targeted reindex is given."""

    def __init__(self, base: Path) -> None:
        self.base = base
        for name, *_ in ROOTS:
            (base / name).mkdir(parents=True)
        self.seen = itertools.count()

    def folder(self, root: int, folder: str) -> Path:
        return self.base / ROOTS[root][0] / folder

    def change(self, kind: str, root: int, folder: str, name: str, other: int) -> list[Path]:
        here = self.folder(root, folder)
        if kind in ("write", "rename"):
            _remove(here) if here.is_symlink() else None
            _write(here, name)
        elif kind == "edit":  # what resolution does not read: carried over
            if here.is_dir() and not here.is_symlink():
                text = (here / "SKILL.md").read_text()
                (here / "SKILL.md").write_text(text.replace("# Body", f"# Body {next(self.seen)}"))
        elif kind == "disable":
            _remove(here) if here.is_symlink() else None
            _write(here, name, enabled=False)
        elif kind == "reject":
            _remove(here) if here.is_symlink() else None
            _write(here, name, valid=False)
        elif kind == "remove":
            _remove(here)
        elif kind == "move":  # the skill leaves one root for another, in one reindex
            there = self.folder(other, folder)
            _remove(here)
            _remove(there)
            _write(there, name)
            return [here, there]
        elif kind == "link":  # the `copies` root finds a folder of `low` a second time
            target, link = self.folder(1, folder), self.folder(2, folder)
            if not target.is_dir():
                _write(target, name)
            _remove(link)
            link.symlink_to(target, target_is_directory=True)
            return [target, link]
        return [here]


CHANGES = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 2),
                             st.sampled_from(FOLDERS), st.sampled_from(NAMES),
                             st.integers(0, 2)), min_size=1, max_size=8)
START = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(FOLDERS), st.sampled_from(NAMES)),
                 max_size=8)


@pytest.fixture
def indexes(tmp_path: Path, db_url: str, env: Environment) -> Iterator[list[SkillIndex]]:
    opened: list[SkillIndex] = []
    yield opened
    for index in opened:
        index.close()


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(policy=st.sampled_from(COLLISION_POLICIES), start=START, changes=CHANGES)
def test_every_change_leaves_the_resolution_as_resolving_from_scratch_would(
        tmp_path: Path, db_url: str, env: Environment, indexes: list[SkillIndex],
        monkeypatch: pytest.MonkeyPatch, policy: str,
        start: list[tuple[int, str, str]], changes: list[tuple[str, int, str, str, int]],
) -> None:
    number = len(indexes)
    tree = Tree(tmp_path / f"example-{number}")
    for root, folder, name in start:
        _write(tree.folder(root, folder), name)
    index = SkillIndex.open(_settings(tree.base, policy), db=db_url, env=env,
                            index=f"example-{number}")
    indexes.append(index)
    index.reindex()
    first, stored, fresh = stored_and_fresh(index)
    assert stored == fresh
    spy = Spy(monkeypatch)
    for kind, root, folder, name, other in changes:
        paths = tree.change(kind, root, folder, name, other)
        index.reindex(paths=paths)
        set_id, stored, fresh = stored_and_fresh(index)
        assert stored == fresh, (kind, root, folder, name, other)
    # Never resolved again from scratch, always the same stored set: updated in place.
    assert (spy.calls, set_id) == (0, first)


def test_each_kind_of_change_updates_the_stored_set_in_place(
        tmp_path: Path, open_index: OpenIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    high, low = tmp_path / "high", tmp_path / "low"
    for folder in ("pdf", "docx", "xlsx"):
        _write(high / folder, folder)
        _write(low / folder, folder)
    index = open_index(high, low, validation=Validation.LENIENT)  # names other than folders'
    index.reindex()
    first, stored, fresh = stored_and_fresh(index)
    assert stored == fresh
    spy = Spy(monkeypatch)
    steps: list[tuple[Callable[[], object], list[Path]]] = [
        (lambda: _write(high / "aaa", "aaa"), [high / "aaa"]),  # added first in its root
        (lambda: _write(low / "zzz", "zzz"), [low / "zzz"]),  # added last of all
        (lambda: _write(high / "pdf", "renamed"), [high / "pdf"]),  # low's pdf wins now
        (lambda: _remove(low / "docx"), [low / "docx"]),  # a shadowed copy goes
        (lambda: _remove(high / "docx"), [high / "docx"]),  # the last copy goes
        (lambda: _write(low / "xlsx", "xlsx", enabled=False), [low / "xlsx"])]
    for make, paths in steps:
        make()
        index.reindex(paths=paths)
        set_id, stored, fresh = stored_and_fresh(index)
        assert (set_id, stored) == (first, fresh)
    assert spy.calls == 0
    assert [w.name for w in index.winners()] == ["aaa", "renamed", "xlsx", "pdf", "zzz"]
    assert "renamed" in index.catalog().text


def test_a_full_gap_writes_the_set_again_in_order(tmp_path: Path,
                                                  open_index: OpenIndex) -> None:
    # Skills added one by one between the same two neighbours halve the room between their
    # ordinals until none is left; the set is then written again (its ordinals GAP apart),
    # still in catalog order.
    root = tmp_path / "skills"
    _write(root / "a", "a")
    _write(root / "b", "b")
    index = open_index(root)
    index.reindex()
    rewritten = []
    for step in range(resolved.GAP.bit_length() + 2):
        folder = "a" + "z" * (step + 1)  # each sorts after the one before, before "b"
        _write(root / folder, folder)
        index.reindex(paths=[root / folder])
        set_id, stored, fresh = stored_and_fresh(index)
        assert stored == fresh
        with Session(index.engine) as session:
            ordinals = session.execute(select(ResolvedWinner.ordinal).where(
                ResolvedWinner.set_id == set_id)).scalars().all()
        rewritten.append(all(ordinal % resolved.GAP == 0 for ordinal in ordinals))
    # In place (between its neighbours) until the gap is full, then written again once.
    assert rewritten[0] is False and rewritten.count(True) == 1
