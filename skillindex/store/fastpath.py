"""Looks up a cached catalog in a SQLite index through the sqlite3 module alone."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence

from skillindex.store import sql
from skillindex.store.revision import HEAD

RootRuns = list[tuple[str, int]]


def sqlite_file(url: str) -> str | None:
    """The file of a plain `sqlite:///` URL; None for anything this path does not serve."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or "?" in url:
        return None
    path = url[len(prefix):]
    return path if path and path != ":memory:" else None


def cached_payload(path: str, index_name: str, roots: Sequence[str],
                   key_of: Callable[[RootRuns], str]) -> str | None:
    """The cached catalog for these roots, or None (no file, older schema, no entry, error)."""
    if not os.path.isfile(path):
        return None
    try:
        connection = sqlite3.connect(path, timeout=15)
    except sqlite3.Error:
        return None
    try:
        version = connection.execute(sql.SCHEMA_VERSION).fetchone()
        if version != (HEAD,):
            return None
        statement, params = sql.root_runs(roots)
        runs = [(root, run or 0) for root, run in connection.execute(
            statement, {"index_name": index_name, **params})]
        row = connection.execute(
            sql.CACHED_CATALOG, {"index_name": index_name, "key": key_of(runs)}).fetchone()
        return None if row is None else str(row[0])
    except sqlite3.Error:
        return None
    finally:
        connection.close()
