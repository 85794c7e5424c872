"""Faults a laptop and a fleet meet, made for real: an index on a full disk and on a read-only
mount (a tmpfs in a namespace of the test's own, tests/faultfs.py), an index file another user
owns, a disk that fills during a reindex. Reads answer; a disclosure is refused without its
audit row; a reindex leaves the previous index whole and its lock released."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from random import Random

import pytest
from sqlalchemy import text

from skillindex.api import SkillIndex
from skillindex.store import lock
from skillindex.store.engine import make_engine
from tests import faultfs
from tests.conftest import write_skill
from tests.faultfs import Done, SmallDisk
from tests.pgserver import PostgresServer

# The commands that only read, each of which must answer from an index that cannot be written.
READS = [["list"], ["--json", "list"], ["catalog"], ["catalog", "--format", "json"],
         ["search", "pdf"], ["explain", "pdf"], ["candidates"], ["rejections"], ["roots"],
         ["risks"], ["verify"], ["audit"], ["audit", "verify"]]
NOTE = "skillindex: note: the index {db} cannot be written ({why}): reading it read-only"


@pytest.fixture
def small_disk(tmp_path: Path) -> SmallDisk:
    why = faultfs.unavailable()
    if why is not None:
        pytest.skip(why)
    mount = tmp_path / "disk"
    mount.mkdir()
    # Room for the index of 300 skills and its write-ahead log once the disk is free again.
    return SmallDisk(mount, size_kb=1536)


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A settings file naming one root with two skills, indexed into `index.db` beside it."""
    root = tmp_path / "skills"
    write_skill(root, "pdf", description="Read PDF files.", body="# PDF\n\nUse it.\n")
    write_skill(root, "docx", description="Write Word documents.")
    (tmp_path / "config.toml").write_text(f'[skills]\npresets = false\n\n[[roots]]\n'
                                          f'path = "{root}"\n')
    done = cli(tmp_path, "--db", str(tmp_path / "index.db"), "reindex")
    assert done.code == 0, done.stderr
    return tmp_path


def environment(base: Path) -> dict[str, str]:
    home = base / "home"
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".data"),
            "SKILLINDEX_CONFIG": str(base / "config.toml"), "LC_ALL": "C.UTF-8",
            "PYTHONPATH": str(faultfs.REPO)}


def cli_args(base: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "skillindex", *args]


def cli(base: Path, *args: str) -> Done:
    done = subprocess.run(cli_args(base, *args), cwd=base, env=environment(base),
                          capture_output=True, text=True, check=False, timeout=300)
    return Done(done.returncode, done.stdout, done.stderr)


def steps(db: Path, *commands: list[str]) -> list[list[str]]:
    return [["cli", "--db", str(db), *command] for command in commands]


def rows(db: Path, table: str) -> int:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
        return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def assert_read_only_reads(results: list[Done], db: Path, why: str) -> None:
    for command, done in zip(READS, results, strict=True):
        assert done.code == 0, (command, done.stderr)
        assert done.stderr.startswith(NOTE.format(db=db, why=why)), (command, done.stderr)
        assert done.stderr.count("skillindex: note:") == 1, done.stderr
    assert "pdf" in results[0].stdout and "docx" in results[0].stdout
    assert "Read PDF files." in results[2].stdout


def assert_refused(done: Done, db: Path, why: str) -> None:
    assert done.code == 4, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1] == (
        f"skillindex: error: cannot disclose: the audit log of {db} cannot be written ({why}; "
        "it was opened read-only); nothing was handed over")


def test_reads_answer_and_disclosure_is_refused_on_a_full_disk(small_disk: SmallDisk,
                                                                built: Path) -> None:
    db, out = small_disk.mount / "index.db", built / "after.db"
    results = small_disk.run([
        ["copy", str(built / "index.db"), str(db)], ["fill"],
        *steps(db, *READS, ["read", "skill://pdf"], ["command", "pdf"], ["--json", "read",
               "skill://pdf"], ["catalog", "--session", "s1"], ["reindex"]),
        ["export", str(db), str(out)], ["free"],
        *steps(db, ["read", "skill://pdf"], ["reindex"])], env=environment(built))
    assert_read_only_reads(results[:len(READS)], db, "its disk is full")
    for refused in results[len(READS):len(READS) + 4]:
        assert_refused(refused, db, "its disk is full")
    reindex, read_after, reindex_after = results[len(READS) + 4:]
    assert reindex.code == 1
    assert reindex.stderr.splitlines()[-1] == (
        f"skillindex: error: cannot write the index {db}: its disk is full; it was opened "
        "read-only")
    # Nothing was handed over without its row, and the index is whole and unlocked.
    assert rows(out, "load_event") == rows(out, "reindex_lock") == 0
    listed = cli(built, "--db", str(out), "list")
    assert listed.code == 0 and "pdf" in listed.stdout and "docx" in listed.stdout
    # Once space is freed, the same index is read and written again.
    assert read_after.code == 0 and read_after.stdout == "# PDF\n\nUse it.\n"
    assert "note:" not in read_after.stderr
    assert reindex_after.code == 0, reindex_after.stderr


