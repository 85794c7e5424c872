"""Creates engines: SQLite in WAL mode with a busy timeout and foreign keys, private files;
PostgreSQL through psycopg."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import sqlite3
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from skillindex import extras
from skillindex.errors import AuditUnwritableError, ConfigError, IndexMissingError, StoreError
from skillindex.store import sql, sqlitefile

BUSY_TIMEOUT_MS = sql.SQLITE_BUSY_MS
# One handler however many engines are made (`addHandler` keeps a handler once).
_DRIVER_WARNINGS = logging.NullHandler()
# Execution option: on SQLite, `connection.execution_options(**IMMEDIATE)` makes the next
# transaction take the write lock at BEGIN, so a read-then-write transaction cannot lose a race
# to another writer half way (SQLite would fail it at once instead of waiting). Ignored elsewhere.
IMMEDIATE = {"sqlite_begin": "IMMEDIATE"}
# Connections a pool keeps open between uses: what a server's readers (serve/mcp.py READERS),
# its audit writer and its poll hold at once, so that none is opened and closed per request
# (a PostgreSQL connection is a server process). A one-shot command opens only what it uses.
POOL_SIZE = 12


@dataclass(slots=True)
class _Access:
    """How the last connection of an engine to a SQLite file opened it (sqlitefile.Opened)."""

    why: str | None = None  # why it could not be written; None: read-write


_ACCESS: weakref.WeakKeyDictionary[Engine, _Access] = weakref.WeakKeyDictionary()


def read_only(engine: Engine) -> str | None:
    """Why the SQLite file of `engine` was opened read-only, in words; None when it was opened
    read-write, is not a SQLite file, or has not been opened yet."""
    access = _ACCESS.get(engine)
    return None if access is None else access.why


def sqlite_path(url: str | URL) -> Path | None:
    """The database file of a SQLite URL, None for other backends and in-memory databases."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    if parsed.query.get("uri") in ("true", "1"):
        return None  # `file:…?mode=ro` URIs: SQLite opens them itself, nothing is created
    return Path(parsed.database)


def _prepare_sqlite_file(path: Path) -> None:
    # The index records what every agent host loaded; keep it readable by its owner only.
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
    if not path.exists():
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def make_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for `url`; a missing SQLite file (and its folder) is made only with `create`."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"not a database URL: {url!r}") from exc
    parsed = parsed.set(drivername=_driver(parsed.drivername))
    path = sqlite_path(url)
    if path is not None and not create and not path.exists():
        raise IndexMissingError(str(path))
    if path is not None:
        try:
            _prepare_sqlite_file(path)
        except OSError as exc:
            raise ConfigError(f"cannot create the database {path}: {exc.strerror}") from exc
    try:
        # hide_parameters: not even a logged or re-raised error carries what a skill file said.
        if path is not None:
            access = _Access()
            engine = create_engine(parsed, hide_parameters=True, pool_size=POOL_SIZE,
                                   creator=_file_connector(str(path), access))
            _ACCESS[engine] = access
            _configure_sqlite(engine, pragmas=False)
        elif parsed.get_backend_name() == "sqlite":
            engine = create_engine(parsed, hide_parameters=True,
                                   connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
            _configure_sqlite(engine, pragmas=True)
        elif parsed.get_backend_name() == "postgresql":
            # A server lost under a connection is a StoreError to the caller; the driver's
            # warning as it closes the dead connection ("error ignored terminating
            # <psycopg.Pipeline [BAD]>") would reach stderr raw besides, through logging's
            # last-resort handler. An application that configures logging still receives it.
            logging.getLogger("psycopg").addHandler(_DRIVER_WARNINGS)
            # The application name tells a DBA which sessions (and advisory locks) are ours.
            engine = create_engine(parsed, pool_pre_ping=True, hide_parameters=True,
                                   pool_size=POOL_SIZE,
                                   connect_args={"application_name": "skillindex"})
        else:
            engine = create_engine(parsed, pool_pre_ping=True, hide_parameters=True)
    except ImportError as exc:
        hint = (f" ({extras.hint('postgresql')})"
                if parsed.get_backend_name() == "postgresql" else "")
        raise ConfigError(f"cannot use database URL {parsed.render_as_string()!r}: "
                          f"{exc}{hint}") from exc
    except ArgumentError as exc:
        raise ConfigError(f"cannot use database URL {parsed.render_as_string()!r}: {exc}") from exc
    return engine


def _driver(name: str) -> str:
    """`postgres://` and `postgresql://` (as libpq, Heroku and most tools write them) mean the
    installed driver: psycopg 3 (the `postgresql` extra), else psycopg2; SQLAlchemy alone
    would try psycopg2 for one and refuse the other."""
    backend, _, driver = name.partition("+")
    if backend not in ("postgres", "postgresql"):
        return name
    if not driver:
        has_v3 = importlib.util.find_spec("psycopg") is not None
        driver = "psycopg" if has_v3 or importlib.util.find_spec("psycopg2") is None else (
            "psycopg2")
    return f"postgresql+{driver}"


def store_error(exc: Exception, doing: str, *, url: object = None,
                why: str | None = None) -> StoreError:
    """One line for the user: what could not be done and what the database said (or, for a
    file opened read-only, `why` it could not be written).

    Never the statement or its parameters (they may hold what a caller passed in), nor
    SQLAlchemy's link to its documentation; a read-only SQLite file or folder is named.
    """
    where = f" {_shown(url)}" if url is not None else ""
    return StoreError(f"cannot {doing}{where}: {_said(exc, url, why)}")


def audit_error(exc: Exception, *, url: object, why: str | None) -> AuditUnwritableError:
    """The refusal of a disclosure whose audit row the database would not take."""
    return AuditUnwritableError(_shown(url), _said(exc, url, why))


def _said(exc: Exception, url: object, why: str | None) -> str:
    original = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(original).splitlines() if line.strip()]
    said = next((line for line in lines if not line.startswith("(Background on this error")),
                type(original).__name__)
    said = re.sub(r"^\((?:[\w.]+)\)\s*", "", said)
    if why is not None and "readonly database" in said:
        return f"{why}; it was opened read-only"
    path = sqlite_path(str(url)) if url is not None else None
    if path is not None and "readonly database" in said:
        folder = path.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            said += (f"; the folder {folder} must be writable too (SQLite keeps its -wal and "
                     "-shm files beside the database)")
        elif not os.access(path, os.W_OK):
            said += f"; the file {path} must be writable"
    return said


def _shown(url: object) -> str:
    path = sqlite_path(str(url))
    if path is not None:
        return str(path)
    try:
        return make_url(str(url)).render_as_string(hide_password=True)
    except ArgumentError:
        return "<database>"


def _file_connector(path: str, access: _Access) -> Any:
    """A SQLite file's connections, read-only where it cannot be written (store/sqlitefile.py),
    each telling `access` how it opened the file."""
    def connect() -> sqlite3.Connection:
        opened = sqlitefile.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, pooled=True)
        access.why = opened.why
        return opened.connection

    return connect


def _configure_sqlite(engine: Engine, *, pragmas: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide where transactions begin (the documented recipe).
        dbapi_connection.isolation_level = None
        if pragmas:  # a file's connections have theirs from sqlitefile.connect
            cursor = dbapi_connection.cursor()
            for pragma in sql.SQLITE_PRAGMAS:
                cursor.execute(pragma)
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get("sqlite_begin")
        connection.exec_driver_sql("BEGIN IMMEDIATE" if mode == "IMMEDIATE" else "BEGIN")
