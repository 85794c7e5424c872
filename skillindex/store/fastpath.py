"""Reads a SQLite index at the current schema, appends to its audit chain and records a reindex
that found nothing new, through sqlite3.

The statements are those of store/sql.py and the chain is store/chain.py's, so what this path
reads and writes is what the SQLAlchemy path would. Every function answers None (or False)
where the caller should take that path instead: no file, another schema, a database error.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from skillindex import model
from skillindex.errors import StoreError
from skillindex.model import KnownSkill
from skillindex.store import chain, fts, sql, sqlitefile
from skillindex.store.chain import fields_of, linked
from skillindex.store.revision import HEAD
from skillindex.store.rows import add_known, manifest_file_of, scans_of, spec_of

RootRuns = list[tuple[str, int]]
T = TypeVar("T")
KnownSkills = dict[str, dict[str, KnownSkill]]
Found = tuple[int, Any, model.ManifestFile | None]  # place, winner row, manifest row
NO_WINNER: Found = (-1, None, None)


def sqlite_file(url: str) -> str | None:
    """The file of a plain `sqlite:///` URL; None for anything this path does not serve."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or "?" in url:
        return None
    path = url[len(prefix):]
    return path if path and path != ":memory:" else None


@contextmanager
def opened(path: str) -> Iterator[sqlite3.Connection | None]:
    """A connection to the index at `path` when its schema is the one this code expects
    (transactions are begun explicitly); None when it is not, or cannot be opened."""
    connection = None
    if os.path.isfile(path):
        try:
            # Read-only where the file cannot be written: it still answers what it holds.
            connection = sqlitefile.connect(path, timeout=sql.SQLITE_BUSY_MS / 1000).connection
            if connection.execute(sql.SCHEMA_VERSION).fetchone() != (HEAD,):
                connection.close()
                connection = None
        except sqlite3.Error:
            if connection is not None:
                connection.close()
            connection = None
    try:
        yield connection
    finally:
        if connection is not None:
            connection.close()


def root_runs(connection: sqlite3.Connection, index_name: str, roots: Sequence[str]) -> RootRuns:
    statement, params = sql.root_runs(roots)
    return [(root, run or 0) for root, run in connection.execute(
        statement, {"index_name": index_name, **params})]


def cached_payload(path: str, index_name: str, roots: Sequence[str],
                   key_of: Callable[[RootRuns], str]) -> str | None:
    """The cached catalog for these roots, or None (no file, older schema, no entry, error)."""
    with opened(path) as connection:
        if connection is None:
            return None
        try:
            runs = root_runs(connection, index_name, roots)
            row = connection.execute(
                sql.CACHED_CATALOG, {"index_name": index_name, "key": key_of(runs)}).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else str(row[0])


def _set_id(connection: sqlite3.Connection, index_name: str, roots: Sequence[str],
            key_of: Callable[[RootRuns], str]) -> int | None:
    """The stored resolution of these roots as the index is now, if there is one."""
    runs = root_runs(connection, index_name, roots)
    found = connection.execute(
        sql.SET_BY_KEY, {"index_name": index_name, "key": key_of(runs)}).fetchone()
    return None if found is None else int(found[0])


def _in_stored_set(connection: sqlite3.Connection, index_name: str, roots: Sequence[str],
                   key_of: Callable[[RootRuns], str], read: Callable[[int], T | None]) -> T | None:
    """`read(set_id)` of the stored resolution of these roots as the index is now, in one read
    transaction (so every answer is of one state of the index); None when no resolution is
    stored for them, or the database fails."""
    try:
        connection.execute("BEGIN")
        try:
            set_id = _set_id(connection, index_name, roots, key_of)
            return None if set_id is None else read(set_id)
        finally:
            connection.execute("COMMIT")
    except sqlite3.Error:
        return None


