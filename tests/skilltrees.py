"""Builders for the discovery-policy tests: a home, a repository, skills and settings on disk."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner, Result

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import Environment, Settings


def write_skill(root: Path, directory: str, *, name: str | None = None,
                description: str | None = "Does a thing.", extra: str = "",
                body: str = "# Body\n") -> Path:
    """<root>/<directory>/SKILL.md with a name (default: the directory's) and a description."""
    skill = root / directory
    skill.mkdir(parents=True, exist_ok=True)
    lines = [f"name: {name or Path(directory).name}"]
    if description is not None:
        lines.append(f"description: {description}")
    if extra:
        lines.append(extra.rstrip("\n"))
    text = "---\n" + "\n".join(lines) + "\n---\n" + body
    (skill / "SKILL.md").write_text(text, encoding="utf-8")
    return skill / "SKILL.md"


@dataclass(frozen=True, slots=True)
class World:
    """A home directory, a repository inside it and a working directory inside that."""

    tmp: Path
    home: Path
    repo: Path
    cwd: Path

    @property
    def env(self) -> Environment:
        return Environment(home=self.home, cwd=self.cwd, config_home=self.home / ".config",
                           data_home=self.home / ".local" / "share")

    @property
    def db(self) -> str:
        return str(self.tmp / "index.sqlite")

    def index(self, settings: Settings | None = None, *,
              env: Environment | None = None) -> SkillIndex:
        """A freshly reindexed SkillIndex on a real SQLite file."""
        index = SkillIndex.open(settings or Settings(), db=self.db, env=env or self.env)
        index.reindex()
        return index

    @contextmanager
    def opened(self, settings: Settings | None = None, *,
               env: Environment | None = None) -> Iterator[SkillIndex]:
        index = self.index(settings, env=env)
        try:
            yield index
        finally:
            index.close()

    def run(self, *args: str, config: str = "") -> Result:
        """The command line, with this world's home and a settings file holding `config`."""
        settings = self.tmp / "settings.toml"
        settings.write_text(config, encoding="utf-8")
        runner = CliRunner()
        environ: dict[str, str | None] = {
            "HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"), "CODEX_HOME": None,
            "SKILLINDEX_CONFIG": None, "SKILLINDEX_DB": None}
        return runner.invoke(cli, ["--config", str(settings), "--db", self.db, "--cwd",
                                   str(self.cwd), *args], env=environ, catch_exceptions=False)


def make_world(tmp_path: Path, *, subdir: str = "src/app") -> World:
    """home/ holding repo/ (a `.git` directory) and cwd = repo/<subdir>."""
    home = tmp_path / "home"
    repo = home / "repo"
    cwd = repo / subdir if subdir else repo
    (repo / ".git").mkdir(parents=True)
    cwd.mkdir(parents=True, exist_ok=True)
    return World(tmp_path, home, repo, cwd)


def symlink(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link, target_is_directory=True)
