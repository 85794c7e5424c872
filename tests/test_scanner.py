"""The walk and the manifest, observed through a real reindex into a real SQLite file."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import xxhash
from sqlalchemy import select
from sqlalchemy.orm import Session

from skillindex.index.scanner import MAX_ENTRY_BYTES
from skillindex.model import Candidate, Status
from skillindex.store.models import Resource
from tests.conftest import OpenIndex, write_skill


def by_dir(candidates: list[Candidate]) -> dict[str, Candidate]:
    return {c.directory.name: c for c in candidates}


def codes(candidate: Candidate) -> list[str]:
    return [f.code for f in candidate.findings]


def test_only_immediate_children_holding_skill_md_are_skills(tmp_path: Path,
                                                            open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "alpha")
    write_skill(root, "group/nested")  # one level too deep for max_depth 1
    write_skill(root, ".hidden")
    (root / "empty").mkdir()
    (root / "loose.md").write_text("not a skill")
    index = open_index(root)
    report = index.reindex()
    assert report.seen == 1
    assert [c.name for c in index.candidates()] == ["alpha"]


def test_max_depth_reaches_nested_skills_but_not_inside_a_skill(tmp_path: Path,
                                                                open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "group/nested")
    write_skill(root, "group/nested/inner")  # inside a skill: a resource, not a skill
    write_skill(root, "a/b/c/too-deep")
    index = open_index(root, max_depth=3)
    index.reindex()
    assert sorted(c.name or "" for c in index.candidates()) == ["nested"]


def test_walk_order_is_deterministic(tmp_path: Path, open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    for name in ["zeta", "alpha", "mid"]:
        write_skill(root, name)
    index = open_index(root)
    index.reindex()
    assert [c.name for c in index.candidates()] == ["alpha", "mid", "zeta"]


def test_manifest_holds_every_regular_file_with_kind_and_both_hashes(
        tmp_path: Path, open_index: OpenIndex) -> None:
    skill = write_skill(tmp_path / "skills", "pdf")
    files = {"references/guide.md": b"guide", "scripts/run.py": b"print(1)",
             "assets/logo.svg": b"<svg/>", "notes.txt": b"n", "references/deep/x.md": b"x"}
    for rel, data in files.items():
        (skill / rel).parent.mkdir(parents=True, exist_ok=True)
        (skill / rel).write_bytes(data)
    (skill / ".git").mkdir()
    (skill / ".git" / "HEAD").write_text("ignored")
    index = open_index(tmp_path / "skills")
    index.reindex()
    with Session(index.engine) as session:
        rows = {r.rel_path: r for r in session.scalars(select(Resource))}
    assert set(rows) == {"SKILL.md", *files}
    kinds = {rel: rows[rel].kind for rel in rows}
    assert kinds == {"SKILL.md": "entry", "references/guide.md": "reference",
                     "scripts/run.py": "script", "assets/logo.svg": "asset", "notes.txt": "other",
                     "references/deep/x.md": "reference"}
    for rel, data in files.items():
        assert rows[rel].xxh3 == xxhash.xxh3_128_hexdigest(data)
        assert rows[rel].sha256 == hashlib.sha256(data).hexdigest()
        assert rows[rel].size == len(data)


def test_fifo_and_socket_are_never_opened(tmp_path: Path, open_index: OpenIndex) -> None:
    skill = write_skill(tmp_path / "skills", "pdf")
    os.mkfifo(skill / "pipe")  # opening it for reading would block forever
    os.mkfifo(skill / "references-pipe")
    server = socket.socket(socket.AF_UNIX)
    sock_path = skill / "s.sock"
    try:
        server.bind(str(sock_path))
        index = open_index(tmp_path / "skills")
        index.reindex()
    finally:
        server.close()
    candidate = index.candidates()[0]
    assert candidate.status is Status.ACCEPTED
    assert codes(candidate).count("special-file") == 3


def test_a_fifo_named_skill_md_is_rejected_unopened(tmp_path: Path,
                                                    open_index: OpenIndex) -> None:
    skill = tmp_path / "skills" / "pipe"
    skill.mkdir(parents=True)
    os.mkfifo(skill / "SKILL.md")
    index = open_index(tmp_path / "skills")
    index.reindex()
    assert codes(index.candidates()[0]) == ["unreadable"]


def test_symlinked_skill_md_is_rejected(tmp_path: Path, open_index: OpenIndex) -> None:
    real = write_skill(tmp_path / "elsewhere", "linked")
    skill = tmp_path / "skills" / "linked"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").symlink_to(real / "SKILL.md")
    index = open_index(tmp_path / "skills")
    index.reindex()
    candidate = index.candidates()[0]
    assert candidate.status is Status.REJECTED
    assert codes(candidate) == ["entry-symlink"]


def test_symlinked_skill_directory_is_followed(tmp_path: Path, open_index: OpenIndex) -> None:
    real = write_skill(tmp_path / "elsewhere", "shared")
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "shared").symlink_to(real, target_is_directory=True)
    index = open_index(tmp_path / "skills")
    index.reindex()
    candidate = index.candidates()[0]
    assert candidate.status is Status.ACCEPTED
    assert candidate.real_path == real.resolve()
    assert candidate.directory == tmp_path / "skills" / "shared"


def test_symlink_loops_are_recorded_and_the_walk_goes_on(tmp_path: Path,
                                                         open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    write_skill(root, "ok")
    (root / "group").mkdir()
    (root / "group" / "back").symlink_to(root, target_is_directory=True)
    (root / "self").symlink_to(root / "self")  # a link to itself: ELOOP
    skill = write_skill(root, "looped")
    (skill / "references").mkdir()
    (skill / "references" / "again").symlink_to(skill, target_is_directory=True)
    index = open_index(root, max_depth=4)
    report = index.reindex()
    assert sorted(c.name or "" for c in index.candidates()) == ["looped", "ok"]
    assert "symlink-loop" in [p.code for p in report.problems]
    looped = by_dir(index.candidates())["looped"]
    assert looped.status is Status.ACCEPTED
    assert "symlink-loop" in codes(looped)


def test_symlinks_inside_a_skill_stay_inside(tmp_path: Path, open_index: OpenIndex) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    skill = write_skill(tmp_path / "skills", "pdf")
    (skill / "references").mkdir()
    (skill / "references" / "real.md").write_text("inside")
    (skill / "references" / "alias.md").symlink_to(skill / "references" / "real.md")
    (skill / "references" / "leak.md").symlink_to(outside)
    (skill / "etc").symlink_to(tmp_path, target_is_directory=True)
    index = open_index(tmp_path / "skills")
    index.reindex()
    with Session(index.engine) as session:
        paths = set(session.scalars(select(Resource.rel_path)))
    assert paths == {"SKILL.md", "references/real.md", "references/alias.md"}
    assert codes(index.candidates()[0]).count("symlink-escape") == 2


def test_missing_root_is_recorded_not_an_error(tmp_path: Path, open_index: OpenIndex) -> None:
    index = open_index(tmp_path / "nowhere")
    report = index.reindex()
    assert report.seen == 0
    [state] = index.roots()
    assert (state.present, state.indexed) == (False, True)


def test_a_large_skill_md_is_refused_with_a_bounded_read(tmp_path: Path,
                                                         open_index: OpenIndex) -> None:
    skill = write_skill(tmp_path / "skills", "huge")
    with (skill / "SKILL.md").open("ab") as handle:
        handle.truncate(50 * 1024 * 1024)
    index = open_index(tmp_path / "skills")
    index.reindex()
    candidate = index.candidates()[0]
    # Judged by its size alone; at this size the skill is over the skill limit as well.
    assert codes(candidate) == ["file-too-large", "skill-too-large"]
    assert str(MAX_ENTRY_BYTES) in candidate.findings[0].message


def test_exactly_the_entry_limit_is_read(tmp_path: Path, open_index: OpenIndex) -> None:
    skill = write_skill(tmp_path / "skills", "edge")
    path = skill / "SKILL.md"
    path.write_bytes(path.read_bytes().ljust(MAX_ENTRY_BYTES, b"x"))
    index = open_index(tmp_path / "skills")
    index.reindex()
    assert index.candidates()[0].status is Status.ACCEPTED


def test_unreadable_files_and_directories_are_recorded(tmp_path: Path) -> None:
    from tests.unprivileged import reindex_unprivileged

    outcome = reindex_unprivileged(tmp_path)
    assert (outcome["ok"], outcome["after"], outcome["partial"]) == ("accepted",) * 3
    assert outcome["secret_skill"] == ["unreadable"]
    assert outcome["resource_findings"] == ["unreadable"]
    assert outcome["problems"] == ["unreadable"]
