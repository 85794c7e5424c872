"""Group commit of audit rows: the rows of concurrent readers go into one shared transaction,
and each reader returns only once the transaction that holds its own row has committed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from skillindex.errors import AuditBusyError, StoreError
from skillindex.model import AuditRecord

# Rows one transaction takes at most: a bound on how long the chain's lock is held at once.
BATCH = 64

_WAITING, _LEADS, _DONE = range(3)


class _Ticket:
    """One caller's row, and what became of it."""

    __slots__ = ("error", "record", "state", "wake")

    def __init__(self, record: AuditRecord) -> None:
        self.record = record
        self.state = _WAITING
        self.error: BaseException | None = None
        self.wake = threading.Event()

    def settle(self, error: BaseException | None) -> None:
        self.error, self.state = error, _DONE
        self.wake.set()


class GroupCommit:
    """Appends through `write` (all its rows in one transaction, in order, committed before it
    returns) for any number of threads at once.

    No thread of its own: the caller that finds nobody writing leads, writes every row waiting
    (its own first, up to BATCH) in one transaction, answers their callers, and hands the lead
    to the first row that arrived meanwhile. So a lone caller writes its row as it always did,
    and under load a row waits for at most the transaction in progress and its own; the rows
    of one thread are written in the order it appended them, the chain's order is the
    transactions' order. A transaction that fails is retried row by row, so that only the
    caller whose row cannot be written is refused (a busy chain fails them all at once: each
    would wait out the same lock again).
    """

    def __init__(self, write: Callable[[Sequence[AuditRecord]], None], *,
                 batch: int = BATCH) -> None:
        self._write = write
        self._batch = batch
        self._lock = threading.Lock()
        self._waiting: list[_Ticket] = []
        self._leading = False

    def append(self, record: AuditRecord) -> None:
        """Return once `record` is committed; raise what kept it from being written."""
        ticket = _Ticket(record)
        with self._lock:
            self._waiting.append(ticket)
            if not self._leading:
                self._leading = True
                ticket.state = _LEADS
        if ticket.state != _LEADS:
            try:
                ticket.wake.wait()
            except BaseException:
                self._withdraw(ticket)
                raise
        if ticket.state == _LEADS:
            self._lead()
        if ticket.error is not None:
            raise ticket.error

    def _withdraw(self, ticket: _Ticket) -> None:
        """An interrupted caller's row leaves the queue unless a transaction already took it,
        and a lead it was handed passes on: the others never wait for a leader that is gone."""
        with self._lock:
            if ticket in self._waiting:
                self._waiting.remove(ticket)
            if ticket.state != _LEADS:
                return
            ticket.state = _DONE
            self._pass_lead()

    def _pass_lead(self) -> None:
        # Under the lock: the first row waiting leads next, or nobody leads.
        if self._waiting:
            successor = self._waiting[0]
            successor.state = _LEADS
            successor.wake.set()
        else:
            self._leading = False

    def _lead(self) -> None:
        # The leader's ticket is the first waiting: it arrived when nobody led, or was handed
        # the lead as the first to arrive during the last transaction.
        batch: list[_Ticket] = []
        try:
            with self._lock:
                batch = self._waiting[:self._batch]
                del self._waiting[:self._batch]
            self._commit(batch)
        finally:
            # Interrupted before its transaction began: nobody knows those rows' fate but that
            # they were not written, and no caller may wait for them forever.
            _settle([ticket for ticket in batch if ticket.state != _DONE],
                    StoreError("the audit append was interrupted; nothing was disclosed"))
            with self._lock:
                self._pass_lead()

    def _commit(self, batch: list[_Ticket]) -> None:
        try:
            self._write([ticket.record for ticket in batch])
        except AuditBusyError as exc:
            _settle(batch, exc)
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch, exc)
                return
            for ticket in batch:
                try:
                    self._write([ticket.record])
                except Exception as alone:
                    ticket.settle(alone)
                else:
                    ticket.settle(None)
        except BaseException as exc:
            # Interrupted (the leader's thread only): the leader sees the interruption, the
            # others a refusal, since nobody knows whether their rows were committed.
            batch[0].settle(exc)
            _settle(batch[1:], StoreError("the audit append was interrupted; nothing was "
                                          "disclosed"))
            raise
        else:
            _settle(batch, None)


def _settle(batch: Sequence[_Ticket], error: BaseException | None) -> None:
    for ticket in batch:
        ticket.settle(error)
