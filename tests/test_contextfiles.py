"""Standalone context files: the ancestor walk, hidden directories, the 20-level bound, hashes."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

import pytest

from skillindex.config import Settings
from skillindex.providers import context_dirs
from skillindex.query.contextfiles import find_context_files
from tests.skilltrees import make_world


def found(tmp_path: Path, cwd: Path, names: tuple[str, ...] = ("XCSH.md",)) -> list[Path]:
    env = replace(make_world(tmp_path / "w").env, cwd=cwd)
    return [f.path for f in find_context_files(context_dirs(env), names)]


def test_the_walk_goes_past_the_repository_root(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    for directory in (w.cwd, w.repo, w.home):
        (directory / "XCSH.md").write_text("rules\n", encoding="utf-8")
    (w.repo / "AGENTS.md").write_text("other tool\n", encoding="utf-8")
    with w.opened() as index:
        files = index.context_files()
    assert [(f.path, f.depth) for f in files] == [
        (w.cwd / "XCSH.md", 0), (w.repo / "XCSH.md", 2), (w.home / "XCSH.md", 3)]
    assert files[0].sha256 == hashlib.sha256(b"rules\n").hexdigest()
    assert files[0].size == 6


@pytest.mark.parametrize(("names", "expected"), [
    (("AGENTS.md",), ["a/AGENTS.md"]),
    (("CLAUDE.md", "AGENTS.md"), ["a/CLAUDE.md", "a/AGENTS.md", "CLAUDE.md"]),
    (("XCSH.md",), []),
], ids=["agents", "nearest-first-then-setting-order", "none"])
def test_context_files_setting_chooses_the_names(tmp_path: Path, names: tuple[str, ...],
                                                 expected: list[str]) -> None:
    base = tmp_path / "p"
    (base / "a").mkdir(parents=True)
    for rel in ("a/AGENTS.md", "a/CLAUDE.md", "CLAUDE.md"):
        (base / rel).write_text("x", encoding="utf-8")
    assert found(tmp_path, base / "a", names) == [base / rel for rel in expected]


def test_hidden_directories_are_skipped_but_not_what_lies_below_them(tmp_path: Path) -> None:
    inner = tmp_path / "p" / ".config" / "tool"
    inner.mkdir(parents=True)
    for directory in (inner, inner.parent, inner.parent.parent):
        (directory / "XCSH.md").write_text("x", encoding="utf-8")
    assert found(tmp_path, inner) == [inner / "XCSH.md", tmp_path / "p" / "XCSH.md"]


@pytest.mark.parametrize(("depth", "seen"), [(19, True), (20, False)],
                         ids=["last-level", "beyond"])
def test_the_walk_is_bounded_at_twenty_levels(tmp_path: Path, depth: int, seen: bool) -> None:
    cwd = tmp_path.joinpath(*[f"d{n}" for n in range(25)])
    cwd.mkdir(parents=True)
    target = cwd.parents[depth - 1] / "XCSH.md"
    target.write_text("x", encoding="utf-8")
    assert (target in found(tmp_path, cwd)) is seen


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_directories_and_fifos_of_that_name_are_ignored(tmp_path: Path) -> None:
    base = tmp_path / "p" / "a"
    (base / "XCSH.md").mkdir(parents=True)
    os.mkfifo(base.parent / "XCSH.md")
    assert found(tmp_path, base) == []


def test_a_symlinked_context_file_is_read_through_the_link(tmp_path: Path) -> None:
    base = tmp_path / "p"
    base.mkdir()
    (tmp_path / "shared.md").write_text("shared\n", encoding="utf-8")
    (base / "XCSH.md").symlink_to(tmp_path / "shared.md")
    w = make_world(tmp_path / "w")
    env = replace(w.env, cwd=base)
    [item] = find_context_files(context_dirs(env), Settings().context_files)
    assert (item.path, item.size) == (base / "XCSH.md", 7)
