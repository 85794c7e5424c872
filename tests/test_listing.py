"""`skillindex list` through sqlite3: the rows, collisions and note of the full path, without
SQLAlchemy, and the full path wherever the stored resolution does not apply."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillindex import SkillIndex
from skillindex.cli import cli
from skillindex.cli.common import finding_codes
from skillindex.query import oneshot
from tests.conftest import write_skill
from tests.test_oneshot import IMPORTS, Setup
from tests.test_oneshot import setup as setup  # noqa: PLC0414 (the fixture)


def full_listing(setup: Setup) -> oneshot.Listing:
    """What the library says `list` prints."""
    with setup.full() as index:
        rows = [[w.name, w.candidate.scope, w.candidate.provider, str(w.candidate.precedence),
                 finding_codes(w.candidate), w.candidate.path] for w in index.iter_winners()]
        return oneshot.Listing(list(zip(*rows, strict=True)),
                               [c.name for c in index.collisions()], index.staleness())


def quick_listing(setup: Setup) -> oneshot.Listing | None:
    return oneshot.listing(str(setup.config), db=setup.db, cwd=setup.cwd, index=None)


def same(quick: oneshot.Listing | None, full: oneshot.Listing) -> None:
    assert quick is not None
    assert [list(map(str, column)) for column in quick.columns] == [
        list(map(str, column)) for column in full.columns]
    assert (quick.collisions, quick.note) == (full.collisions, full.note)


def test_the_listing_is_the_full_paths(setup: Setup) -> None:
    # A warning on one winner (a name that differs from its folder, lenient), a collision.
    write_skill(setup.root, "gamma-dir", "name: gamma\ndescription: Gamma.\n")
    setup.change('precedence = 20\n', 'precedence = 20\nvalidation = "lenient"\n')
    with setup.full() as index:
        index.reindex()
    full = full_listing(setup)
    assert full.collisions == ["alpha"] and any(code != "-" for code in full.columns[4])
    same(quick_listing(setup), full)


def test_a_root_changed_since_its_reindex_gets_the_same_note(setup: Setup) -> None:
    write_skill(setup.root, "late", "name: late\ndescription: Late.\n")
    later = time.time() + 5
    os.utime(setup.root, (later, later))
    full = full_listing(setup)
    assert full.note is not None and str(setup.root) in full.note
    same(quick_listing(setup), full)


def test_a_changed_precedence_is_shown_as_planned(setup: Setup) -> None:
    setup.change("precedence = 10", "precedence = 30")
    with setup.full() as index:
        index.reindex()
    full = full_listing(setup)
    same(quick_listing(setup), full)
    assert "30" in full.columns[3]


@pytest.mark.parametrize("change", ["quarantine", "disabled", "unindexed"])
def test_the_full_path_lists_what_is_uncommon(setup: Setup, change: str) -> None:
    if change == "quarantine":
        setup.change("precedence = 20\n", 'precedence = 20\nrisk_policy = "quarantine"\n')
    elif change == "disabled":
        setup.change("presets = false\n", "presets = false\nenabled = false\n")
    else:  # a root added to the settings: no stored resolution covers it yet
        other = setup.cwd / "other"
        write_skill(other, "delta")
        setup.config.write_text(setup.config.read_text()
                                + f'\n[[roots]]\npath = "{other}"\nprecedence = 5\n')
    assert quick_listing(setup) is None


def test_the_cli_prints_the_table_and_notes_of_the_full_path(setup: Setup,
                                                             tmp_path: Path) -> None:
    argv = ["--config", str(setup.config), "--db", setup.db, "--cwd", str(setup.cwd), "list"]
    quick = CliRunner().invoke(cli, argv, catch_exceptions=False)
    # The same index in a database file the sqlite3 path does not take (a URL with a query).
    full = CliRunner().invoke(cli, [*argv[:3], f"sqlite:///{setup.db}?timeout=15", *argv[4:]],
                              catch_exceptions=False)
    assert quick.exit_code == full.exit_code == 0
    assert quick.stdout == full.stdout and "alpha" in quick.stdout
    assert quick.stderr == full.stderr and "1 name declared by more than one" in quick.stderr


def test_list_does_not_import_sqlalchemy(setup: Setup) -> None:
    argv = ["--config", str(setup.config), "--db", setup.db, "--cwd", str(setup.cwd), "list"]
    done = subprocess.run([sys.executable, "-c", IMPORTS, *argv], capture_output=True,
                          text=True, check=False)
    code, _, loaded = done.stderr.strip().splitlines()[-1].partition(" ")
    assert code in ("0", "None"), done.stderr
    assert loaded == "", f"imported: {loaded}"
    assert "beta" in done.stdout


def test_a_fresh_index_without_a_stored_resolution_is_listed_by_the_full_path(
        tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\n')
    db = str(tmp_path / "i.sqlite")
    SkillIndex.open(str(config), db=db, cwd=tmp_path).close()
    assert oneshot.listing(str(config), db=db, cwd=tmp_path, index=None) is None
