"""The library's store: SQLAlchemy sessions on the engine, opened for one question at a time,
and a transaction of its own for each write. It meets the Protocols the use cases state
(query/lookup.py, query/audit.py, query/read.py, ...); the sqlite3 fast path meets the same
ones with one connection (query/oneshot.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING

from skillindex.errors import StoreError
from skillindex.index import risk
from skillindex.index.skilldir import LEFT_OUT
from skillindex.model import (
    AuditListing,
    AuditRecord,
    Candidate,
    ChainReport,
    ManifestFile,
    SessionLevels,
)
from skillindex.query import advisories, staleness, winners
from skillindex.query.lookup import Found, Risky
from skillindex.query.reader import Here, NotStored, RootRuns
from skillindex.query.resolve import Winner
from skillindex.store import audit, feeds, queries, resolved, served, units
from skillindex.store import search as store_search
from skillindex.store import usage as store_usage
from skillindex.store.engine import read_only, sqlite_path
from skillindex.store.fts import Ranked
from skillindex.store.groupcommit import GroupCommit
from skillindex.store.units import READ

if TYPE_CHECKING:  # typing only: the sessions are the store's, opened here
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session


class Library:
    """The index on `engine`, as the library's use cases read and write it."""

    def __init__(self, engine: Engine, index_name: str, *, audit_lock_timeout: float) -> None:
        self.engine = engine
        self.index_name = index_name
        self.audit_lock_timeout = audit_lock_timeout
        self._appends = GroupCommit(self._append_all)
        # A SQLite file's audit rows go through its driver connection (store/audit.py).
        # The URL itself, not its text: a file name that is not UTF-8 has no text form.
        self._sqlite_file = sqlite_path(engine.url) is not None
        self._psycopg = engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg"

    @property
    def writable(self) -> bool:
        """False when the database was opened read-only (store/sqlitefile.py): then nothing
        is written but audit rows, which are refused."""
        return read_only(self.engine) is None

    def probe_write(self) -> None:
        """A StoreError when the database would not take a write (an audit row) now."""
        units.probe_write(self.engine)

    def session(self, doing: str = READ) -> AbstractContextManager[Session]:
        """A session to read in; database errors become one StoreError line."""
        return units.session(self.engine, doing)

    def transaction(self, doing: str, *, immediate: bool = True,
                    ) -> AbstractContextManager[Session]:
        """A session in one write transaction of its own (see `units.transaction`)."""
        return units.transaction(self.engine, doing, immediate=immediate)

    def resolution_set(self, session: Session, here: Here) -> int | None:
        """The id of the stored resolution of `here`'s roots, resolving and storing it first
        when there is none; None when it cannot be stored (a root quarantines, or a read-only
        database has none yet).

        Ends `session`'s transaction when it has to write, so call it before other reads.
        """
        if here.quarantining:
            return None
        found = winners.lookup(session, here.index_name, here.roots, here.rules)
        if found is not None or not self.writable:
            return found
        session.rollback()
        try:
            with self.transaction("store the resolution") as writer:
                winners.ensure(writer, here.index_name, here.roots, here.rules)
        except StoreError:
            # Another process stored the same resolution first, or the database is read-only:
            # either way what is stored now, if anything, is the answer.
            pass
        return winners.lookup(session, here.index_name, here.roots, here.rules)

    # lookup.Store

    def stored_winner(self, here: Here, wanted: Sequence[tuple[str, str | None]]) -> Found | None:
        with self.session() as session:
            set_id = self.resolution_set(session, here)
            if set_id is None:
                raise NotStored
            reader = winners.Reader(session, set_id, here.roots)
            for place, (name, rel_path) in enumerate(wanted):
                found = reader.winner(name)
                if found is not None:
                    return place, found, (None if rel_path is None else queries.manifest_file(
                        session, found.candidate.id, rel_path))
        return None

    def stored_wins(self, here: Here, names: Sequence[str]) -> bool:
        with self.session() as session:
            set_id = self.resolution_set(session, here)
            if set_id is None:
                raise NotStored
            reader = winners.Reader(session, set_id, here.roots)
            return any(reader.winner(name) is not None for name in names)

    def candidates(self, here: Here, names: Sequence[str], *,
                   all_findings: bool) -> list[Candidate]:
        with self.session() as session:
            return queries.candidates(session, here.index_name, here.paths, names=names,
                                      all_findings=all_findings)

    def risky(self, here: Here, winners: Sequence[Winner]) -> Risky | None:
        with self.session() as session:
            findings = queries.risk_findings(session, [w.candidate.id for w in winners],
                                             risk.CODES)
            if not findings:
                return None
            manifests = queries.manifest_files(session, list(findings))
            left_out = queries.risk_findings(session, list(findings), LEFT_OUT)
            approved = queries.approvals(session, here.index_name,
                                         [w.name for w in winners if w.candidate.id in findings])
        return Risky(findings, manifests, approved, left_out)

    def feed(self, here: Here) -> advisories.Feed:
        with self.session() as session:
            found = feeds.stored(session, here.index_name, here.settings.advisories)
        return advisories.Feed.of(advisory for stored in found
                                  for advisory in advisories.loads(stored.advisories))

    def signatures(self, candidate_ids: Sequence[int]) -> dict[int, str | None]:
        with self.session() as session:
            return queries.signatures(session, candidate_ids)

    def skill_facts(self, candidate_ids: Sequence[int],
                    ) -> dict[int, tuple[str | None, str | None]]:
        with self.session() as session:
            return feeds.skill_facts(session, candidate_ids)

    def uri_collision(self, candidate_id: int) -> str | None:
        with self.session() as session:
            return queries.uri_collision(session, candidate_id)

    def manifest_file(self, candidate_id: int, rel_path: str) -> ManifestFile | None:
        with self.session() as session:
            return queries.manifest_file(session, candidate_id, rel_path)

    def root_scans(self, here: Here) -> staleness.Scans:
        with self.session() as session:
            return queries.root_scans(session, here.index_name, here.paths)

    # audit.Appender

    def append(self, record: AuditRecord) -> None:
        """One audit row, committed before this returns (a reindex never holds it up long): on
        SQLite the write lock from BEGIN on, so reading the chain's head and appending after it
        cannot interleave with another process's append; on PostgreSQL waiting at most
        `audit_lock_timeout` seconds for the chain's lock. The rows of threads appending at
        once share a transaction (store/groupcommit.py). A database that will not take the row
        (read-only, full, gone) raises AuditUnwritableError: the disclosure is refused."""
        self._appends.append(record)

    def _append_all(self, records: Sequence[AuditRecord]) -> None:
        if self._sqlite_file:
            with units.audit_sqlite(self.engine) as connection:
                audit.append_sqlite(connection, self.index_name, records)
            return
        if self._psycopg:
            with units.audit_driver(self.engine) as connection:
                audit.append_postgresql(connection, self.index_name, records,
                                        lock_timeout=self.audit_lock_timeout)
            return
        with units.audit_transaction(self.engine) as session:
            audit.append_all(session, self.index_name, records,
                             lock_timeout=self.audit_lock_timeout)

    # read.Published

    def published_file(self, here: Here, resolution: str, name: str,
                       rel_path: str) -> tuple[Candidate, ManifestFile | None] | None:
        # A connection, not a session: this is every served read's one lookup.
        with units.failing_as(self.engine, READ), self.engine.connect() as connection:
            return served.winner_file(connection, here.index_name, resolution, name, rel_path)

    # quick.Cache

    def cached_catalog(self, here: Here, key_of: Callable[[RootRuns, int], str], *,
                       usage: bool) -> tuple[str, str | None]:
        with self.session() as session:
            last = store_usage.last_event(session) if usage else 0
            key = key_of(resolved.root_runs(session, here.index_name, here.paths), last)
            return key, queries.cached_catalog(session, here.index_name, key)

    # audit.Trail

    def audit_rows(self, here: Here, *, levels: bool, session: str | None, skill: str | None,
                   outcome: str | None,
                   since: datetime | None) -> AuditListing | list[SessionLevels]:
        with self.session() as db:
            if levels:
                return queries.session_levels(db, here.index_name, session_id=session,
                                              skill=skill, outcome=outcome, since=since)
            return queries.events(db, here.index_name, session_id=session, skill=skill,
                                  outcome=outcome, since=since)

    def verify_chain(self, *, head: str | None) -> ChainReport:
        """This index's audit chain recomputed from its first event (store/audit.py)."""
        with self.session("read the audit log") as session:
            return audit.verify(session, self.index_name, head=head)

    # find.Store

    def winning_matches(self, here: Here, words: Sequence[str], *,
                        depth: int) -> tuple[Ranked, dict[int, list[Winner]]]:
        with self.session() as session:
            set_id = self.resolution_set(session, here)  # first: it may end the transaction
            if set_id is None:
                raise NotStored
            ranked = self.matches(session, here, words, depth=depth)
            reader = winners.Reader(session, set_id, here.roots)
            return ranked, reader.among([m.candidate_id for m in ranked.matches])

    def ranked(self, here: Here, words: Sequence[str], *, depth: int) -> Ranked:
        with self.session() as session:
            return self.matches(session, here, words, depth=depth)

    def matches(self, session: Session, here: Here, words: Sequence[str], *,
                depth: int | None) -> Ranked:
        """The accepted candidates of `here`'s roots among the `depth` best matches of these
        words (every match when None), best first (store/search.py)."""
        with units.failing_as(self.engine, "search the index"):
            return store_search.matches(session, here.index_name, here.paths, words,
                                        depth=depth)
