"""`audit --follow`: events appended by other processes are printed as they come, and a reader
restarted after an id neither loses nor repeats one, across a reindex."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import Environment
from skillindex.errors import SkillIndexError
from skillindex.model import AuditRecord
from tests.conftest import OpenIndex, write_skill

# How long a new event may take to reach a follower: its poll interval and a query.
WITHIN = 1.0


def record(number: int, skill: str = "pdf") -> AuditRecord:
    return AuditRecord(event="skill.read", level=2, outcome="ok", skill=skill, bytes=number,
                       session=f"s-{number}")


def append(index: SkillIndex, record: AuditRecord) -> None:
    """An event as the library's own flows append it (there is no public way in)."""
    index._append_event(record)


@pytest.fixture
def index(tmp_path: Path, open_index: OpenIndex) -> SkillIndex:
    opened = open_index(write_skill(tmp_path / "skills", "pdf").parent)
    opened.reindex()
    return opened


def test_the_library_stream_starts_after_the_last_event(index: SkillIndex) -> None:
    for number in range(3):
        append(index, record(number))
    assert [e.id for e in index.follow_audit(stop=lambda: True)] == []
    first = index.last_event_id()
    append(index, record(3))
    found = list(index.follow_audit(after=0, stop=lambda: True))
    assert [e.event.bytes for e in found] == [0, 1, 2, 3]
    assert [e.id for e in found] == sorted(e.id for e in found)
    assert [e.event.bytes for e in index.follow_audit(after=first, stop=lambda: True)] == [3]


def test_a_stream_from_a_time_starts_at_it(index: SkillIndex) -> None:
    append(index, record(0))
    time.sleep(0.01)
    since = index.audit()[-1].time
    append(index, record(1))
    found = list(index.follow_audit(since=since, stop=lambda: True))
    assert [e.event.bytes for e in found] == [0, 1]


def test_filters_and_pages(index: SkillIndex) -> None:
    for number in range(7):
        append(index, record(number, skill="pdf" if number % 2 else "docx"))
    found = list(index.follow_audit(after=0, skill="pdf", stop=lambda: True))
    assert [e.event.bytes for e in found] == [1, 3, 5]
    pages = index.audit_after(0, limit=3)
    assert [e.event.bytes for e in pages] == [0, 1, 2]
    assert [e.event.bytes for e in index.audit_after(pages[-1].id, limit=3)] == [3, 4, 5]


def test_what_was_committed_before_the_stop_is_delivered() -> None:
    # The writers finish and the stop is set between the follower's read and its look at the
    # stop (how the next test lost the last events of a writer on a loaded machine): what
    # they committed is still read, once more, and delivered.
    from types import SimpleNamespace

    from skillindex.query.follow import follow

    log = [SimpleNamespace(id=1)]

    def read(after: int) -> list[Any]:
        return [event for event in log if event.id > after]

    def stop() -> bool:
        log.append(SimpleNamespace(id=len(log) + 1))  # committed just before the stop
        return True

    assert [event.id for event in follow(read, 0, stop=stop, sleep=lambda _s: None)] == [1, 2]


def test_concurrent_appenders_reach_a_follower_in_order_once(index: SkillIndex) -> None:
    """Two writers at once while a follower reads: every event once, in id order."""
    start = index.last_event_id()
    done = threading.Event()
    seen: list[int] = []

    def writer(offset: int) -> None:
        for number in range(15):
            append(index, record(offset + number))

    def reader() -> None:
        seen.extend(e.event.bytes for e in index.follow_audit(after=start, interval=0.01,
                                                              stop=done.is_set))

    follower = threading.Thread(target=reader)
    follower.start()
    writers = [threading.Thread(target=writer, args=(offset,)) for offset in (0, 100)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    follower.join(10)
    assert sorted(seen) == sorted([*range(15), *range(100, 115)])
    ids = [e.id for e in index.audit_after(start, limit=100)]
    assert ids == sorted(ids) and len(ids) == 30


# -- the command, across processes --------------------------------------------------------------

@pytest.fixture
def workspace(tmp_path: Path, db_url: str, env: Environment) -> Iterator[Workspace]:
    """A settings file and database for a follower process, and this process's own index on
    them: every event this test appends comes from another process than the follower's."""
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\n'
                      "precedence = 10\n")
    variables = {**os.environ, "SKILLINDEX_CONFIG": str(config), "SKILLINDEX_DB": db_url,
                 "HOME": str(tmp_path / "home")}
    with SkillIndex.open(config, db=db_url, env=env) as index:
        index.reindex()
        yield Workspace(variables, index, root)


