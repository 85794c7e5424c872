"""The parallel cold index: worker processes read, hash and parse; the rows are the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from skillindex.api import SkillIndex
from skillindex.index.parallel import PARALLEL_MIN
from skillindex.store.models import Candidate, Finding, Resource
from tests.conftest import OpenIndex, write_skill


@pytest.fixture
def db_backend() -> str:
    return "sqlite"


def make_tree(root: Path) -> None:
    for number in range(PARALLEL_MIN + 40):
        if number % 50 == 7:
            write_skill(root, f"broken-{number}", "name: [unclosed\n")
            continue
        skill = write_skill(root, f"skill-{number:03d}")
        (skill / "references").mkdir()
        (skill / "references" / "guide.md").write_text(f"guide {number}\n")
    write_skill(root / "group", "nested")  # a group: only seen with max_depth 2


def dump(index: SkillIndex) -> list[tuple[Any, ...]]:
    with Session(index.engine) as session:
        candidates = session.execute(
            select(Candidate.rel_dir, Candidate.name, Candidate.status, Candidate.tree_key,
                   Candidate.sha256, Candidate.frontmatter).order_by(Candidate.rel_dir)).all()
        findings = session.execute(
            select(Candidate.rel_dir, Finding.code, Finding.message)
            .join(Finding, Finding.candidate_id == Candidate.id)
            .order_by(Candidate.rel_dir, Finding.code)).all()
        resources = session.execute(
            select(Candidate.rel_dir, Resource.rel_path, Resource.size, Resource.xxh3,
                   Resource.sha256).join(Resource, Resource.candidate_id == Candidate.id)
            .order_by(Candidate.rel_dir, Resource.rel_path)).all()
    return [tuple(row) for row in (*candidates, *findings, *resources)]


def test_workers_store_what_one_process_stores(tmp_path: Path, open_index: OpenIndex,
                                               new_db: Any) -> None:
    root = tmp_path / "skills"
    make_tree(root)
    alone = open_index(root, db=new_db(), max_depth=2)
    workers = open_index(root, db=new_db(), max_depth=2)
    one = alone.reindex(jobs=1)
    two = workers.reindex(jobs=2)
    assert one.as_dict() | {"run_id": 0, "duration_s": 0} == \
        two.as_dict() | {"run_id": 0, "duration_s": 0}
    assert (two.seen, two.added) == (PARALLEL_MIN + 41, PARALLEL_MIN + 41)
    assert dump(alone) == dump(workers)
    again = workers.reindex(jobs=2)
    assert (again.unchanged, again.files_read) == (PARALLEL_MIN + 41, 0)
    assert [w.name for w in workers.winners()] == [w.name for w in alone.winners()]
