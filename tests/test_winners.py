"""The resolution materialized in the store: written by the reindex, equal to the policy's."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from skillindex.api import SkillIndex
from skillindex.config import Environment, RootConfig, Settings
from skillindex.model import Candidate, RootSpec, Scope, Status
from skillindex.query.resolve import Rules, resolve
from skillindex.query.winners import materialize
from skillindex.store.models import ResolvedSet, ResolvedWinner
from tests.conftest import OpenIndex, root_settings, write_skill

POLICIES = ["precedence", "reject-ambiguous", "qualify", "keep-all"]


def _sets(index: SkillIndex) -> int:
    with Session(index.engine) as session:
        return int(session.execute(select(func.count()).select_from(ResolvedSet)).scalar_one())


def _world(seed: int) -> tuple[list[Candidate], list[RootSpec]]:
    """Random candidates over five roots: shared names, equal precedences, disabled skills,
    copies of one real directory, plugin scopes."""
    rng = random.Random(seed)
    roots = [RootSpec(path=Path(f"/r{n}"), scope=rng.choice(list(Scope)),
                      provider=rng.choice(["claude", "agents", "codex", "x"]),
                      precedence=rng.choice([100, 80, 80, 70]), position=n,
                      disabled_by="enable_x" if rng.random() < 0.1 else None)
             for n in range(5)]
    found = []
    for number in range(60):
        root = rng.choice(roots)
        name = rng.choice(["pdf", "docx", "user:pdf", "kit:pdf", "draft-a", f"only-{number}"])
        directory = root.path / f"{name.replace(':', '-')}-{number}"
        real = Path("/real/shared") if rng.random() < 0.1 else directory
        found.append(Candidate(
            name=name, description="d", path=directory / "SKILL.md", directory=directory,
            real_path=real, root=root.path, scope=root.scope, provider=root.provider,
            precedence=root.precedence, position=root.position, status=Status.ACCEPTED,
            enabled=rng.random() > 0.1, id=number + 1))
    return found, roots


@pytest.mark.parametrize(("policy", "seed"), list(itertools.product(POLICIES, range(25))))
def test_materialized_winners_equal_the_full_resolution(policy: str, seed: int) -> None:
    found, roots = _world(seed)
    rules = Rules(enabled=True, ignored=("draft-*",), included=(), policy=policy)
    full = resolve(found, roots, rules)
    rows = [(c.id, str(c.name), c.enabled, str(c.root), str(c.path), str(c.real_path))
            for c in found]
    lean = list(materialize(rows, roots, rules))
    assert [(name, cid) for name, cid, _ in lean] == [
        (w.name, w.candidate.id) for w in full.winners]
    assert [text is not None for _, _, text in lean] == [
        w.collision is not None for w in full.winners]
    # As the store hands them over: a real directory only where rows share it.
    shared = {real for real in (row[5] for row in rows) if [r[5] for r in rows].count(real) > 1}
    assert any(shared)
    sparse = [(*row[:5], row[5] if row[5] in shared else None) for row in rows]
    assert list(materialize(sparse, roots, rules)) == lean


def test_a_reindex_stores_the_resolution_and_reads_use_it(tmp_path: Path,
                                                         open_index: OpenIndex) -> None:
    high, low = tmp_path / "high", tmp_path / "low"
    write_skill(high, "pdf", body="# high\n")
    write_skill(low, "pdf", body="# low\n")
    write_skill(low, "docx")
    index = open_index(high, low)
    index.reindex()
    assert _sets(index) == 1
    with Session(index.engine) as session:
        stored = session.execute(
            select(ResolvedWinner.name).order_by(ResolvedWinner.ordinal)).scalars().all()
    assert stored == ["pdf", "docx"]
    assert [w.name for w in index.winners()] == ["pdf", "docx"]
    assert index.read("skill://pdf", reason="test").text == "# high\n"
    assert [c.name for c in index.collisions()] == ["pdf"]
    assert _sets(index) == 1  # the reads looked it up, none resolved again


def test_a_change_replaces_the_resolution(tmp_path: Path, open_index: OpenIndex) -> None:
    high, low = tmp_path / "high", tmp_path / "low"
    write_skill(high, "pdf", body="# high\n")
    write_skill(low, "pdf", body="# low\n")
    index = open_index(high, low)
    index.reindex()
    (high / "pdf" / "SKILL.md").unlink()
    (high / "pdf").rmdir()
    index.reindex()
    assert _sets(index) == 1
    assert index.read("skill://pdf", reason="test").text == "# low\n"


def test_another_directory_resolves_once_and_a_shared_root_change_drops_it(
        tmp_path: Path, db_url: str, env: Environment) -> None:
    shared, mine, theirs = tmp_path / "shared", tmp_path / "mine", tmp_path / "theirs"
    write_skill(shared, "pdf", body="# shared\n")
    write_skill(theirs, "pdf", body="# theirs\n")
    write_skill(mine, "docx")
    with SkillIndex.open(root_settings(mine, shared), db=db_url, env=env) as first, \
            SkillIndex.open(root_settings(theirs, shared), db=db_url, env=env) as second:
        first.reindex()
        second.reindex()
        assert _sets(first) == 2
        # Settings that were never resolved: resolved once at the first query, then kept.
        with SkillIndex.open(root_settings(shared, mine), db=db_url, env=env) as third:
            assert [w.name for w in third.winners()] == ["pdf", "docx"]
            assert _sets(first) == 3
            assert third.read("skill://pdf", reason="test").text == "# shared\n"
            assert _sets(first) == 3
        write_skill(shared, "xlsx")
        first.reindex()  # changes a root the other sets cover: they go, this one is rewritten
        assert _sets(first) == 1
        assert [w.name for w in second.winners()] == ["pdf", "xlsx"]
        assert second.read("skill://pdf", reason="test").text == "# theirs\n"
        assert _sets(first) == 2


def test_changed_settings_resolve_again_without_a_reindex(tmp_path: Path, db_url: str,
                                                          env: Environment) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_skill(a, "pdf", body="# a\n")
    write_skill(b, "pdf", body="# b\n")
    with SkillIndex.open(root_settings(a, b), db=db_url, env=env) as index:
        index.reindex()
        assert index.read("skill://pdf", reason="test").text == "# a\n"
    with SkillIndex.open(root_settings(b, a), db=db_url, env=env) as index:
        assert index.read("skill://pdf", reason="test").text == "# b\n"
        assert "b/pdf" in index.catalog().text


def test_a_lower_skill_named_like_a_scope_leaves_the_higher_its_qualified_name(
        tmp_path: Path, db_url: str, env: Environment) -> None:
    # Stored and updated in place as resolved whole: the admin's `pdf` keeps `admin:pdf`
    # whether the project skill `admin` is there from the start or comes in a later reindex.
    admin, home, project = tmp_path / "admin", tmp_path / "home", tmp_path / "project"
    write_skill(admin, "pdf")
    write_skill(home, "pdf")
    settings = Settings(presets=False, collision_policy="qualify", roots=tuple(
        RootConfig(path=str(path), scope=scope, provider="custom", precedence=precedence)
        for path, scope, precedence in ((admin, Scope.ADMIN, 200), (home, Scope.USER, 100),
                                        (project, Scope.PROJECT, 70))))
    expected = ["admin:pdf", "user:pdf", "admin"]
    with SkillIndex.open(settings, db=db_url, env=env, index="later") as index:
        index.reindex()
        assert [w.name for w in index.winners()] == expected[:2]
        index.reindex(paths=[write_skill(project, "admin")])
        assert [w.name for w in index.winners()] == expected
    with SkillIndex.open(settings, db=db_url, env=env, index="whole") as index:
        index.reindex()
        assert [w.name for w in index.winners()] == expected
        [lower] = index.candidates(code="uri-collision")
        assert lower.name == "admin"
        assert index.read("skill://admin/pdf/SKILL.md").data == (
            admin / "pdf" / "SKILL.md").read_bytes()