@dataclass
class Workspace:
    env: dict[str, str]
    index: SkillIndex
    root: Path

    def read(self, uri: str, session: str | None = None) -> None:
        with contextlib.suppress(SkillIndexError):
            self.index.read(uri, session=session)


class Follower:
    """`skillindex audit --follow ...` in a process of its own, its output read line by line
    as it comes (straight from the pipe: a buffered reader would hide lines from select)."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "skillindex", "audit", "--follow", *args], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.process.stdout is not None
        self.fd = self.process.stdout.fileno()
        self.pending = b""

    def line(self, seconds: float) -> str | None:
        deadline = time.monotonic() + seconds
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.fd], [], [], max(0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode("utf-8")

    def events(self, count: int, seconds: float) -> list[dict[str, Any]]:
        found = []
        for _ in range(count):
            line = self.line(seconds)
            assert line is not None, "the follower printed nothing"
            found.append(json.loads(line))
        return found

    def stop(self) -> tuple[int, str]:
        """Ctrl-C, as a person stops it."""
        self.process.send_signal(signal.SIGINT)
        _, err = self.process.communicate(timeout=30)
        return self.process.returncode, err.decode("utf-8")


def test_an_event_from_another_process_shows_within_a_second(workspace: Workspace) -> None:
    process = Follower("--json", "--after-id", "0", env=workspace.env)
    try:
        # The log is empty: the first event shows once the follower is running.
        workspace.read("skill://pdf", session="warm-up")
        [warm] = process.events(1, 60)
        assert warm["session"] == "warm-up"
        workspace.read("skill://pdf", session="live")
        appended = time.monotonic()
        line = process.line(WITHIN)
        waited = time.monotonic() - appended
        assert line is not None, f"no event within {WITHIN} s"
        event = json.loads(line)
        assert (event["session"], event["outcome"]) == ("live", "ok")
        assert event["id"] > warm["id"]  # PostgreSQL's ids may skip numbers, never go back
        assert list(event) == ["id", "index", "time", "event", "skill", "resource", "level",
                               "bytes", "digest", "outcome", "reason", "session", "path",
                               "principal", "row_hash"]
        assert waited < WITHIN
    finally:
        code, err = process.stop()
    assert code == 130
    assert "Traceback" not in err
    assert err.strip() == "skillindex: interrupted"


@pytest.mark.parametrize("db_backend", ["sqlite"])
def test_a_restarted_reader_resumes_after_its_last_id_across_a_reindex(
        workspace: Workspace) -> None:
    first = Follower("--json", "--after-id", "0", env=workspace.env)
    for number in range(3):
        workspace.read("skill://pdf", session=f"a-{number}")
    seen = first.events(3, 60)
    assert first.stop()[0] == 130
    # While no reader runs: more events, a reindex of a changed tree, more events.
    workspace.read("skill://pdf", session="b-0")
    write_skill(workspace.root, "docx")
    workspace.index.reindex()
    workspace.read("skill://docx", session="b-1")
    second = Follower("--json", "--after-id", str(seen[-1]["id"]), env=workspace.env)
    try:
        resumed = second.events(2, 60)
        workspace.index.reindex()
        workspace.read("skill://docx", session="c-0")
        resumed += second.events(1, 60)
        assert second.line(0.5) is None
    finally:
        second.stop()
    assert [e["session"] for e in seen + resumed] == ["a-0", "a-1", "a-2", "b-0", "b-1", "c-0"]
    ids = [e["id"] for e in seen + resumed]
    assert ids == sorted(set(ids))


@pytest.mark.parametrize("db_backend", ["sqlite"])
def test_text_lines_carry_the_id_and_escape_names(workspace: Workspace) -> None:
    process = Follower("--after-id", "0", env=workspace.env)
    try:
        workspace.read("skill://evil\x1b[31m")
        line = process.line(60)
    finally:
        process.stop()
    assert line is not None
    assert int(line.split()[0]) == workspace.index.last_event_id()
    assert "evil\\x1b[31m" in line and "\x1b" not in line


@pytest.mark.parametrize("db_backend", ["sqlite"])
def test_follow_refuses_levels_and_after_id_needs_it(workspace: Workspace) -> None:
    runner = CliRunner(env=workspace.env)
    result = runner.invoke(cli, ["audit", "--follow", "--levels"])
    assert (result.exit_code, "--levels and --follow" in result.output) == (2, True)
    result = runner.invoke(cli, ["audit", "--after-id", "3"])
    assert (result.exit_code, "--after-id goes with --follow" in result.output) == (2, True)
