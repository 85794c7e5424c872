"""Audit rows of concurrent readers share transactions: every row committed before its reader
is answered, one linear chain, each reader's rows in its order, a failure refusing only the
reader whose row it is; on both backends."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from skillindex.api import SkillIndex
from skillindex.errors import AuditUnwritableError, StoreError
from skillindex.model import AuditRecord
from skillindex.store import chain
from skillindex.store.groupcommit import GroupCommit
from tests.conftest import OpenIndex, write_skill
from tests.test_audit import rows


@pytest.fixture
def index(tmp_path: Path, open_index: OpenIndex) -> SkillIndex:
    root = tmp_path / "skills"
    write_skill(root, "pdf", body="# PDF\n")
    opened = open_index(root)
    opened.reindex()
    return opened


def record(session: str, number: int, event: str = "skill.read") -> AuditRecord:
    return AuditRecord(event=event, level=2, outcome="ok", skill="pdf", session=session,
                       reason=str(number))


def test_readers_appending_at_once_keep_one_chain_and_their_order(index: SkillIndex) -> None:
    readers, each = 12, 15
    failures: list[BaseException] = []

    def reader(number: int) -> None:
        try:
            for seq in range(each):
                index._append_event(record(f"r{number}", seq))
        except BaseException as exc:  # a failure is a finding of the test, not a stop
            failures.append(exc)

    threads = [threading.Thread(target=reader, args=(n,)) for n in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    report = index.verify_audit()
    assert report.ok, report.broken
    written = rows(index.engine)
    assert len(written) == readers * each
    for number in range(readers):
        mine = [int(row["reason"]) for row in written if row["session"] == f"r{number}"]
        assert mine == list(range(each))
    times = [chain.time_text(row["time"]) for row in written]
    assert times == sorted(times)  # the chain's times never go backwards


class Held:
    """`write` of a library whose first transaction waits until `release`: the rows appended
    meanwhile queue up and go into the next transaction together."""

    def __init__(self, index: SkillIndex) -> None:
        self.write = index._store._append_all
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches: list[int] = []

    def __call__(self, records: Sequence[AuditRecord]) -> None:
        self.batches.append(len(records))
        if len(self.batches) == 1:
            self.entered.set()
            self.release.wait(timeout=60)
        self.write(records)


def run_queued(commit: GroupCommit, held: Held, first: AuditRecord,
               queued: list[AuditRecord]) -> dict[int, BaseException | None]:
    """`first` appended alone and held; `queued` appended while it is; every outcome."""
    outcomes: dict[int, BaseException | None] = {}

    def append(number: int, item: AuditRecord) -> None:
        try:
            commit.append(item)
        except BaseException as exc:  # the outcome is what the test looks at
            outcomes[number] = exc
        else:
            outcomes[number] = None

    leader = threading.Thread(target=append, args=(-1, first))
    leader.start()
    assert held.entered.wait(timeout=60)
    others = [threading.Thread(target=append, args=(n, item)) for n, item in enumerate(queued)]
    for thread in others:
        thread.start()
    while len(commit._waiting) < len(queued):  # every one of them waits behind the leader
        threading.Event().wait(0.01)
    held.release.set()
    for thread in [leader, *others]:
        thread.join(timeout=120)
    return outcomes


def test_rows_that_arrive_during_a_commit_share_the_next_one(index: SkillIndex) -> None:
    held = Held(index)
    commit = GroupCommit(held)
    outcomes = run_queued(commit, held, record("lead", 0),
                          [record(f"q{n}", n) for n in range(6)])
    assert set(outcomes.values()) == {None}
    assert held.batches == [1, 6]
    assert len(rows(index.engine)) == 7
    assert index.verify_audit().ok


def test_a_row_the_store_refuses_refuses_only_its_own_reader(index: SkillIndex) -> None:
    held = Held(index)
    commit = GroupCommit(held)
    queued = [record("q0", 0), record("q1", 1, event="skill.forged"), record("q2", 2)]
    outcomes = run_queued(commit, held, record("lead", 0), queued)
    assert outcomes[-1] is None and outcomes[0] is None and outcomes[2] is None
    refused = outcomes[1]
    assert isinstance(refused, AuditUnwritableError | StoreError | IntegrityError), refused
    written = rows(index.engine)
    assert [row["session"] for row in written] == ["lead", "q0", "q2"]
    assert index.verify_audit().ok


def test_a_transaction_that_fails_whole_refuses_every_reader_in_it(index: SkillIndex) -> None:
    held = Held(index)
    failing = threading.Event()

    def write(records: Sequence[AuditRecord]) -> None:
        if failing.is_set():
            raise AuditUnwritableError("the index", "the disk is full")
        held(records)

    commit = GroupCommit(write)

    def fail_after_first(records: Sequence[AuditRecord]) -> None:
        write(records)
        failing.set()

    commit._write = fail_after_first
    outcomes = run_queued(commit, held, record("lead", 0), [record(f"q{n}", n)
                                                             for n in range(4)])
    assert outcomes[-1] is None
    assert all(isinstance(outcomes[n], AuditUnwritableError) for n in range(4))
    assert [row["session"] for row in rows(index.engine)] == ["lead"]


def test_a_reader_interrupted_while_waiting_leaves_no_row_and_no_one_stuck(
        index: SkillIndex) -> None:
    held = Held(index)
    commit = GroupCommit(held)
    outcome: list[BaseException] = []

    class Interrupt(BaseException):
        pass

    def waiter() -> None:
        try:
            commit.append(record("gone", 0))
        except BaseException as exc:  # the interruption is what the test looks at
            outcome.append(exc)

    leader = threading.Thread(target=commit.append, args=(record("lead", 0),))
    leader.start()
    assert held.entered.wait(timeout=60)
    interrupted = threading.Thread(target=waiter)
    interrupted.start()
    while len(commit._waiting) < 1:
        threading.Event().wait(0.01)
    threading.Event().wait(0.2)  # blocked in its wait by now
    # As a signal reaches the main thread: raised as the wait returns, here when the leader
    # hands it the lead.
    assert interrupted.ident is not None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(interrupted.ident),
                                               ctypes.py_object(Interrupt))
    held.release.set()
    for thread in (leader, interrupted):
        thread.join(timeout=120)
    assert len(outcome) == 1 and isinstance(outcome[0], Interrupt)
    # The lead did not leave with the interrupted caller: the next row is written.
    after = threading.Thread(target=commit.append, args=(record("after", 1),), daemon=True)
    after.start()
    after.join(timeout=60)
    assert not after.is_alive(), "the next append waits for a leader that is gone"
    assert [row["session"] for row in rows(index.engine)] == ["lead", "after"]
    assert index.verify_audit().ok
