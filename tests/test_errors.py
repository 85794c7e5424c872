"""The public errors: importable from the package, each with its exit code."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

import skillindex
from skillindex import errors
from skillindex.errors import ConfigError
from tests.conftest import OpenIndex, write_skill
from tests.unprivileged import NOBODY, run_unprivileged


def test_every_error_is_exported_by_the_package() -> None:
    public = {name for name, value in vars(errors).items()
              if inspect.isclass(value) and issubclass(value, errors.SkillIndexError)}
    assert "ReindexBusyError" in public
    assert public <= set(skillindex.__all__)
    for name in public:
        assert getattr(skillindex, name) is getattr(errors, name)
    from skillindex import ReindexBusyError  # the spelling the README uses
    assert ReindexBusyError.exit_code == errors.EXIT_ERROR


@pytest.fixture
def db_backend() -> str:
    return "sqlite"


def test_read_needs_no_reason(tmp_path: Path, open_index: OpenIndex) -> None:
    write_skill(tmp_path / "skills", "pdf", body="# PDF\n")
    index = open_index(tmp_path / "skills")
    index.reindex()
    assert index.read("skill://pdf").data == b"# PDF\n"
    [event] = index.audit()
    assert (event.outcome, event.reason) == ("ok", None)
    with pytest.raises(ConfigError, match="unknown outcome 'bogus'"):
        index.audit(outcome="bogus")


def test_a_read_only_folder_is_read_and_named() -> None:
    """SQLite in WAL mode writes files beside the database: in a folder its user may not write,
    the index is read read-only, and a write says that the folder must be writable."""
    outcome = run_unprivileged(_list_from_a_read_only_folder)
    assert outcome.startswith("['pdf'] cannot write the index "), outcome
    assert "its folder " in outcome and "is not writable, and SQLite keeps its -wal" in outcome


def _list_from_a_read_only_folder(base: Path) -> tuple[Path, object]:
    """Set up as root: an index in a folder only root may write; the child lists it."""
    from skillindex.api import SkillIndex
    from skillindex.config import Environment
    from tests.conftest import root_settings

    write_skill(base / "skills", "pdf")
    data = base / "data"
    data.mkdir(mode=0o755)
    env = Environment(home=base, cwd=base, config_home=base / "c", data_home=base / "d")
    settings = root_settings(base / "skills")
    db = str(data / "index.sqlite")
    with SkillIndex.open(settings, db=db, env=env) as index:
        index.reindex()
    os.chown(db, NOBODY, NOBODY)

    def child() -> str:
        with SkillIndex.open(settings, db=db, env=env, create=False) as index:
            names = [winner.name for winner in index.winners()]
            try:
                index.reindex()
            except errors.SkillIndexError as exc:
                return f"{names} {exc.message}"
        return "no error"
    return data, child


@pytest.mark.parametrize("name", ["$(touch PWNED)", "`id`", "a;b", "it's", 'say "x"'])
def test_a_command_a_message_suggests_quotes_the_name_for_a_shell(name: str) -> None:
    import shlex

    from skillindex.query.trust import Hold

    rejected = str(errors.SkillRejectedError(name, ["name-invalid"]))
    held = Hold(name, (), "0" * 64, frozenset()).reason
    for message, command in ((rejected, "explain"), (held, "trust")):
        assert f"`skillindex {command} {shlex.quote(name)}`" in message, message