def stored_winner(connection: sqlite3.Connection, index_name: str, roots: Sequence[str],
                  key_of: Callable[[RootRuns], str],
                  wanted: Sequence[tuple[str, str | None]]) -> Found | None:
    """The first of the `wanted` (name, file) the stored resolution of these roots has a winner
    for: its place in `wanted`, its row (`sql.WINNER_BY_NAME`) and the file's manifest row
    (None when no file is asked, or it was not indexed); NO_WINNER when no name wins.

    None when no resolution is stored for the roots as they are now, or the database fails.
    """
    def read(set_id: int) -> Found:
        for place, (name, rel_path) in enumerate(wanted):
            row = connection.execute(
                sql.WINNER_BY_NAME, {"set_id": set_id, "name": name}).fetchone()
            if row is not None:
                expected = None if rel_path is None else connection.execute(
                    sql.MANIFEST_FILE, {"candidate_id": row[2], "rel_path": rel_path}).fetchone()
                return place, row, manifest_file_of(expected)
        return NO_WINNER

    return _in_stored_set(connection, index_name, roots, key_of, read)


def stored_wins(connection: sqlite3.Connection, index_name: str, roots: Sequence[str],
                key_of: Callable[[RootRuns], str], names: Sequence[str]) -> bool | None:
    """Whether one of `names` has a winner in the stored resolution of these roots; None when
    no resolution is stored for them, or the database fails."""
    def read(set_id: int) -> bool:
        return any(connection.execute(sql.WINNER_BY_NAME, {"set_id": set_id, "name": name})
                   .fetchone() is not None for name in names)

    return _in_stored_set(connection, index_name, roots, key_of, read)


def uri_collision(connection: sqlite3.Connection, candidate_id: int) -> str | None:
    """The `uri-collision` warning recorded on the candidate, "" when none; None when the
    database fails."""
    try:
        row = connection.execute(sql.URI_COLLISION, {"candidate_id": candidate_id}).fetchone()
    except sqlite3.Error:
        return None
    return "" if row is None else str(row[0])


Listed = tuple[list[Any], dict[int, Any], list[Any], list[str],
               dict[str, tuple[bool, datetime | None]], dict[int, str], dict[int, str]]


def stored_listing(connection: sqlite3.Connection, index_name: str, roots: Sequence[str],
                   key_of: Callable[[RootRuns], str]) -> Listed | None:
    """The rows of `sql.LISTING`, their roots by id (`sql.LISTING_ROOTS`), the rows of
    `sql.LISTING_FINDINGS`, the names in collision (once each), the roots' last scans
    (`sql.ROOT_SCANS`), the host fields and the signatures by candidate id (`sql.LISTING_HOSTS`,
    `sql.LISTING_SIGNATURES`), of one state of the index; None when no resolution is stored
    for the roots as they are now, or the database fails."""
    def read(set_id: int) -> Listed:
        where = {"set_id": set_id}
        rows = connection.execute(sql.LISTING, where).fetchall()
        stored_roots = {row[0]: row[1:] for row in connection.execute(
            sql.LISTING_ROOTS, {"index_name": index_name})}
        findings = connection.execute(sql.LISTING_FINDINGS, where).fetchall()
        collided = list(dict.fromkeys(name for (name,) in connection.execute(
            sql.COLLIDED_NAMES, where)))
        statement, params = sql.root_scans(roots)
        scans = scans_of(connection.execute(statement, {"index_name": index_name, **params}))
        hosts = dict(connection.execute(sql.LISTING_HOSTS, where).fetchall())
        signed = dict(connection.execute(sql.LISTING_SIGNATURES, where).fetchall())
        return rows, stored_roots, findings, collided, scans, hosts, signed

    return _in_stored_set(connection, index_name, roots, key_of, read)


@dataclass(frozen=True, slots=True)
class StoredWinners:
    """What `list --json` reads of the stored resolution of the roots, in one transaction."""

    roots: dict[int, tuple[Any, ...]]  # the index's roots by id (`sql.LISTING_ROOTS`)
    hosts: dict[int, str]  # the host fields of the winners that have any (`sql.LISTING_HOSTS`)
    rows: Iterator[list[Any]]  # the rows of `sql.WINNER_ENTRIES`, some thousands at a time
    signed: dict[int, str]  # the signatures of the winners that hold one (`sql.LISTING_SIGNATURES`)


