"""`--json list`, `--json candidates` and `--json rejections` through sqlite3: the bytes the
full path prints, without SQLAlchemy, and the full path (on both backends) wherever the
sqlite3 path does not apply."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from skillindex import SkillIndex
from skillindex.cli import cli
from skillindex.model import Status
from skillindex.query import oneshot, resolve
from tests.conftest import isolate_home, write_skill
from tests.test_oneshot import IMPORTS

COMMANDS = [["list"], ["candidates"], ["rejections"], ["candidates", "--code", "name-mismatch"],
            ["candidates", "--limit", "3"], ["rejections", "--limit", "0"]]


@dataclass
class Tree:
    config: Path
    db: str
    cwd: Path

    def argv(self, db: str | None = None) -> list[str]:
        return ["--config", str(self.config), "--db", db or self.db, "--cwd", str(self.cwd)]

    def printed(self, command: list[str], db: str | None = None) -> bytes:
        done = CliRunner().invoke(cli, [*self.argv(db), "--json", *command],
                                  catch_exceptions=False)
        assert done.exit_code == 0, done.output
        return done.stdout_bytes

    def full(self, command: list[str]) -> bytes:
        """The same index through a URL the sqlite3 path does not take (it has a query)."""
        return self.printed(command, f"sqlite:///{self.db}?timeout=15")


def build(tmp_path: Path, db: str, policy: str = "precedence") -> Tree:
    """Two roots that repeat names, a skill folder linked from one into the other, warnings,
    rejected skills, other hosts' fields (an argument-hint), a collision, characters a
    terminal must not receive, a skill kept from the model, and a third root, precedence
    between them, never indexed."""
    high, low = tmp_path / "high", tmp_path / "low"
    write_skill(high, "alpha", "name: alpha\ndescription: The high alpha.\n"
                "argument-hint: <file> [mode]\n")
    write_skill(high, "gamma-dir", "name: gamma\ndescription: Gamma \u202e\x7f \u00e9.\n")
    write_skill(high, "broken", "name: [unclosed\n")
    write_skill(high, "manual", "name: manual\ndescription: By hand.\n"
                "disable-model-invocation: true\nwhen_to_use: Rarely.\n")
    write_skill(low, "alpha", "name: alpha\ndescription: The low alpha.\n")
    write_skill(low, "beta", "name: beta\ndescription: Beta.\nargument-hint: [n]\n")
    write_skill(low, "nameless", "description: No name.\n")
    write_skill(low, "Bad_Name", "name: Bad_Name\ndescription: Invalid.\n")
    (low / "linked").symlink_to(high / "gamma-dir", target_is_directory=True)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[skills]\npresets = false\ncollision_policy = "{policy}"\n\n'
        f'[[roots]]\npath = "{high}"\nprecedence = 20\nvalidation = "lenient"\n\n'
        f'[[roots]]\npath = "{tmp_path / "later"}"\nprecedence = 15\n\n'
        f'[[roots]]\npath = "{low}"\nprecedence = 10\nvalidation = "strict"\n')
    tree = Tree(config, db, tmp_path)
    with SkillIndex.open(str(config), db=db, cwd=tmp_path) as index:
        index.reindex()
    return tree


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tree:
    isolate_home(tmp_path, monkeypatch)
    return build(tmp_path, str(tmp_path / "index.sqlite"))


def entries(tree: Tree, command: str) -> list[dict[str, object]] | None:
    config = str(tree.config)
    opened = (oneshot.winner_entries(config, db=tree.db, cwd=tree.cwd, index=None)
              if command == "list"
              else oneshot.candidate_entries(config, db=tree.db, cwd=tree.cwd, index=None))
    with opened as found:
        return None if found is None else list(found)


def test_the_tree_has_what_the_listings_must_show(tree: Tree) -> None:
    listed = json.loads(tree.full(["list"]))
    candidates = json.loads(tree.full(["candidates"]))
    assert [entry["name"] for entry in listed].count("alpha") == 1
    assert any(entry["collision"] for entry in listed)
    assert {entry.get("argument_hint") for entry in listed} >= {"<file> [mode]", "[n]"}
    assert any(entry["findings"] for entry in listed)
    assert not any(entry["model_invocation"] for entry in listed if entry["name"] == "manual")
    assert sum(entry["status"] == "rejected" for entry in candidates) >= 2
    assert any(str(entry["path"]).endswith("linked/SKILL.md") for entry in candidates)
    assert len(listed) < len(candidates)
    assert entries(tree, "list") is not None and entries(tree, "candidates") is not None


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_the_sqlite3_path_prints_the_bytes_of_the_full_path(tree: Tree,
                                                             command: list[str]) -> None:
    quick = tree.printed(command)
    assert quick == tree.full(command)
    if command in (["list"], ["candidates"]):
        assert b"\\u202e" in quick and "\u202e".encode() not in quick


@pytest.mark.parametrize("policy", ["reject-ambiguous", "qualify", "keep-all"])
def test_every_collision_policy_is_listed_as_the_full_path_lists_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    isolate_home(tmp_path, monkeypatch)
    tree = build(tmp_path, str(tmp_path / "index.sqlite"), policy)
    assert entries(tree, "list") is not None
    assert tree.printed(["list"]) == tree.full(["list"])


def test_a_changed_precedence_is_shown_as_planned(tree: Tree) -> None:
    tree.config.write_text(tree.config.read_text().replace("precedence = 20",
                                                           "precedence = 30"))
    with SkillIndex.open(str(tree.config), db=tree.db, cwd=tree.cwd) as index:
        index.reindex()
    for command in (["list"], ["candidates"]):
        quick = tree.printed(command)
        assert quick == tree.full(command) and b'"precedence": 30' in quick


@pytest.mark.parametrize("change", ["quarantine", "disabled", "unresolved"])
def test_the_full_path_prints_what_is_uncommon(tree: Tree, change: str) -> None:
    text = tree.config.read_text()
    if change == "quarantine":
        tree.config.write_text(text.replace("precedence = 20\n",
                                            'precedence = 20\nrisk_policy = "quarantine"\n'))
    elif change == "disabled":
        tree.config.write_text(text.replace("presets = false\n",
                                            "presets = false\nenabled = false\n"))
    else:  # the policy changed: no stored resolution is named by these settings yet
        tree.config.write_text(text.replace('"precedence"', '"keep-all"'))
    assert entries(tree, "list") is None
    if change == "disabled":
        assert entries(tree, "candidates") is None
    else:  # the candidates do not depend on a resolution
        assert entries(tree, "candidates") is not None
        assert tree.printed(["candidates"]) == tree.full(["candidates"])
    assert tree.printed(["list"]) == tree.full(["list"])


@pytest.mark.parametrize("command", [["list"], ["candidates"], ["rejections"]], ids=" ".join)
def test_the_json_listings_do_not_import_sqlalchemy(tree: Tree, command: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", IMPORTS, *tree.argv(), "--json", *command],
                          capture_output=True, text=True, check=False)
    code, _, loaded = done.stderr.strip().splitlines()[-1].partition(" ")
    assert code in ("0", "None"), done.stderr
    assert loaded == "", f"imported: {loaded}"
    assert json.loads(done.stdout)


@pytest.fixture
def db_backend() -> str:
    return "postgresql"


def test_on_postgresql_the_full_path_prints_what_sqlite_prints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    isolate_home(tmp_path, monkeypatch)
    tree = build(tmp_path, db_url)
    on_sqlite = str(tmp_path / "index.sqlite")
    with SkillIndex.open(str(tree.config), db=on_sqlite, cwd=tree.cwd) as index:
        index.reindex()
    assert tree.printed(["list"]) == tree.printed(["list"], on_sqlite)
    for command in (["candidates"], ["rejections"]):
        # Paths in the database's collation: the same entries, perhaps in another order.
        on_pg = json.loads(tree.printed(command))
        assert sorted(on_pg, key=str) == sorted(json.loads(tree.printed(command, on_sqlite)),
                                                key=str)


def pages_agree(config: Path, db: str, cwd: Path) -> None:
    """The library's candidates, read a row or two at a time, are those read in one go."""
    with SkillIndex.open(str(config), db=db, cwd=cwd, create=False) as index:
        whole = list(index.iter_candidates())
        assert len(whole) > 5
        for page in (1, 2, 3):
            assert list(index.iter_candidates(page=page)) == whole
            assert list(index.iter_candidates(page=page, limit=4)) == whole[:4]
        rejected = [c for c in whole if c.status.value == "rejected"]
        assert list(index.iter_candidates(page=1, status=Status.REJECTED)) == rejected