def test_reads_answer_and_disclosure_is_refused_on_a_read_only_mount(small_disk: SmallDisk,
                                                                      built: Path) -> None:
    db, out = small_disk.mount / "index.db", built / "after.db"
    results = small_disk.run([
        ["copy", str(built / "index.db"), str(db)], ["remount-ro"],
        *steps(db, *READS, ["read", "skill://pdf"], ["read", "skill://pdf/SKILL.md"],
               ["reindex"]),
        ["export", str(db), str(out)]], env=environment(built))
    why = "its file system is mounted read-only"
    assert_read_only_reads(results[:len(READS)], db, why)
    for refused in results[len(READS):len(READS) + 2]:
        assert_refused(refused, db, why)
    assert results[-1].code == 1
    assert results[-1].stderr.endswith(f"cannot write the index {db}: {why}; it was opened "
                                       "read-only\n")
    assert rows(out, "load_event") == rows(out, "reindex_lock") == 0


def test_an_index_its_reader_may_not_write_answers_reads(built: Path) -> None:
    """A file and folder shipped read-only (0444, 0555): as root too, the reader runs in a user
    namespace as a user without privileges (tests/faultfs.py), which the modes do stop."""
    why = faultfs.unavailable()
    if why is not None and os.geteuid() == 0:
        pytest.skip(why)
    db = built / "index.db"
    db.chmod(0o444)
    built.chmod(0o555)
    try:
        results = [faultfs.unprivileged(cli_args(built, "--db", str(db), *command),
                                        env=environment(built))
                   for command in [*READS, ["read", "skill://pdf"]]]
    finally:
        built.chmod(0o755)
    why = (f"its folder {built} is not writable, and SQLite keeps its -wal and -shm files "
           "beside the database")
    assert_read_only_reads(results[:-1], db, why)
    assert_refused(results[-1], db, why)
    assert sorted(path.name for path in built.iterdir()) == ["config.toml", "index.db", "skills"]
    assert rows(db, "load_event") == 0


# Free space left on the disk when a reindex of many new skills starts: none (the index is then
# opened read-only), and amounts that run out at different points of its one transaction.
FREE_KB = [0, 8, 32, 96, 192, 384]


def test_a_reindex_that_runs_out_of_space_loses_nothing(small_disk: SmallDisk,
                                                         built: Path) -> None:
    for number in range(300):
        write_skill(built / "skills", f"many-{number:03d}", description="Many words. " * 40,
                    body="# Body\n" + "Text of the body. " * 80)
    db = small_disk.mount / "index.db"
    run = []
    for kb in FREE_KB:
        run += [["clear"], ["copy", str(built / "index.db"), str(db)], ["fill", str(kb)],
                *steps(db, ["reindex"]), ["export", str(db), str(built / f"after-{kb}.db")]]
    run += [["free"], *steps(db, ["--json", "reindex"])]
    results = small_disk.run(run, env=environment(built))
    for kb, done in zip(FREE_KB, results, strict=False):
        assert done.code == 1, (kb, done.stderr)
        # Too little space for the -shm file: the index is opened read-only; else the write
        # runs out of space part way.
        said = "its disk is full; it was opened read-only" if kb < 32 else (
            "database or disk is full")
        assert done.stderr.splitlines()[-1] == (
            f"skillindex: error: cannot write the index {db}: {said}"), (kb, done.stderr)
        after = built / f"after-{kb}.db"
        # The previous index, whole; no lock left; nothing audited.
        assert rows(after, "candidate") == 2, kb
        assert rows(after, "reindex_lock") == rows(after, "load_event") == 0, kb
    final = results[-1]
    assert final.code == 0, final.stderr
    assert '"added": 300' in final.stdout