@contextmanager
def stored_winners(connection: sqlite3.Connection, index_name: str, roots: Sequence[str],
                   key_of: Callable[[RootRuns], str]) -> Iterator[StoredWinners | None]:
    """The winners of the stored resolution of these roots as the index is now, read in one
    read transaction that lasts the block (so every row is of one state of the index); None
    when no resolution is stored for them, or the database fails before a row is read. A
    failure while the rows are read is a StoreError."""
    def read(set_id: int) -> StoredWinners:
        where = {"set_id": set_id}
        return StoredWinners(
            {row[0]: row[1:] for row in connection.execute(sql.LISTING_ROOTS,
                                                           {"index_name": index_name})},
            dict(connection.execute(sql.LISTING_HOSTS, where).fetchall()),
            _streamed(connection, sql.WINNER_ENTRIES, where),
            dict(connection.execute(sql.LISTING_SIGNATURES, where).fetchall()))

    with _reading(connection) as began:
        found = None
        if began:
            try:
                set_id = _set_id(connection, index_name, roots, key_of)
                found = None if set_id is None else read(set_id)
            except sqlite3.Error:
                found = None
        yield found


@contextmanager
def candidate_rows(connection: sqlite3.Connection, index_name: str, roots: Sequence[str], *,
                   status: str | None, code: str | None,
                   ) -> Iterator[Iterator[tuple[str, Iterator[list[Any]]]] | None]:
    """The candidates of each of these roots, in their order, as the rows of
    `sql.candidate_entries` (some thousands at a time) in one read transaction that lasts the
    block; None when the database fails before. A failure while they are read is a
    StoreError."""
    statement = sql.candidate_entries(status=status is not None, code=code is not None)

    def each() -> Iterator[tuple[str, Iterator[list[Any]]]]:
        for root in roots:
            yield root, _streamed(connection, statement, {
                "index_name": index_name, "root": root, "status": status, "code": code})

    with _reading(connection) as began:
        yield each() if began else None


@contextmanager
def _reading(connection: sqlite3.Connection) -> Iterator[bool]:
    """One read transaction for the block; False when it could not begin."""
    try:
        connection.execute("BEGIN")
    except sqlite3.Error:
        yield False
        return
    try:
        yield True
    finally:
        with suppress(sqlite3.Error):  # a read: nothing is lost, and the connection closes next
            connection.execute("COMMIT")


def _streamed(connection: sqlite3.Connection, statement: str,
              params: dict[str, Any]) -> Iterator[list[Any]]:
    """The rows of one statement, some thousands at a time, never all at once."""
    try:
        cursor = connection.execute(statement, params)
        while rows := cursor.fetchmany(2_000):
            yield rows
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the index: {exc}") from exc


def stored_matches(connection: sqlite3.Connection, index_name: str, roots: Sequence[str],
                   key_of: Callable[[RootRuns], str], terms: Sequence[str],
                   depth: int) -> tuple[fts.Ranked, list[Any]] | None:
    """The matches of the terms among the `depth` best (store/fts.py) and the rows of
    `sql.SEARCH_WINNERS` for those of them that win in the stored resolution of these roots,
    read in one transaction; None when no resolution is stored or the database fails."""
    def run(statement: str, params: dict[str, Any]) -> Iterable[Sequence[Any]]:
        return connection.execute(statement, params)

    def read(set_id: int) -> tuple[fts.Ranked, list[Any]]:
        ranked = fts.matches(run, index_name, roots, terms, depth=depth,
                             weights=fts.DEFAULT_WEIGHTS)
        if not ranked.matches:
            return ranked, []
        ids = ", ".join(str(match.candidate_id) for match in ranked.matches)
        return ranked, connection.execute(sql.SEARCH_WINNERS.format(ids=ids),
                                          {"set_id": set_id}).fetchall()

    return _in_stored_set(connection, index_name, roots, key_of, read)


