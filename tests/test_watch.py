"""The watcher: edits become visible without a scheduled reindex; bursts are one pass.

Every wait here is bounded and polls for the outcome instead of sleeping a fixed time. The
bound follows the machine (`patience`: longer in proportion to the load beyond its cores),
so a loaded machine makes the tests slower, not red.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import Environment, Settings
from skillindex.extras import install_command
from skillindex.watch import Pass, relevant, watch
from tests.conftest import isolate_cli, root_settings, write_skill

LIMIT = 20.0  # seconds on an idle machine; a pass normally takes a fraction of one


@pytest.fixture
def db_backend() -> str:
    return "sqlite"


def patience() -> float:
    """LIMIT, stretched by how many more runnable processes the machine has than cores: at a
    load of 25 on 2 cores each process gets a twelfth of the time it would alone."""
    return LIMIT * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def until(condition: Callable[[], bool], what: str) -> None:
    started = time.monotonic()
    while not condition():
        waited = time.monotonic() - started
        if waited > patience():  # asked again each time: the load changes while it waits
            pytest.fail(f"not within {waited:.1f} s (load {os.getloadavg()[0]:.1f}): {what}")
        time.sleep(0.05)


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

    def start(*roots: Path, settings: Settings | None = None, **options: object) -> Watching:
        index = SkillIndex.open(settings or root_settings(*roots), db=str(tmp_path / "w.sqlite"),
                                env=env)
        run = Watching(index, **options)
        run.thread.start()
        started.append(run)
        until(lambda: len(run.passes) >= 1, "the first full reindex")
        return run

    yield start
    for run in started:
        run.stop.set()
        run.thread.join(patience())
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


def catalog_of(settings: Settings, tmp_path: Path, env: Environment) -> str:
    """The catalog as a host that starts now sees it (its roots planned now)."""
    with SkillIndex.open(settings, db=str(tmp_path / "w.sqlite"), env=env) as reader:
        return reader.catalog(max_chars=10**6).text


def written_and_seen(root: Path, name: str, text: str, settings: Settings, tmp_path: Path,
                     env: Environment, what: str) -> None:
    """Write a skill whose description is `text`, and wait until the catalog shows it."""
    write_skill(root, name, description=text)
    until(lambda: text in catalog_of(settings, tmp_path, env), what)


@contextmanager
def watched_with(settings: Settings, tmp_path: Path, env: Environment,
                 on_pass: Callable[[Pass], None], **options: object) -> Iterator[None]:
    """A watch in a thread that reports each pass to `on_pass`, stopped on the way out."""
    stop = threading.Event()
    index = SkillIndex.open(settings, db=str(tmp_path / "w.sqlite"), env=env)
    thread = threading.Thread(target=watch, args=(index,),
                              kwargs={"stop": stop, "on_pass": on_pass, **options})
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(patience())
        index.close()
    assert not thread.is_alive()


def test_a_root_created_after_the_start_is_watched(tmp_path: Path, env: Environment,
                                                   watching: Callable[..., Watching]) -> None:
    # The project has no .agents/skills when the watch starts; nothing else changes, so only
    # the watch can bring the new skill (the next full pass is ten minutes away).
    root = env.cwd / ".agents" / "skills"
    settings = root_settings(root)
    run = watching(root)
    written_and_seen(root, "new", "Written after the start.", settings, tmp_path, env,
                     "the skill of a root created after the start")
    written_and_seen(root, "new", "Edited once it is watched.", settings, tmp_path, env,
                     "an edit under the new root")
    assert run.thread.is_alive()


def test_a_root_removed_and_created_again_is_watched_again(
        tmp_path: Path, env: Environment, watching: Callable[..., Watching]) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Before removal.")
    settings = root_settings(root)
    watching(root)
    shutil.rmtree(root)
    until(lambda: "Before removal." not in catalog_of(settings, tmp_path, env),
          "the removed root's skill gone")
    written_and_seen(root, "docx", "After it came back.", settings, tmp_path, env,
                     "the skill of the root created again")
    written_and_seen(root, "docx", "Edited after it came back.", settings, tmp_path, env,
                     "an edit under the root created again")


def test_what_is_written_into_a_root_that_just_appeared_before_its_watch_is_up_is_seen(
        tmp_path: Path, env: Environment) -> None:
    # The root appears, the full pass walks it and reports; a skill written then, before the
    # watch of the new root was up, made no event and waited for the next full pass (ten
    # minutes). It is written here from the report of that pass: the full pass must run once
    # the new root's watch is up, so that what comes after it is an event.
    root = tmp_path / "skills"
    settings = root_settings(root)
    passes: list[Pass] = []

    def on_pass(done: Pass) -> None:
        passes.append(done)
        if done.full and root.is_dir() and not (root / "docx").exists():
            write_skill(root, "docx", description="Written before the watch.")

    with watched_with(settings, tmp_path, env, on_pass):
        until(lambda: len(passes) >= 1, "the first full reindex")
        write_skill(root, "pdf")
        until(lambda: "Written before the watch." in catalog_of(settings, tmp_path, env),
              "the skill written before the new root's watch was up")


def test_a_root_removed_between_the_full_pass_and_its_watch_is_seen(
        tmp_path: Path, env: Environment) -> None:
    # The root is removed after the full pass walked it and before the next round of watching
    # plans it: it is missing then, so it is only awaited, and no event of its removal ever
    # comes (nothing watched it). The watcher must see that a root the pass walked is gone.
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Before removal.")
    settings = root_settings(root)
    passes: list[Pass] = []

    def on_pass(done: Pass) -> None:
        passes.append(done)
        if len(passes) == 1:
            shutil.rmtree(root)

    with watched_with(settings, tmp_path, env, on_pass):
        until(lambda: len(passes) >= 1, "the first full reindex")
        until(lambda: "Before removal." not in catalog_of(settings, tmp_path, env),
              "the skill of the root removed before its watch was up gone")
        written_and_seen(root, "docx", "After it came back.", settings, tmp_path, env,
                         "the skill of the root created again")


class Refusing:
    """watchfiles as a system out of inotify watches answers: every watch is refused."""

    def __init__(self) -> None:
        self.tries: list[float] = []

    def watch(self, *paths: str, **options: object) -> Iterator[set[tuple[int, str]]]:
        self.tries.append(time.monotonic())
        raise OSError("OS file watch limit reached")
        yield set()  # a generator, as watchfiles.watch is


def test_a_watch_the_system_refuses_still_indexes_and_is_retried_with_backoff(
        tmp_path: Path, env: Environment, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Indexed without a watch.")
    refusing = Refusing()
    monkeypatch.setattr("skillindex.watch._watchfiles", lambda: refusing)
    passes: list[Pass] = []
    indexed: list[float] = []  # when each full pass without a watch was reported

    def on_pass(done: Pass) -> None:
        passes.append(done)
        if done.report is not None:
            indexed.append(time.monotonic())

    with watched_with(root_settings(root), tmp_path, env, on_pass, retry_first=0.2):
        until(lambda: len(refusing.tries) >= 4, "the watch tried again")
    assert "Indexed without a watch." in catalog_of(root_settings(root), tmp_path, env)
    refused = [p for p in passes if p.error and "watch limit" in p.error]
    assert len(refused) >= 3
    assert all(p.report is not None for p in passes if p.error is None)
    assert len(indexed) >= 3  # each refused watch still had its full pass
    # The wait from a pass to the next try: none after the first refusal (a root may just
    # have vanished), then 0.2 s, doubling. Only lower bounds: a loaded machine waits longer,
    # and a full pass's own time is not part of them.
    waits = [tried - done for done, tried in zip(indexed, refusing.tries[1:], strict=False)]
    assert waits[1] >= 0.2 * 0.95
    assert waits[2] >= 0.4 * 0.95


def test_a_plugin_installed_after_the_start_is_watched(
        tmp_path: Path, env: Environment, watching: Callable[..., Watching]) -> None:
    settings = Settings()  # the presets, with Claude Code's plugins
    watching(settings=settings)
    install = tmp_path / "cache" / "kit" / "1.0.0"
    write_skill(install / "skills", "pdf", description="A plugin's skill.")
    registry = env.home / ".claude" / "plugins" / "installed_plugins.json"
    registry.parent.mkdir(parents=True)
    registry.write_text(json.dumps({"version": 2, "plugins": {
        "kit@market": [{"installPath": str(install), "version": "1.0.0", "scope": "user"}]}}))
    until(lambda: "kit:pdf" in catalog_of(settings, tmp_path, env),
          "the skill of a plugin installed after the start")


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
    assert line.endswith(
        f"watch needs the watch extra: install it with: {install_command('watch')}")


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
        _out, err = process.communicate(timeout=patience())
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
            thread.join(patience())
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


def test_each_pass_copies_the_log_into_the_database_once_reported(
        tmp_path: Path, watching: Callable[..., Watching]) -> None:
    # So the next commit, often a host's (a cached catalog, an audit row), finds no log over
    # SQLite's threshold to copy first. The database file read without its log (immutable)
    # holds the new skill once the watcher has copied the log in.
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    run = watching(root)
    write_skill(root, "docx")
    until(lambda: len(run.changes()) >= 1, "the pass")

    def in_the_file() -> bool:
        uri = f"file:{tmp_path / 'w.sqlite'}?immutable=1"
        try:
            with closing(sqlite3.connect(uri, uri=True)) as connection:
                return ("docx",) in connection.execute("SELECT name FROM candidate").fetchall()
        except sqlite3.DatabaseError:  # read mid-copy
            return False

    until(in_the_file, "the pass's rows in the database file")