def test_the_library_reads_the_candidates_a_page_at_a_time(tree: Tree) -> None:
    pages_agree(tree.config, tree.db, tree.cwd)


def test_on_postgresql_the_candidates_are_read_a_page_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    isolate_home(tmp_path, monkeypatch)
    tree = build(tmp_path, db_url)
    pages_agree(tree.config, db_url, tree.cwd)


PATH_PARTS = st.sampled_from(["", ".", "..", "a", "skill", "b c", "é", "x.md"])


@given(st.lists(st.lists(PATH_PARTS, max_size=5).map("/".join), max_size=4),
       st.lists(st.lists(PATH_PARTS, max_size=5).map("/".join), max_size=3),
       st.sampled_from(["", "/", "//", "///"]))
def test_a_stored_collision_is_listed_as_its_paths_would_print(
        paths: list[str], kept: list[str], lead: str) -> None:
    """The sqlite3 path's collision (no Path made for a path that needs none) is what the
    full path prints of it, for any path text a database may hold."""
    text = json.dumps({"name": "pdf", "policy": "precedence",
                       "paths": [lead + path for path in paths],
                       "kept": [lead + path for path in kept]})
    found = resolve.stored_collision(text)
    assert found is not None
    assert resolve.stored_collision_dict(text) == found.as_dict()
