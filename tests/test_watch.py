"""The watcher: edits become visible without a scheduled reindex; bursts are one pass.

Every wait here is bounded (a few seconds at most) and polls for the outcome instead of
sleeping a fixed time, so a loaded machine makes the tests slower, not red.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import Environment
from skillindex.watch import Pass, relevant, watch
from tests.conftest import isolate_cli, root_settings, write_skill

LIMIT = 20.0  # seconds; a pass normally takes a fraction of one


@pytest.fixture
def db_backend() -> str:
    return "sqlite"


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {LIMIT} s: {what}")
        time.sleep(0.02)


class Watching:
    def __init__(self, index: SkillIndex, **options: object) -> None:
        self.passes: list[Pass] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=watch, args=(index,),
            kwargs={"stop": self.stop, "on_pass": self.passes.append, **options})

    def changes(self) -> list[Pass]:
        return [p for p in self.passes if not p.full]


@pytest.fixture
def watching(tmp_path: Path, env: Environment) -> Iterator[Callable[..., Watching]]:
    started: list[Watching] = []

    def start(*roots: Path, **options: object) -> Watching:
        index = SkillIndex.open(root_settings(*roots), db=str(tmp_path / "w.sqlite"), env=env)
        run = Watching(index, **options)
        run.thread.start()
        started.append(run)
        until(lambda: len(run.passes) >= 1, "the first full reindex")
        return run

    yield start
    for run in started:
        run.stop.set()
        run.thread.join(LIMIT)
        assert not run.thread.is_alive()


def test_an_edit_reaches_the_catalog(tmp_path: Path, env: Environment,
                                     watching: Callable[..., Watching]) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Old text.")
    run = watching(root)
    with SkillIndex.open(root_settings(root), db=str(tmp_path / "w.sqlite"), env=env) as reader:
        assert "Old text." in reader.catalog().text
        write_skill(root, "pdf", description="New text.")
        until(lambda: "New text." in reader.catalog().text, "the edit in the catalog")
        write_skill(root, "docx")
        until(lambda: "docx" in reader.catalog().text, "the new skill in the catalog")
    assert all(p.report is not None for p in run.passes)
    assert all(p.report.seen <= 1 for p in run.changes() if p.report)  # targeted passes


def test_a_burst_of_files_is_one_pass(tmp_path: Path, env: Environment,
                                      watching: Callable[..., Watching]) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    run = watching(root, quiet_ms=1000, max_wait_ms=10_000)
    skill = write_skill(root, "bulk")
    (skill / "references").mkdir()
    for number in range(1000):
        (skill / "references" / f"f{number}.md").write_text(f"file {number}\n")
    until(lambda: bool(run.changes()), "a pass for the burst")
    time.sleep(1.5)  # longer than the quiet window: a second pass would have started
    [burst] = run.changes()
    assert burst.report is not None and burst.report.added == 1


def test_hidden_entries_and_paths_elsewhere_are_ignored() -> None:
    roots = ["/r/skills"]
    assert relevant(["/r/skills/pdf/SKILL.md", "/r/skills/pdf/.git/index",
                     "/r/skills/.cache/x", "/elsewhere/y", "/r"], roots) == [
        "/r", "/r/skills/pdf/SKILL.md"]


def test_a_missing_extra_is_one_line_naming_the_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_cli(tmp_path, monkeypatch, tmp_path / "skills")
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # as if it were not installed
    result = CliRunner().invoke(cli, ["watch"])
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert "pip install 'skillindex[watch]'" in line


def test_ctrl_c_stops_the_command_cleanly(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\n')
    environ = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    process = subprocess.Popen(
        [sys.executable, "-m", "skillindex", "--config", str(config), "--db",
         str(tmp_path / "c.sqlite"), "watch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=environ)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the first full reindex is done
        assert "full reindex" in line
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=LIMIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "stopped"


HOLDER = """
import sys, time
from skillindex.store.engine import make_engine
from skillindex.store.lock import reindex_lock
with reindex_lock(make_engine(sys.argv[1]), "default", wait=False, timeout=0):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_failing_pass_is_retried_with_backoff_until_it_succeeds(
        tmp_path: Path, env: Environment) -> None:
    """Another process holds the index's reindex lock longer than reindex_timeout: every pass
    fails. The watch retries by itself, each wait twice the one before, and succeeds once
    the holder is gone, without any file event."""
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    db = tmp_path / "w.sqlite"
    settings = replace(root_settings(root), reindex_timeout=0.05)
    SkillIndex.open(settings, db=str(db), env=env).close()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, f"sqlite:///{db}"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    seen: list[tuple[float, Pass]] = []
    stop = threading.Event()
    with SkillIndex.open(settings, db=str(db), env=env) as index:
        thread = threading.Thread(target=watch, args=(index,), kwargs={
            "stop": stop, "on_pass": lambda done: seen.append((time.monotonic(), done)),
            "retry_first": 0.1, "retry_max": 0.4})
        thread.start()
        try:
            until(lambda: len(seen) >= 5, "five failed passes")
            holder.kill()
            holder.wait()
            until(lambda: seen[-1][1].report is not None, "a pass that succeeds")
        finally:
            stop.set()
            thread.join(LIMIT)
            holder.kill()
            holder.wait()
            holder.stdout.close()
    failed = [(at, done) for at, done in seen if done.report is None]
    assert all("is still being reindexed by pid" in str(done.error) for _, done in failed)
    assert [done.retry_in for _, done in failed[:5]] == [0.1, 0.2, 0.4, 0.4, 0.4]
    for (at, done), (then, _) in pairwise(failed):
        assert done.retry_in is not None and then - at >= done.retry_in
    assert all(done.full for _, done in seen)
    assert not thread.is_alive()