# Signal points per signal: each a reindex that has skills to add or remove, signalled after a
# random share of the time an unsignalled one takes (from the interpreter's start on).
SIGNAL_POINTS = 6


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_at_any_point_of_a_reindex_leaves_the_index_whole(
        tmp_path: Path, db_url: str, signum: int) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    (tmp_path / "config.toml").write_text(f'[skills]\npresets = false\n\n[[roots]]\n'
                                          f'path = "{root}"\n')
    engine = make_engine(db_url)
    reindex = cli_args(tmp_path, "--db", db_url, "reindex")

    def state() -> tuple[int, str | None]:
        with engine.connect() as connection:
            count = connection.execute(text("SELECT count(*) FROM candidate")).scalar_one()
        return int(count), lock.current_holder(engine, "default")

    def toggle() -> int:
        """Add the batch of skills if it is not there, else remove it: the count to expect."""
        batch = [root / f"batch-{number:03d}" for number in range(150)]
        if batch[0].exists():
            for folder in batch:
                shutil.rmtree(folder)
            return 1
        for folder in batch:
            write_skill(root, folder.name, body="# Body\n" + "Text. " * 200)
        return 151

    started = time.monotonic()
    assert subprocess.run(reindex, cwd=tmp_path, env=environment(tmp_path), check=False,
                          capture_output=True).returncode == 0
    expected = toggle()
    assert subprocess.run(reindex, cwd=tmp_path, env=environment(tmp_path), check=False,
                          capture_output=True).returncode == 0
    took = (time.monotonic() - started) / 2
    assert state() == (expected, None)
    random = Random(signum)
    outcomes: Counter[tuple[int, str]] = Counter()
    for _point in range(SIGNAL_POINTS):
        before, after = state()[0], toggle()
        child = subprocess.Popen(reindex, cwd=tmp_path, env=environment(tmp_path),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(random.uniform(0, took))
        child.send_signal(signum)
        _, stderr = child.communicate(timeout=300)
        count, holder = state()
        # The previous index or the new one, never a part; no lock left behind.
        assert count in (before, after), (count, before, after, stderr)
        assert holder is None, stderr
        assert child.returncode not in (130, 143) or "Traceback" not in stderr, stderr
        outcomes[(child.returncode, "new" if count == after else "old")] += 1
        if count == before:
            toggle()  # back to what the index holds, so the next point has work again
    # The next reindex after all of them succeeds.
    done = subprocess.run(reindex, cwd=tmp_path, env=environment(tmp_path), check=False,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    engine.dispose()
    print(f"{signal.Signals(signum).name}: {dict(outcomes)}")


def test_the_drivers_warnings_about_a_lost_server_stay_off_stderr(pg_url: str) -> None:
    """psycopg logs a warning as it closes a connection the server dropped ("error ignored
    terminating <psycopg.Pipeline [BAD]>"); the store says what happened as a StoreError, so
    the warning does not reach stderr through logging's last-resort handler."""
    script = ("import logging, sys\n"
              "from skillindex.store.engine import make_engine\n"
              "make_engine(sys.argv[1]).dispose()\n"
              "logging.getLogger('psycopg').warning('error ignored terminating %s', 'pipe')\n")
    done = subprocess.run([sys.executable, "-c", script, pg_url], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_reads_and_reindexes_survive_a_postgresql_restart(
        tmp_path: Path, pg_server: PostgresServer, pg_url: str) -> None:
    """The server restarts under an open index (as `serve` holds one) and during a reindex:
    reads before and after answer and are audited; the cut-off reindex leaves the old index
    or the new one, no lock, and the next reindex succeeds."""
    root = tmp_path / "skills"
    write_skill(root, "pdf", body="# PDF\n")
    (tmp_path / "config.toml").write_text(f'[skills]\npresets = false\n\n[[roots]]\n'
                                          f'path = "{root}"\n')
    with SkillIndex.open(str(tmp_path / "config.toml"), db=pg_url, cwd=tmp_path) as index:
        index.reindex()
        assert index.read("skill://pdf").data == b"# PDF\n"
        pg_server.restart()
        assert index.read("skill://pdf").data == b"# PDF\n"
        assert "pdf" in index.catalog().text
        assert [event.outcome for event in index.audit()] == ["ok", "ok"]
        for number in range(150):
            write_skill(root, f"batch-{number:03d}", body="Text. " * 200)
        child = subprocess.Popen(cli_args(tmp_path, "--db", pg_url, "reindex"), cwd=tmp_path,
                                 env=environment(tmp_path), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        pg_server.restart()
        _, stderr = child.communicate(timeout=300)
        assert child.returncode in (0, 1), stderr
        if child.returncode == 1:
            assert stderr.startswith("skillindex: error: cannot "), stderr
        assert len(index.candidates()) in (1, 151)
        assert lock.current_holder(index.engine, "default") is None
        assert index.reindex().seen == 151
        assert len(index.candidates()) == 151
