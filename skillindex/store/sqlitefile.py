"""Opens a SQLite index file for either driver: read-write, else read-only when the file, its
folder or its disk cannot take a write.

A WAL database is opened by creating (or sizing) its `-wal` and `-shm` files beside it, so a
full disk, a read-only mount and a folder its reader may not write all refuse even a read-only
open. Then the file is opened `mode=ro` (which works while another connection keeps those
files), else `immutable=1`, but only where nothing can be writing it meanwhile: its file system
is mounted read-only, or its write-ahead log holds no frame (no commit waits outside the file,
no checkpoint can be copying one in, and a writer's first frame needs the space or the
permission that is missing). No SQLAlchemy here: the sqlite3 fast path opens files with it too.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from skillindex.errors import ReadOnlyIndexWarning
from skillindex.store import sql

# Primary result codes of a database that cannot be written or whose WAL files cannot be
# made: SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN.
_CANNOT_WRITE = frozenset({8, 10, 13, 14})
READ_ONLY = "read-only"
IMMUTABLE = "immutable"
# A read-only connection still waits for a writer and checks foreign keys as every other does;
# the journal mode and syncing are the writer's to set.
_READ_PRAGMAS = sql.SQLITE_PRAGMAS[:2]


@dataclass(frozen=True, slots=True)
class Opened:
    """A connection and how it was opened: `mode` None (read-write), READ_ONLY or IMMUTABLE;
    `why` says in words why the file could not be opened for writing."""

    connection: sqlite3.Connection
    mode: str | None = None
    why: str | None = None


def cannot_write(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused for want of a write (permission, space, a read-only mount)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _CANNOT_WRITE


def connect(path: str, *, timeout: float, pooled: bool = False) -> Opened:
    """The SQLite file at `path`, its connection set up as store/sql.py says, transactions
    begun explicitly (`pooled`: for a pool, which hands it to one thread at a time). When a
    read-write open fails for want of a write, the same file read-only (and a
    ReadOnlyIndexWarning); any other failure is raised."""
    try:
        return Opened(_configured(sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                                  check_same_thread=not pooled),
                                  sql.SQLITE_PRAGMAS))
    except sqlite3.Error as exc:
        if not cannot_write(exc):
            raise
        refused = exc
    why = _why(Path(path), refused)
    for mode in (READ_ONLY, IMMUTABLE):
        if mode == IMMUTABLE and not _nothing_can_write(Path(path)):
            break
        try:
            connection = sqlite3.connect(_uri(path, mode), uri=True, timeout=timeout,
                                         isolation_level=None, check_same_thread=not pooled)
            _configured(connection, _READ_PRAGMAS).execute(sql.SCHEMA_PROBE).fetchall()
        except sqlite3.Error:
            continue
        warnings.warn(ReadOnlyIndexWarning(path, why), stacklevel=1)
        return Opened(connection, mode, why)
    raise refused


def _configured(connection: sqlite3.Connection, pragmas: tuple[str, ...]) -> sqlite3.Connection:
    try:
        for pragma in pragmas:
            connection.execute(pragma)
    except BaseException:
        connection.close()
        raise
    return connection


def _uri(path: str, mode: str) -> str:
    query = "mode=ro&immutable=1" if mode == IMMUTABLE else "mode=ro"
    return f"file:{_url_path(os.path.abspath(path))}?{query}"


def _url_path(path: str) -> str:
    """`urllib.request.pathname2url`, which on POSIX is `quote`: urllib.request itself
    imports http.client, email and ssl, which every one-shot command would pay for."""
    if os.name == "nt":  # pragma: no cover - drive letters and backslashes
        from urllib.request import pathname2url  # noqa: PLC0415

        return pathname2url(path)
    return quote(path)


def _nothing_can_write(path: Path) -> bool:
    try:
        if os.statvfs(path.parent).f_flag & os.ST_RDONLY:
            return True
        return os.stat(f"{path}-wal").st_size == 0
    except FileNotFoundError:
        return True  # no write-ahead log at all
    except OSError:
        return False


def _why(path: Path, exc: sqlite3.Error) -> str:
    """Why a file could not be opened for writing, as its reader can tell."""
    try:
        folder = os.statvfs(path.parent)
    except OSError:
        return str(exc)
    if folder.f_flag & os.ST_RDONLY:
        return "its file system is mounted read-only"
    if folder.f_bavail == 0 or folder.f_favail == 0:
        return "its disk is full"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return (f"its folder {path.parent} is not writable, and SQLite keeps its -wal and -shm "
                "files beside the database")
    if not os.access(path, os.W_OK):
        return "the file is not writable"
    return str(exc)



def copy(source: str, target: str, *, timeout: float) -> None:
    """A consistent copy of the SQLite index `source` in the new file `target`; the source is
    never written, not even checkpointed, and keeps no file beside it that it did not have."""
    before = _at_rest(source)
    if before is not None:
        # No write-ahead log: no connection is open on it and every commit is in the file, so
        # its bytes are the database (copied ten times faster than page by page, and no -wal
        # or -shm file is made); a writer that came meanwhile changed the file or left a log,
        # and then the copy is made again the way a reader shares the file.
        shutil.copyfile(source, target)
        if _at_rest(source) == before:
            return
        os.unlink(target)
    _backup(_uri(source, READ_ONLY), target, timeout)


def _at_rest(path: str) -> tuple[int, int, int, int] | None:
    """The file's identity and change time when it has no write-ahead log beside it, else None."""
    if os.path.lexists(f"{path}-wal"):
        return None
    state = os.stat(path)
    return state.st_ino, state.st_dev, state.st_size, state.st_mtime_ns


def _backup(uri: str, target: str, timeout: float) -> None:
    reader = sqlite3.connect(uri, uri=True, timeout=timeout)
    try:
        writer = sqlite3.connect(target)
        try:
            reader.backup(writer)
        finally:
            writer.close()
    finally:
        reader.close()
