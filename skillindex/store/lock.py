"""The reindex lock of one index, held in the database so that every host sharing it obeys it."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection, Engine, delete, func, insert, select, update
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session

from skillindex.errors import ReindexBusyError, ReindexLockLostError
from skillindex.store.engine import IMMEDIATE
from skillindex.store.models import ReindexLock

# SQLite: a holder that has not refreshed its row for this long is presumed dead, wherever it ran.
LEASE = timedelta(seconds=120)
HEARTBEAT_S = 20.0
POLL_S = 0.2
# PostgreSQL's lock_timeout is an int4 of milliseconds.
MAX_LOCK_TIMEOUT_MS = 2**31 - 1
LOCK_NOT_AVAILABLE = "55P03"

OnWait = Callable[[str], None]  # called once, with the holder, when a reindex starts to wait


@dataclass(slots=True)
class HeldLock:
    """The lock this process holds; `verify` fences the final write against a lost lock."""

    index_name: str
    token: str
    holder: str

    def verify(self, session: Session) -> None:
        """Raise unless the lock row still names this holder (call inside the write transaction)."""
        token = session.scalar(
            select(ReindexLock.token).where(ReindexLock.index_name == self.index_name))
        if token != self.token:
            raise ReindexLockLostError(self.index_name)


@contextmanager
def reindex_lock(engine: Engine, index_name: str, *, wait: bool, timeout: float,
                 on_wait: OnWait | None = None) -> Iterator[HeldLock]:
    """Hold the reindex lock of `index_name` for the body of the `with`.

    Busy: without `wait`, or after `timeout` seconds of waiting, ReindexBusyError names the holder.
    PostgreSQL: a row no other role may lock, held in a transaction of a dedicated connection,
    released by the server if this process dies. Elsewhere: a `reindex_lock` row with a lease
    refreshed by a heartbeat thread, taken over when its holder's process is gone from this
    host or its lease has expired.
    """
    if engine.dialect.name == "postgresql":
        with _row_lock(engine, index_name, wait=wait, timeout=timeout,
                       on_wait=on_wait) as held:
            yield held
    else:
        with _lease_lock(engine, index_name, wait=wait, timeout=timeout,
                         on_wait=on_wait) as held:
            yield held


def current_holder(engine: Engine, index_name: str) -> str | None:
    """Who holds the reindex lock of the index, as the lock row says (None: nobody).

    PostgreSQL: a row whose lock nobody holds is a holder the server cut off before it could
    delete it (a restart during its reindex): nobody holds the lock. A role that may not take
    the lock is told what the row says."""
    with engine.connect() as connection:
        row = _row(connection, index_name)
        connection.rollback()
        if row is None:
            return None
        if engine.dialect.name == "postgresql":
            try:
                free = _take(connection, index_name, TRY_MS)
            except SQLAlchemyError:
                free = False  # a role that may not take the lock: what the row says
            if free:
                connection.rollback()
                return None
    return describe(row)


HOST = socket.gethostname()


def _new_lock(index_name: str) -> HeldLock:
    return HeldLock(index_name, uuid.uuid4().hex, f"pid {os.getpid()} on {HOST}")


def _row(connection: Connection, index_name: str) -> ReindexLock | None:
    found = connection.execute(
        select(*ReindexLock.__table__.columns).where(ReindexLock.index_name == index_name)
    ).mappings().first()
    return None if found is None else ReindexLock(**found)


def describe(row: ReindexLock) -> str:
    return f"{row.holder} (since {_utc(row.acquired_at):%Y-%m-%d %H:%M:%S} UTC)"


def _utc(moment: datetime) -> datetime:
    # SQLite hands timestamps back without their zone; skillindex writes them in UTC.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _write_row(connection: Connection, held: HeldLock) -> None:
    now = datetime.now(UTC)
    connection.execute(delete(ReindexLock).where(ReindexLock.index_name == held.index_name))
    connection.execute(insert(ReindexLock), [{
        "index_name": held.index_name, "token": held.token, "holder": held.holder, "host": HOST,
        "pid": os.getpid(), "acquired_at": now, "heartbeat_at": now, "expires_at": now + LEASE}])


def _delete_row(connection: Connection, held: HeldLock) -> None:
    connection.execute(delete(ReindexLock).where(ReindexLock.index_name == held.index_name,
                                                 ReindexLock.token == held.token))


# -- PostgreSQL: a row only the owner's function locks -------------------------------------------

# How long the first, not waiting, attempt waits for the row: a holder keeps it for a whole
# reindex, so anything longer than an instant is a reindex.
TRY_MS = 1


def lock_timeout_ms(timeout: float) -> int:
    """A wait in seconds as PostgreSQL's lock_timeout: at least 1 ms, at most what an int4 holds
    (an infinite wait, or a NaN, waits that long)."""
    milliseconds = timeout * 1000
    if not milliseconds < MAX_LOCK_TIMEOUT_MS:
        return MAX_LOCK_TIMEOUT_MS
    return max(1, int(milliseconds))


@contextmanager
def _row_lock(engine: Engine, index_name: str, *, wait: bool, timeout: float,
              on_wait: OnWait | None) -> Iterator[HeldLock]:
    held = _new_lock(index_name)
    # The index's row of reindex_mutex, locked by the owner's function (migration 0017) in a
    # transaction of this connection, held for the whole reindex: no other role may lock it
    # (an advisory lock any role could take), and the server ends the transaction, releasing
    # it, if the process or the connection dies. The reindex writes on other connections.
    with engine.connect() as connection:
        if not _take(connection, index_name, TRY_MS):
            holder = _holder_of(connection, index_name)
            if not wait or timeout <= 0:
                raise ReindexBusyError(index_name, holder)
            if on_wait is not None:
                on_wait(holder)
            if not _take(connection, index_name, lock_timeout_ms(timeout)):
                raise ReindexBusyError(index_name, _holder_of(connection, index_name),
                                       waited=timeout)
        try:
            with engine.begin() as writer:
                _write_row(writer, held)
            yield held
        finally:
            try:
                # The holder row goes in the transaction that holds the lock: one commit
                # deletes it and releases the lock.
                _delete_row(connection, held)
                connection.commit()
            except SQLAlchemyError:
                # The session is unusable (the server dropped it, and the lock with it): the
                # row is deleted on a connection of its own, if the server answers.
                connection.invalidate()
                with suppress(SQLAlchemyError), engine.begin() as writer:
                    _delete_row(writer, held)


def _take(connection: Connection, index_name: str, milliseconds: int) -> bool:
    """Lock the index's row in a transaction left open on `connection`, waiting at most
    `milliseconds`; False (the transaction rolled back) when another reindex holds it."""
    connection.begin()
    try:
        connection.execute(select(func.set_config("lock_timeout", f"{milliseconds}ms", True)))
        connection.execute(select(func.skillindex_reindex_lock(index_name)))
    except OperationalError as exc:
        connection.rollback()
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        return False
    except BaseException:
        connection.rollback()
        raise
    return True


def _holder_of(connection: Connection, index_name: str) -> str:
    with connection.begin():
        row = _row(connection, index_name)
    # The winner writes its row right after it gets the lock; between the two there is no row.
    return "another process" if row is None else describe(row)


# -- SQLite and others: a lease row --------------------------------------------------------------

@contextmanager
def _lease_lock(engine: Engine, index_name: str, *, wait: bool, timeout: float,
                on_wait: OnWait | None) -> Iterator[HeldLock]:
    held = _new_lock(index_name)
    deadline = time.monotonic() + max(timeout, 0.0)
    announced = False
    while True:
        holder = _try_lease(engine, held)
        if holder is None:
            break
        if not wait or timeout <= 0:
            raise ReindexBusyError(index_name, holder)
        if time.monotonic() >= deadline:
            raise ReindexBusyError(index_name, holder, waited=timeout)
        if not announced and on_wait is not None:
            on_wait(holder)
        announced = True
        time.sleep(min(POLL_S, max(deadline - time.monotonic(), 0.0)))
    heartbeat = _Heartbeat(engine, held)
    heartbeat.start()
    try:
        yield held
    finally:
        with _signals_held():  # a second Ctrl-C or SIGTERM waits until the row is gone
            heartbeat.stop()
            with suppress(SQLAlchemyError), engine.begin() as connection:
                _delete_row(connection, held)


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back (delivered at the end) in the main thread, where Python
    raises them: the release of a lease is not cut off halfway by the signal that ended the
    reindex, or by another one."""
    if (threading.current_thread() is not threading.main_thread()
            or not hasattr(signal, "pthread_sigmask")):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _try_lease(engine: Engine, held: HeldLock) -> str | None:
    """Take the lease unless a live holder has it; returns that holder, or None when taken."""
    with engine.connect() as connection:
        connection.execution_options(**IMMEDIATE)  # the read and the write below are one step
        with connection.begin():
            row = _row(connection, held.index_name)
            if row is not None and not _stale(row):
                return describe(row)
            _write_row(connection, held)
    return None


def _stale(row: ReindexLock) -> bool:
    if _utc(row.expires_at) <= datetime.now(UTC):
        return True
    return row.host == HOST and not _alive(row.pid)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, alive
    try:
        # A killed process nobody has reaped yet still answers signal 0.
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


class _Heartbeat(threading.Thread):
    """Refreshes the lease while the reindex runs; a scan may outlast the lease many times."""

    def __init__(self, engine: Engine, held: HeldLock) -> None:
        super().__init__(name=f"skillindex-lease-{held.index_name}", daemon=True)
        self.engine = engine
        self.held = held
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(HEARTBEAT_S):
            now = datetime.now(UTC)
            try:
                with self.engine.begin() as connection:
                    refreshed = connection.execute(
                        update(ReindexLock)
                        .where(ReindexLock.index_name == self.held.index_name,
                               ReindexLock.token == self.held.token)
                        .values(heartbeat_at=now, expires_at=now + LEASE)).rowcount
            except SQLAlchemyError:
                continue  # a busy database: the lease outlasts several missed beats
            if not refreshed:
                return  # taken over; `verify` refuses the final write

    def stop(self) -> None:
        self._done.set()
        self.join()
