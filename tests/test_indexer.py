"""Reindex as a whole: incremental detection, one-transaction writes, rejected rows kept."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from skillindex.cli import cli
from skillindex.model import Status
from skillindex.store.engine import make_engine
from skillindex.store.models import Candidate, IndexRun, LoadEvent
from tests.conftest import OpenIndex, write_skill


def touch(path: Path, data: str | None = None) -> None:
    if data is not None:
        path.write_text(data)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def make_tree(root: Path, count: int) -> None:
    for number in range(count):
        skill = write_skill(root, f"skill-{number:03d}")
        (skill / "references").mkdir()
        (skill / "references" / "guide.md").write_text(f"guide {number}")


def test_cold_then_unchanged(tmp_path: Path, open_index: OpenIndex) -> None:
    make_tree(tmp_path / "skills", 20)
    index = open_index(tmp_path / "skills")
    cold = index.reindex()
    assert (cold.seen, cold.added, cold.unchanged, cold.files_read) == (20, 20, 0, 40)
    warm = index.reindex()
    assert (warm.seen, warm.added, warm.changed, warm.unchanged, warm.removed) == (20, 0, 0, 20, 0)
    assert warm.files_read == 0
    assert warm.run_id == cold.run_id + 1


def test_touching_one_file_rereads_only_that_skill(tmp_path: Path, open_index: OpenIndex) -> None:
    make_tree(tmp_path / "skills", 20)
    index = open_index(tmp_path / "skills")
    index.reindex()
    touch(tmp_path / "skills" / "skill-007" / "references" / "guide.md", "new guide")
    report = index.reindex()
    assert (report.changed, report.unchanged, report.added, report.removed) == (1, 19, 0, 0)
    assert report.files_read == 2  # the changed file, and SKILL.md to judge the skill again


def test_same_content_new_mtime_is_read_again_but_stays_equal(tmp_path: Path,
                                                              open_index: OpenIndex) -> None:
    write_skill(tmp_path / "skills", "pdf")
    index = open_index(tmp_path / "skills")
    index.reindex()
    touch(tmp_path / "skills" / "pdf" / "SKILL.md")
    report = index.reindex()
    assert (report.changed, report.rejudged, report.files_read) == (0, 1, 1)


def test_added_removed_and_changed_skills_and_resources(tmp_path: Path,
                                                        open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    make_tree(root, 3)
    index = open_index(root)
    first = index.reindex()
    write_skill(root, "skill-new")
    for path in (root / "skill-001").rglob("*"):
        if path.is_file():
            path.unlink()
    for path in sorted((root / "skill-001").rglob("*"), reverse=True):
        path.rmdir()
    (root / "skill-001").rmdir()
    (root / "skill-002" / "references" / "extra.md").write_text("added resource")
    report = index.reindex()
    assert (report.added, report.removed, report.changed, report.unchanged) == (1, 1, 1, 1)
    names = [c.name for c in index.candidates()]
    assert names == ["skill-000", "skill-002", "skill-new"]
    with Session(index.engine) as session:
        changed = session.scalars(select(Candidate).where(Candidate.name == "skill-002")).one()
        assert (changed.first_run_id, changed.changed_run_id) == (first.run_id, report.run_id)


def test_rejections_are_rows_and_the_rest_is_intact(tmp_path: Path,
                                                    open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good")
    write_skill(root, "bad-yaml", "name: [oops\n")
    write_skill(root, "Bad_Name", "name: Bad_Name\ndescription: d\n")
    (root / "no-frontmatter").mkdir()
    (root / "no-frontmatter" / "SKILL.md").write_text("# just markdown\n")
    (root / "binary").mkdir()
    (root / "binary" / "SKILL.md").write_bytes(b"---\nname: \xff\n---\n")
    index = open_index(root)
    report = index.reindex()
    assert (report.seen, report.rejected) == (5, 4)
    rejected = {c.directory.name: [f.code for f in c.findings] for c in index.rejections()}
    assert rejected == {"bad-yaml": ["yaml-invalid"], "Bad_Name": ["name-invalid"],
                        "no-frontmatter": ["frontmatter-missing"], "binary": ["not-utf8"]}
    assert [c.name for c in index.candidates() if c.status is Status.ACCEPTED] == ["good"]
    assert index.reindex().rejected == 4  # unchanged rejected rows still count


def test_fixing_a_rejected_skill_accepts_it(tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", "name: [oops\n")
    index = open_index(root)
    index.reindex()
    write_skill(root, "pdf")
    touch(root / "pdf" / "SKILL.md")
    assert index.reindex().rejected == 0
    assert index.candidates()[0].status is Status.ACCEPTED


def test_changing_a_roots_validation_rejudges_unchanged_files(tmp_path: Path,
                                                              open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", "name: other\ndescription: d\n")
    strict = open_index(root)
    assert strict.reindex().rejected == 1
    strict.close()
    from skillindex.model import Validation

    lenient = open_index(root, validation=Validation.LENIENT)
    report = lenient.reindex()
    assert (report.changed, report.rejudged, report.rejected) == (0, 1, 0)


def test_roots_of_another_directory_are_kept(tmp_path: Path, open_index: OpenIndex) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_skill(a, "one")
    write_skill(b, "two")
    open_index(a).reindex()
    only_b = open_index(b)
    only_b.reindex()
    both = open_index(a, b)
    assert sorted(c.name or "" for c in both.candidates()) == ["one", "two"]
    # a root that disappears loses its candidates when every known root is rescanned
    for path in (a / "one").iterdir():
        path.unlink()
    (a / "one").rmdir()
    a.rmdir()
    report = only_b.reindex(all_roots=True)
    assert (report.removed, report.roots) == (1, 2)
    assert [c.name for c in both.candidates()] == ["two"]


def test_a_reader_sees_the_old_index_or_the_new_one_never_a_mix(
        tmp_path: Path, open_index: OpenIndex, db_url: str) -> None:
    root = tmp_path / "skills"
    make_tree(root, 50)
    index = open_index(root)
    index.reindex()
    for number in range(50, 250):
        write_skill(root, f"skill-{number:03d}")
    seen: set[int] = set()
    stop = threading.Event()
    reader = make_engine(db_url)

    def watch() -> None:
        with reader.connect() as connection:
            while not stop.is_set():
                seen.add(connection.execute(select(func.count()).select_from(Candidate))
                         .scalar_one())
                connection.rollback()
                time.sleep(0.002)  # leave the GIL to the reindex

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        index.reindex()
    finally:
        stop.set()
        thread.join()
        reader.dispose()
    assert seen <= {50, 250}
    assert 50 in seen
    with Session(index.engine) as session:
        runs = session.scalars(select(IndexRun.seen).order_by(IndexRun.id)).all()
    assert runs == [50, 250]


def test_two_indexes_in_one_database_keep_their_own_candidates_and_runs(
        tmp_path: Path, db_url: str) -> None:
    shared, extra = tmp_path / "shared", tmp_path / "extra"
    write_skill(shared, "pdf")
    write_skill(extra, "docx")
    configs = {}
    for name, roots in {"a": [shared], "b": [shared, extra]}.items():
        configs[name] = tmp_path / f"{name}.toml"
        configs[name].write_text("[skills]\npresets = false\n" + "".join(
            f'\n[[roots]]\npath = "{root}"\n' for root in roots))

    def run(name: str, *args: str) -> Any:
        result = CliRunner().invoke(cli, ["--config", str(configs[name]), "--db", db_url,
                                          "--index", name, "--json", *args],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    assert run("a", "reindex")["added"] == 1
    assert run("b", "reindex")["added"] == 2  # the same root, indexed again for b
    write_skill(shared, "xlsx")
    assert run("b", "reindex")["added"] == 1
    assert [c["name"] for c in run("a", "candidates")] == ["pdf"]
    assert sorted(c["name"] for c in run("b", "candidates")) == ["docx", "pdf", "xlsx"]
    assert [r["candidates"] for r in run("a", "roots")] == [1]
    assert [r["candidates"] for r in run("b", "roots")] == [2, 1]
    engine = make_engine(db_url)
    with Session(engine) as session, session.begin():
        runs = session.execute(select(IndexRun.index_name, IndexRun.added)
                               .order_by(IndexRun.id)).all()
        assert [tuple(run) for run in runs] == [("a", 1), ("b", 2), ("b", 1)]
        # the audit trail of every index lives in one append-only table
        session.execute(insert(LoadEvent), [
            {"index_name": name, "time": datetime.now(UTC), "event": "skill.read",
             "skill": "pdf", "level": 2, "outcome": "ok"} for name in ("a", "b")])
    with engine.connect() as connection:
        audited = connection.execute(select(LoadEvent.index_name).order_by(LoadEvent.id))
        assert audited.scalars().all() == ["a", "b"]
    engine.dispose()
