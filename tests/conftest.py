"""Shared fixtures: real skill trees in tmp_path, real databases on both backends, an isolated
environment."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from skillindex.api import SkillIndex
from skillindex.config import Environment, RootConfig, Settings
from skillindex.model import Scope, Validation

if TYPE_CHECKING:
    from tests.pgserver import PostgresServer

BACKENDS = ("sqlite", "postgresql")


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


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session, started on first use from the server binaries.

    Without the binaries the PostgreSQL cases are skipped, with the reason, except under CI
    (the CI variable set), where they fail: a green CI run must have run them.
    """
    try:
        from tests import pgserver
    except ImportError as exc:  # psycopg, from the test extra
        _no_server(f"cannot import the PostgreSQL driver: {exc}")
    try:
        server = pgserver.start_server()
    except pgserver.ServerUnavailable as exc:
        _no_server(str(exc))
    yield server
    server.stop()


def _no_server(reason: str) -> NoReturn:
    reason = f"no PostgreSQL server for the tests: {reason}"
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so these tests may not be skipped)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(params=BACKENDS)
def db_backend(request: pytest.FixtureRequest) -> str:
    """The backend a test runs on; a test using `db_url`, `new_db` or `open_index` runs on both.

    A module that must stay on SQLite overrides it: `@pytest.fixture def db_backend() -> str:
    return "sqlite"`.
    """
    return str(request.param)


NewDatabase = Callable[[], str]


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite index migrated to head once a session, copied for each test that needs one."""
    path = tmp_path_factory.mktemp("template") / "index.sqlite"
    SkillIndex.open(Settings(presets=False), db=str(path)).close()
    return path


@pytest.fixture(scope="session")
def pg_template(pg_server: PostgresServer) -> str:
    """A PostgreSQL database migrated to head once a session, the template of test databases."""
    url = pg_server.create_database("template")
    SkillIndex.open(Settings(presets=False), db=url).close()
    return url.rsplit("/", 1)[1]


@pytest.fixture
def new_db(db_backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> NewDatabase:
    """Makes fresh databases on this test's backend, migrated to head and empty, and returns
    their URLs. A test marked `unmigrated` gets databases without any schema (no file at all
    on SQLite), for what migrating or creating them does."""
    numbers = itertools.count()
    migrated = request.node.get_closest_marker("unmigrated") is None

    def make() -> str:
        number = next(numbers)
        if db_backend == "sqlite":
            path = tmp_path / ("index.sqlite" if number == 0 else f"index-{number}.sqlite")
            if migrated:
                shutil.copy(request.getfixturevalue("sqlite_template"), path)
            return f"sqlite:///{path}"
        server: PostgresServer = request.getfixturevalue("pg_server")
        if migrated:
            return server.create_database(template=request.getfixturevalue("pg_template"))
        return server.create_database()

    return make


@pytest.fixture
def db_url(new_db: NewDatabase) -> str:
    """A fresh, empty database on this test's backend (SQLite file or PostgreSQL database)."""
    return new_db()


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> str:
    """A fresh, empty PostgreSQL database, for tests about PostgreSQL only."""
    return pg_server.create_database()


OpenIndex = Callable[..., SkillIndex]


@pytest.fixture
def open_index(db_url: str, env: Environment) -> Iterator[OpenIndex]:
    """Opens SkillIndexes over explicit roots; by default all share this test's `db_url`."""
    opened: list[SkillIndex] = []

    def factory(*roots: Path, db: str | None = None, index: str | None = None,
                **options: object) -> SkillIndex:
        settings = root_settings(*roots, **options)  # type: ignore[arg-type]
        opened_index = SkillIndex.open(settings, db=db or db_url, env=env, index=index)
        opened.append(opened_index)
        return opened_index

    yield factory
    for each in opened:
        each.close()


def is_root() -> bool:
    return os.geteuid() == 0


def isolate_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """A settings file naming `root` alone, a home of its own and a SQLite file, for the CLI."""
    home = tmp_path / "home"
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\n'
                      'precedence = 10\n')
    for name, value in {"HOME": home, "XDG_CONFIG_HOME": home / ".config",
                        "XDG_DATA_HOME": home / ".data", "SKILLINDEX_CONFIG": config,
                        "SKILLINDEX_DB": tmp_path / "cli.sqlite"}.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.chdir(tmp_path)


def isolate_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home of its own under `tmp_path`, and no settings file or database from the
    environment."""
    home = tmp_path / "home"
    for name, value in {"HOME": home, "XDG_CONFIG_HOME": home / ".config",
                        "XDG_DATA_HOME": home / ".data"}.items():
        monkeypatch.setenv(name, str(value))
    for name in ("SKILLINDEX_CONFIG", "SKILLINDEX_DB"):
        monkeypatch.delenv(name, raising=False)


def two_roots(config: Path, high: Path, low: Path, *, high_options: str = "") -> Path:
    """A settings file without presets naming `high` (precedence 20) above `low` (10)."""
    config.write_text("[skills]\npresets = false\n\n"
                      f'[[roots]]\npath = "{high}"\nprecedence = 20\n{high_options}\n'
                      f'[[roots]]\npath = "{low}"\nprecedence = 10\n')
    return config