def append_event(connection: sqlite3.Connection, index_name: str,
                 record: model.AuditRecord) -> bool:
    """Append one event to the index's chain exactly as `audit.append` does on SQLite; False,
    with nothing written, when the database refuses it."""
    try:
        connection.execute("BEGIN IMMEDIATE")  # the head read and the insert are one step
        try:
            head = connection.execute(sql.AUDIT_HEAD, {"index_name": index_name}).fetchone()
            row = linked(fields_of(index_name, record), head, datetime.now(UTC))
            connection.execute(sql.AUDIT_APPEND, row).fetchall()
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    except sqlite3.Error:
        return False
    return True


def audit_rows(connection: sqlite3.Connection, statement: str,
               params: dict[str, Any]) -> list[Any] | None:
    """The rows of one audit listing (`sql.audit_filter`); None when the database fails."""
    try:
        return connection.execute(statement, params).fetchall()
    except sqlite3.Error:
        return None


@dataclass(frozen=True, slots=True)
class StoredRoots:
    """What the index holds of the roots a reindex walks, as it compares the disk with it."""

    roots: tuple[model.RootSpec, ...]  # the roots to walk, in order
    known: KnownSkills  # per root path, per skill directory (`sql.KNOWN_SKILLS`)
    values: dict[str, tuple[Any, ...]]  # per root of the index, its `sql.ROOT_VALUES`
    issues: dict[str, list[tuple[str, str, str]]]  # per root path (`sql.SCAN_ISSUES`)
    anchor: tuple[str | None, int]  # the audit chain's head and length (`chain.anchor`)


def never_indexed(connection: sqlite3.Connection, index_name: str,
                  roots: Sequence[model.RootSpec]) -> list[model.RootSpec]:
    """Those of these roots the index holds nothing of (an error reads as none)."""
    try:
        indexed = {row[0] for row in connection.execute(sql.INDEX_ROOTS,
                                                       {"index_name": index_name})}
    except sqlite3.Error:
        return []
    return [spec for spec in roots if str(spec.path) not in indexed]


def record_unchanged(connection: sqlite3.Connection, index_name: str,
                     planned: Sequence[model.RootSpec], *, all_roots: bool,
                     key_of: Callable[[RootRuns], str] | None,
                     check: Callable[[StoredRoots], dict[str, object] | None]) -> int | None:
    """Read what the index holds of the planned roots (and, with `all_roots`, of every other
    root it holds), let `check` compare the disk with it, and insert the run it returns
    (`sql.INSERT_RUN`), all in one transaction; the run's id.

    None, with nothing written, when `check` finds a difference, another reindex holds the
    index's lock, no resolution of the planned roots is stored (with `key_of`), or the
    database fails; a write committed by another connection while `check` ran fails the
    insert, since SQLite will not let a transaction write over a state it did not read.
    """
    where = {"index_name": index_name}
    planned_paths = [str(spec.path) for spec in planned]
    try:
        connection.execute("BEGIN")
        try:
            if connection.execute(sql.REINDEX_HOLDER, where).fetchone() is not None:
                return None
            if key_of is not None and _set_id(connection, index_name, planned_paths,
                                              key_of) is None:
                return None
            stored = connection.execute(sql.INDEX_ROOTS, where).fetchall()
            values = {row[0]: tuple(row[1:]) for row in stored}
            roots = tuple(planned)
            if all_roots:
                roots += tuple(spec for spec in map(spec_of, stored)
                               if str(spec.path) not in planned_paths)
            paths = [str(spec.path) for spec in roots]
            known: KnownSkills = {}
            statement, params = sql.for_paths(sql.KNOWN_SKILLS, paths)
            add_known(known, connection.execute(statement, {**where, **params}))
            issues: dict[str, list[tuple[str, str, str]]] = {}
            statement, params = sql.for_paths(sql.SCAN_ISSUES, paths)
            for root, path, code, message in connection.execute(statement, {**where, **params}):
                issues.setdefault(root, []).append((path, code, message))
            row = check(StoredRoots(roots, known, values, issues,
                                    chain.anchor(connection.execute, index_name)))
            if row is None:
                return None
            ((run_id,),) = connection.execute(sql.INSERT_RUN, row).fetchall()
            connection.execute("COMMIT")
            return int(run_id)
        finally:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
    except sqlite3.Error:
        return None
