"""Shared fixtures: real skill trees in tmp_path, real SQLite files, an isolated environment."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skillindex.api import SkillIndex
from skillindex.config import Environment, RootConfig, Settings
from skillindex.model import Scope, Validation


def write_skill(root: Path, directory: str, frontmatter: str | None = None, body: str = "# Body\n",
                *, name: str | None = None, description: str = "Does a thing.") -> Path:
    """Create <root>/<directory>/SKILL.md; the frontmatter defaults to a valid one."""
    skill = root / directory
    skill.mkdir(parents=True, exist_ok=True)
    if frontmatter is None:
        frontmatter = f"name: {name or Path(directory).name}\ndescription: {description}\n"
    (skill / "SKILL.md").write_text(f"---\n{frontmatter}---\n{body}", encoding="utf-8")
    return skill


@pytest.fixture
def env(tmp_path: Path) -> Environment:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return Environment(home=home, cwd=work, config_home=home / ".config",
                       data_home=home / ".local" / "share")


def root_settings(*roots: Path, validation: Validation = Validation.STRICT,
                  require_description: bool = True, max_depth: int = 1) -> Settings:
    """Settings with only explicit roots, highest precedence first."""
    return Settings(presets=False, roots=tuple(
        RootConfig(path=str(root), scope=Scope.USER, provider="test",
                   precedence=100 - number, max_depth=max_depth,
                   require_description=require_description, validation=validation)
        for number, root in enumerate(roots)))


OpenIndex = Callable[..., SkillIndex]


@pytest.fixture
def open_index(tmp_path: Path, env: Environment) -> Iterator[OpenIndex]:
    opened: list[SkillIndex] = []

    def factory(*roots: Path, db: Path | None = None, **options: object) -> SkillIndex:
        settings = root_settings(*roots, **options)  # type: ignore[arg-type]
        index = SkillIndex.open(settings, db=str(db or tmp_path / "index.sqlite"), env=env)
        opened.append(index)
        return index

    yield factory
    for index in opened:
        index.close()


def is_root() -> bool:
    return os.geteuid() == 0
