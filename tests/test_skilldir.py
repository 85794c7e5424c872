"""Hostile skill trees: names, links, sizes and depths a reindex must record and get past."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from skillindex.api import SkillIndex
from skillindex.config import Environment, Settings
from skillindex.model import Status
from skillindex.store.models import Resource
from tests.conftest import root_settings, write_skill

Opener = Callable[..., SkillIndex]


@pytest.fixture
def open_with(db_url: str, env: Environment) -> Iterator[Opener]:
    """A SkillIndex over one root with any [skills] settings changed."""
    opened: list[SkillIndex] = []

    def factory(root: Path, **changes: object) -> SkillIndex:
        settings = replace(root_settings(root), **changes)  # type: ignore[arg-type]
        index = SkillIndex.open(settings, db=db_url, env=env)
        opened.append(index)
        return index

    yield factory
    for index in opened:
        index.close()


def manifest(index: SkillIndex) -> dict[str, Resource]:
    with Session(index.engine) as session:
        return {row.rel_path: row for row in session.scalars(select(Resource))}


def codes(index: SkillIndex, name: str) -> list[str]:
    [candidate] = [c for c in index.candidates() if c.directory.name == name]
    return [f.code for f in candidate.findings]


# ------------------------------------------------------------------------------ names

def test_a_folder_name_that_is_not_utf8_is_recorded_and_the_rest_indexed(
        tmp_path: Path, open_with: Opener) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good")
    bad = os.path.join(os.fsencode(root), b"bad\xff")
    os.mkdir(bad)
    with open(os.path.join(bad, b"SKILL.md"), "wb") as handle:
        handle.write(b"---\nname: bad\ndescription: d\n---\n")
    index = open_with(root)
    report = index.reindex()
    assert [c.name for c in index.candidates()] == ["good"]
    [problem] = [p for p in report.problems if p.code == "name-not-utf8"]
    assert str(problem.path) == f"{root}/bad\\xff"
    assert index.reindex().unchanged == 1  # and the next run is as quiet as any other
    assert index.verify().ok


def test_a_file_name_that_is_not_utf8_inside_a_skill_is_a_finding(
        tmp_path: Path, open_with: Opener) -> None:
    skill = write_skill(tmp_path / "skills", "pdf")
    (skill / "references").mkdir()
    with open(os.path.join(os.fsencode(skill), b"references", b"r\xe9sum\xe9.md"), "wb") as out:
        out.write(b"x")
    index = open_with(tmp_path / "skills")
    index.reindex()
    [candidate] = index.candidates()
    assert candidate.status is Status.ACCEPTED
    [finding] = [f for f in candidate.findings if f.code == "name-not-utf8"]
    assert "references/r\\xe9sum\\xe9.md" in finding.message
    assert set(manifest(index)) == {"SKILL.md"}
    assert index.verify().ok


# ------------------------------------------------------------------------------ depth

def test_a_chain_of_1500_empty_folders_does_not_overflow_the_stack(
        tmp_path: Path, open_with: Opener) -> None:
    root = tmp_path / "s"
    write_skill(root, "top")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1500):  # os.makedirs would itself recurse this deep
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)
    index = open_with(root, roots=(replace(root_settings(root).roots[0], max_depth=5000),))
    try:
        report = index.reindex()
        assert [c.name for c in index.candidates()] == ["top"]
        assert report.seen == 1
    finally:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        for depth in range(1500, 0, -1):  # pytest's own clean-up would recurse too
            os.rmdir("/".join(["d"] * depth), dir_fd=fd)
        os.close(fd)


# ------------------------------------------------------------------------------ sizes

def test_a_huge_sparse_file_is_recorded_by_its_size_and_never_read(
        tmp_path: Path, open_with: Opener) -> None:
    skill = write_skill(tmp_path / "skills", "big")
    (skill / "assets").mkdir()
    with (skill / "assets" / "disk.img").open("wb") as handle:
        handle.truncate(8 << 30)  # 8 GiB, sparse
    index = open_with(tmp_path / "skills", max_skill_bytes=16 << 30)
    report = index.reindex()
    assert report.files_read == 1  # SKILL.md alone
    row = manifest(index)["assets/disk.img"]
    assert (row.size, row.xxh3, row.sha256) == (8 << 30, None, None)
    [candidate] = index.candidates()
    assert candidate.status is Status.ACCEPTED
    assert "file-too-large" in codes(index, "big")
    assert index.verify().ok


def test_a_skill_over_the_byte_limit_is_rejected_unread(tmp_path: Path,
                                                        open_with: Opener) -> None:
    skill = write_skill(tmp_path / "skills", "big")
    with (skill / "disk.img").open("wb") as handle:
        handle.truncate(8 << 30)
    index = open_with(tmp_path / "skills")
    report = index.reindex()
    assert report.files_read == 0
    assert index.candidates()[0].status is Status.REJECTED
    assert codes(index, "big")[0] == "skill-too-large"
    assert "file-too-large" in codes(index, "big")
    assert index.verify().ok


@pytest.mark.parametrize(("files", "rejected"), [(512, False), (513, True)],
                         ids=["at-the-limit", "one-over"])
def test_a_skill_over_512_files_is_rejected(tmp_path: Path, open_with: Opener, files: int,
                                            rejected: bool) -> None:
    skill = write_skill(tmp_path / "skills", "many")
    for number in range(files - 1):  # SKILL.md is one of them
        (skill / f"f{number}.txt").write_text("x")
    index = open_with(tmp_path / "skills")
    report = index.reindex()
    assert (index.candidates()[0].status is Status.REJECTED) is rejected
    assert ("skill-too-large" in codes(index, "many")) is rejected
    assert report.files_read == (0 if rejected else files)


def test_the_limits_are_settings(tmp_path: Path, open_with: Opener) -> None:
    skill = write_skill(tmp_path / "skills", "small")
    (skill / "a.txt").write_bytes(b"x" * 100)
    index = open_with(tmp_path / "skills", max_file_bytes=50)
    index.reindex()
    assert "file-too-large" in codes(index, "small")
    assert manifest(index)["a.txt"].sha256 is None
    strict = open_with(tmp_path / "skills", max_skill_files=1, index_name="strict")
    strict.reindex()
    assert codes(strict, "small")[0] == "skill-too-large"


# ------------------------------------------------------------------------------ links

def test_a_hard_linked_file_gets_a_warning(tmp_path: Path, open_with: Opener) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    skill = write_skill(tmp_path / "skills", "pdf")
    os.link(outside, skill / "notes.txt")
    index = open_with(tmp_path / "skills")
    index.reindex()
    assert index.candidates()[0].status is Status.ACCEPTED
    assert "hard-link" in codes(index, "pdf")


def test_special_files_are_never_opened(tmp_path: Path, open_with: Opener) -> None:
    skill = write_skill(tmp_path / "skills", "pdf")
    os.mkfifo(skill / "pipe")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(skill / "sock"))
        index = open_with(tmp_path / "skills")
        index.reindex()
    assert codes(index, "pdf").count("special-file") == 2
    assert set(manifest(index)) == {"SKILL.md"}


def test_a_settings_default_is_the_mcp_limit() -> None:
    assert (Settings().max_file_bytes, Settings().max_skill_files,
            Settings().max_skill_bytes) == (16 << 20, 512, 16 << 20)
