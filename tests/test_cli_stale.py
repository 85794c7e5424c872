"""A stale or empty index says what is true: a root never indexed, skills switched off."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.skilltrees import World, make_world, write_skill


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def test_a_root_that_was_never_indexed_is_named(world: World) -> None:
    write_skill(world.home / ".claude" / "skills", "old")
    assert world.run("reindex").exit_code == 0
    write_skill(world.repo / ".claude" / "skills", "newone")
    new_root = world.repo / ".claude" / "skills"
    listed = world.run("list")
    assert listed.exit_code == 0
    assert f"1 root of this directory changed since the last reindex or never had one " \
           f"({new_root}); `skillindex reindex` brings the index up to date" in listed.stderr
    catalog = world.run("catalog")
    assert str(new_root) in catalog.stderr
    read = world.run("read", "skill://newone")
    assert read.exit_code == 3
    assert read.stderr.startswith("skillindex: error: skill not found: newone; 1 root of this "
                                  "directory changed since the last reindex")
    assert world.run("--json", "list").stderr == ""
    assert world.run("reindex").exit_code == 0
    assert world.run("list").stderr == ""
    assert "never had one" not in world.run("read", "skill://nothing").stderr


def test_a_skill_added_to_an_indexed_root_is_noticed(world: World) -> None:
    root = world.home / ".claude" / "skills"
    write_skill(root, "old")
    assert world.run("reindex").exit_code == 0
    write_skill(root, "newone")
    later = os.stat(root).st_mtime + 5  # past the run's start, whatever the clock's grain
    os.utime(root, (later, later))
    assert str(root) in world.run("list").stderr


def test_skills_switched_off_say_so(world: World) -> None:
    write_skill(world.home / ".claude" / "skills", "pdf")
    config = "[skills]\nenabled = false\n"
    assert world.run("reindex", config=config).exit_code == 0
    listed = world.run("list", config=config)
    assert listed.stdout.startswith("no skills in the catalog: skills are switched off "
                                    "([skills] enabled = false in ")
    assert json.loads(world.run("--json", "list", config=config).stdout) == []
    assert "switched off" in world.run("read", "skill://pdf", config=config).stderr
