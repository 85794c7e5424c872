"""The reindex lock on both backends: one reindex of an index at a time, across processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session

from skillindex.cli import cli
from skillindex.errors import ReindexBusyError, ReindexLockLostError, StoreError
from skillindex.store import lock
from skillindex.store.engine import make_engine
from skillindex.store.models import Candidate, IndexRun, ReindexLock, Resource
from tests.conftest import OpenIndex, write_skill

ME = f"pid {os.getpid()} on {socket.gethostname()}"


def make_tree(root: Path, count: int) -> None:
    for number in range(count):
        skill = write_skill(root, f"skill-{number:03d}")
        (skill / "guide.md").write_text(f"guide {number}")


@contextmanager
def held_in_a_thread(url: str, index_name: str = "default") -> Iterator[threading.Event]:
    """Hold the lock from another thread until the yielded event is set."""
    engine = make_engine(url)
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock.reindex_lock(engine, index_name, wait=False, timeout=0):
            taken.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(30)
    try:
        yield release
    finally:
        release.set()
        thread.join()
        engine.dispose()


def test_without_waiting_a_busy_index_names_its_holder(tmp_path: Path, open_index: OpenIndex,
                                                       db_url: str) -> None:
    write_skill(tmp_path / "skills", "pdf")
    index = open_index(tmp_path / "skills")
    with held_in_a_thread(db_url), pytest.raises(ReindexBusyError) as raised:
        index.reindex(wait=False)
    assert raised.value.holder.startswith(ME)
    assert str(raised.value).startswith(f"index 'default' is being reindexed by {ME} (since ")
    assert index.reindex(wait=False).added == 1  # released: the next one runs


def test_a_waiting_reindex_gives_up_after_its_timeout(tmp_path: Path, open_index: OpenIndex,
                                                      db_url: str) -> None:
    index = open_index(tmp_path / "skills")
    told: list[str] = []
    started = time.monotonic()
    with held_in_a_thread(db_url), pytest.raises(ReindexBusyError) as raised:
        index.reindex(timeout=0.5, on_wait=told.append)
    assert time.monotonic() - started >= 0.5
    assert raised.value.waited == 0.5
    assert "still being reindexed by" in str(raised.value)
    assert "after waiting 0.5 s" in str(raised.value)
    assert len(told) == 1
    assert told[0].startswith(ME)


def test_a_waiting_reindex_runs_when_the_holder_finishes(tmp_path: Path, open_index: OpenIndex,
                                                         db_url: str) -> None:
    make_tree(tmp_path / "skills", 5)
    index = open_index(tmp_path / "skills")
    told: list[str] = []
    with held_in_a_thread(db_url) as release:
        threading.Timer(0.5, release.set).start()
        report = index.reindex(timeout=30, on_wait=told.append)
    assert report.added == 5
    assert len(told) == 1


def test_another_index_in_the_same_database_is_not_blocked(tmp_path: Path,
                                                           open_index: OpenIndex,
                                                           db_url: str) -> None:
    write_skill(tmp_path / "skills", "pdf")
    other = open_index(tmp_path / "skills", index="other")
    with held_in_a_thread(db_url, "default"):
        assert other.reindex(wait=False).added == 1


HOLDER = """
import sys, time
from skillindex.store.engine import make_engine
from skillindex.store.lock import reindex_lock
with reindex_lock(make_engine(sys.argv[1]), "default", wait=False, timeout=0):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_killed_holder_does_not_block_the_next_reindex(tmp_path: Path, open_index: OpenIndex,
                                                         db_url: str) -> None:
    write_skill(tmp_path / "skills", "pdf")
    index = open_index(tmp_path / "skills")
    child = subprocess.Popen([sys.executable, "-c", HOLDER, db_url], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    with pytest.raises(ReindexBusyError, match=f"pid {child.pid} on "):
        index.reindex(wait=False)
    child.kill()
    child.wait()
    child.stdout.close()
    # SQLite sees that the holder's process is gone; PostgreSQL ends the session and its lock.
    assert index.reindex(timeout=30).added == 1
    assert lock.current_holder(index.engine, "default") is None


def _foreign_lease(engine_url: str, *, expires_in: timedelta) -> None:
    engine = make_engine(engine_url)
    now = datetime.now(UTC)
    with engine.begin() as connection:
        connection.execute(insert(ReindexLock), [{
            "index_name": "default", "token": "f" * 32, "holder": "pid 1 on elsewhere",
            "host": "elsewhere", "pid": 1, "acquired_at": now - timedelta(minutes=5),
            "heartbeat_at": now, "expires_at": now + expires_in}])
    engine.dispose()


@pytest.mark.parametrize("db_backend", ["sqlite"])
def test_sqlite_respects_a_live_lease_from_another_host(tmp_path: Path, open_index: OpenIndex,
                                                        db_url: str) -> None:
    index = open_index(tmp_path / "skills")
    _foreign_lease(db_url, expires_in=timedelta(minutes=1))
    with pytest.raises(ReindexBusyError, match="by pid 1 on elsewhere"):
        index.reindex(wait=False)


@pytest.mark.parametrize("db_backend", ["sqlite"])
def test_sqlite_takes_over_an_expired_lease(tmp_path: Path, open_index: OpenIndex,
                                            db_url: str) -> None:
    write_skill(tmp_path / "skills", "pdf")
    index = open_index(tmp_path / "skills")
    _foreign_lease(db_url, expires_in=timedelta(seconds=-1))
    assert index.reindex(wait=False).added == 1


@pytest.mark.parametrize("db_backend", ["postgresql"])
def test_postgresql_obeys_its_lock_not_the_holders_row(tmp_path: Path, open_index: OpenIndex,
                                                       db_url: str) -> None:
    write_skill(tmp_path / "skills", "pdf")
    index = open_index(tmp_path / "skills")
    _foreign_lease(db_url, expires_in=timedelta(minutes=1))  # left by a crash: nobody holds it
    assert index.reindex(wait=False).added == 1


@pytest.mark.parametrize("db_backend", ["postgresql"])
def test_postgresql_names_no_holder_for_a_row_left_behind(tmp_path: Path, open_index: OpenIndex,
                                                          db_url: str) -> None:
    """A holder cut off before it deleted its row (the server restarted under its reindex)
    holds nothing: the row is not reported as a holder, a reindex that does hold it is."""
    write_skill(tmp_path / "skills", "pdf")
    index = open_index(tmp_path / "skills")
    _foreign_lease(db_url, expires_in=timedelta(minutes=1))
    assert lock.current_holder(index.engine, "default") is None
    with held_in_a_thread(db_url):
        holder = lock.current_holder(index.engine, "default")
    assert holder is not None and holder.startswith(f"{ME} (since "), holder
    assert lock.current_holder(index.engine, "default") is None


@pytest.mark.parametrize("db_backend", ["sqlite"])
def test_sqlite_lease_is_refreshed_while_the_reindex_runs(db_url: str, open_index: OpenIndex,
                                                          tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    index = open_index(tmp_path / "skills")
    monkeypatch.setattr(lock, "HEARTBEAT_S", 0.05)

    def expires() -> datetime:
        with Session(index.engine) as session:
            return session.scalars(select(ReindexLock.expires_at)).one()

    with lock.reindex_lock(index.engine, "default", wait=False, timeout=0):
        first = expires()
        time.sleep(0.5)
        assert expires() > first


def test_a_reindex_that_lost_its_lock_writes_nothing(tmp_path: Path, open_index: OpenIndex,
                                                     db_url: str) -> None:
    write_skill(tmp_path / "skills", "pdf")
    index = open_index(tmp_path / "skills")
    other = make_engine(db_url)

    def steal(_done: int, _expected: int | None, _root: str) -> None:
        with other.begin() as connection:
            connection.execute(update(ReindexLock).values(token="0" * 32))

    with pytest.raises(StoreError, match="lost the reindex lock"):
        index.reindex(progress=steal)
    other.dispose()
    with Session(index.engine) as session:
        assert session.scalar(select(func.count()).select_from(IndexRun)) == 0
        assert session.scalar(select(func.count()).select_from(Candidate)) == 0


def _cli_config(tmp_path: Path, root: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\n')
    return config


def test_cli_no_wait_fails_naming_the_holder(tmp_path: Path, open_index: OpenIndex,
                                             db_url: str) -> None:
    open_index()  # creates the schema
    config = _cli_config(tmp_path, tmp_path / "skills")
    with held_in_a_thread(db_url):
        result = CliRunner().invoke(cli, ["--config", str(config), "--db", db_url, "reindex",
                                          "--no-wait"], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"skillindex: error: index 'default' is being reindexed by {ME} (since ")
    assert "try again later" in result.stderr


def test_cli_says_that_it_waits(tmp_path: Path, open_index: OpenIndex, db_url: str) -> None:
    open_index()
    write_skill(tmp_path / "skills", "pdf")
    config = _cli_config(tmp_path, tmp_path / "skills")
    with held_in_a_thread(db_url) as release:
        threading.Timer(0.5, release.set).start()
        result = CliRunner().invoke(cli, ["--config", str(config), "--db", db_url, "reindex"],
                                    catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"is being reindexed by {ME}" in result.stderr
    assert "waiting up to 600 s" in result.stderr
    assert "1 added" in result.stdout


def _environment(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("SKILLINDEX_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_DATA_HOME=str(home / ".data"))
    return env


def test_concurrent_reindex_processes_take_turns_and_readers_see_whole_indexes(
        tmp_path: Path, open_index: OpenIndex, db_url: str) -> None:
    count = 300
    root = tmp_path / "skills"
    make_tree(root, count)
    index = open_index(root)  # the schema exists before the processes start
    config = _cli_config(tmp_path, root)
    command = [sys.executable, "-m", "skillindex", "--config", str(config), "--db", db_url,
               "--json", "reindex"]
    seen: set[int] = set()
    errors: list[BaseException] = []
    stop = threading.Event()
    reader = make_engine(db_url)

    def read() -> None:
        try:
            with reader.connect() as connection:
                while not stop.is_set():
                    seen.add(connection.execute(
                        select(func.count()).select_from(Candidate)).scalar_one())
                    connection.rollback()
                    time.sleep(0.005)
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    logs = [tmp_path / f"reindex-{number}.err" for number in range(2)]
    try:
        # Both processes start while the lock is taken, so both must wait and then take turns.
        with lock.reindex_lock(index.engine, "default", wait=False, timeout=0):
            children = []
            for log in logs:
                with log.open("w") as stderr:
                    children.append(subprocess.Popen(command, stdout=subprocess.PIPE,
                                                     stderr=stderr, text=True, cwd=tmp_path,
                                                     env=_environment(tmp_path)))
            deadline = time.monotonic() + 60
            while not all("waiting" in log.read_text() for log in logs):
                assert time.monotonic() < deadline, [log.read_text() for log in logs]
                assert all(child.poll() is None for child in children)
                time.sleep(0.05)
        outputs = [child.communicate(timeout=120)[0] for child in children]
    finally:
        stop.set()
        for thread in readers:
            thread.join()
        reader.dispose()
    assert [child.returncode for child in children] == [0, 0], [log.read_text() for log in logs]
    assert not errors
    reports = sorted((json.loads(output) for output in outputs), key=lambda r: r["run_id"])
    assert [(r["seen"], r["added"], r["unchanged"]) for r in reports] == [
        (count, count, 0), (count, 0, count)]
    assert count in seen
    assert seen <= {0, count}
    with Session(index.engine) as session:
        names = session.scalars(select(Candidate.name)).all()
        expected = [f"skill-{number:03d}" for number in range(count)]
        assert sorted(name or "" for name in names) == expected  # each once
        assert session.scalar(select(func.count()).select_from(Resource)) == 2 * count
        runs = session.execute(select(IndexRun.seen, IndexRun.finished_at)).all()
        assert [(run_seen, finished is not None) for run_seen, finished in runs] == [
            (count, True), (count, True)]
        assert session.scalar(select(func.count()).select_from(ReindexLock)) == 0


@pytest.mark.parametrize("db_backend", ["sqlite"])  # the lease can be taken over on SQLite only
def test_a_stale_reindexer_whose_skills_were_written_meanwhile_reports_the_lost_lock(
        tmp_path: Path, open_index: OpenIndex, db_url: str) -> None:
    write_skill(tmp_path / "skills", "pdf")
    first = open_index(tmp_path / "skills")
    second = open_index(tmp_path / "skills")
    other = make_engine(db_url)

    def taken_over_and_reindexed(_done: int, _expected: int | None, _root: str) -> None:
        # The first reindexer stalls past its lease; the second takes the lock over as stale
        # and writes the same skills before the first one comes back to write its own.
        with other.begin() as connection:
            connection.execute(update(ReindexLock).values(
                expires_at=datetime.now(UTC) - timedelta(seconds=1)))
        second.reindex(wait=False)

    with pytest.raises(ReindexLockLostError, match="lost the reindex lock"):
        first.reindex(progress=taken_over_and_reindexed)
    other.dispose()
    with Session(first.engine) as session:
        assert session.scalar(select(func.count()).select_from(IndexRun)) == 1
        assert session.scalar(select(func.count()).select_from(Candidate)) == 1


def test_a_reindex_waiting_without_end_waits_until_the_holder_finishes(
        tmp_path: Path, open_index: OpenIndex, db_url: str) -> None:
    # An infinite wait used to overflow PostgreSQL's lock_timeout before waiting at all.
    write_skill(tmp_path / "skills", "pdf")
    index = open_index(tmp_path / "skills")
    with held_in_a_thread(db_url) as release:
        threading.Timer(0.5, release.set).start()
        report = index.reindex(timeout=float("inf"))
    assert report.added == 1


@pytest.mark.parametrize(("seconds", "expected"), [
    (0.0, 1), (0.0004, 1), (1.5, 1500), (2**31, lock.MAX_LOCK_TIMEOUT_MS),
    (float("inf"), lock.MAX_LOCK_TIMEOUT_MS), (float("nan"), lock.MAX_LOCK_TIMEOUT_MS)])
def test_lock_timeout_in_milliseconds_stays_in_the_int4_range(seconds: float,
                                                              expected: int) -> None:
    assert lock.lock_timeout_ms(seconds) == expected
