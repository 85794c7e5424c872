"""Answers one-shot reads, /skill: messages, audit listings and reindexes that find nothing new
through sqlite3, without SQLAlchemy.

Each function returns what the `SkillIndex` method of the same name would, or None when the
request needs the full path: not a plain SQLite file, another schema, no stored resolution for
these roots, a root that quarantines risky skills, a database error before anything is
disclosed, anything for a reindex to write but its run. The full path then answers, and reports
errors, as it always does. A read and a /skill: message run the library's own flow
(query/read.py, query/command.py) with this path's store, `Fast`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from itertools import islice, repeat
from pathlib import Path
from sqlite3 import Connection
from typing import Any, TypeVar

from skillindex.config import Environment, Settings, check_index_name, database_url, load_settings
from skillindex.errors import SkillIndexError
from skillindex.index.dialect import argument_hints
from skillindex.index.signing import signers
from skillindex.model import (
    AuditEvent,
    AuditListing,
    AuditRecord,
    Candidate,
    Disclosure,
    IndexReport,
    Limits,
    ManifestFile,
    RootSpec,
    ScanProblem,
    SessionLevels,
    SkillCommand,
    Status,
)
from skillindex.providers import plan_roots
from skillindex.query import advisories, disclose, find, staleness
from skillindex.query import audit as audit_flow
from skillindex.query import command as command_flow
from skillindex.query import read as read_flow
from skillindex.query.lookup import Found, Risky
from skillindex.query.reader import Here, Unanswered
from skillindex.query.resolve import Winner, rebase, stored_collision, stored_collision_dict
from skillindex.query.search import SearchHit, terms
from skillindex.store import fastpath, sql
from skillindex.store.chain import stored_time
from skillindex.store.fts import Ranked
from skillindex.store.rows import RootCache, candidate_of, events_of, levels_of, run_row
from skillindex.text import is_text

T = TypeVar("T")
KeyOf = Callable[[fastpath.RootRuns], str]


@dataclass(frozen=True, slots=True)
class _Setup:
    """The settings, the environment and the SQLite file of one command."""

    settings: Settings
    env: Environment
    path: str  # the SQLite file

    @property
    def index_name(self) -> str:
        return self.settings.index_name


def _setup(config: str | Path | None, db: str | None, cwd: str | Path | None,
          index: str | None) -> _Setup | None:
    try:
        env = Environment.from_os(cwd=cwd)
        path = fastpath.sqlite_file(database_url(db, env))
        if path is None:
            return None
        settings = load_settings(config, env)
        if index is not None:
            settings = replace(settings, index_name=check_index_name(index))
    except SkillIndexError:
        return None  # the full path reports it
    return _Setup(settings, env, path)


def _key_of(here: Here) -> KeyOf | None:
    """How the stored resolution of these roots is named, given their runs; None where a
    root quarantines: what is withheld depends on approvals, so no resolution is stored."""
    return None if here.quarantining else here.key_of


def _from_stored_set(setup: _Setup, read: Callable[[Connection, list[str], KeyOf], T | None],
                     ) -> tuple[T, Sequence[RootSpec]] | None:
    """What `read` finds in the stored resolution of this directory's roots (given the
    connection, the roots' paths and the resolution's key of their runs), with the roots;
    None where no stored resolution applies: a root that quarantines, no index at this
    schema, nothing stored for these roots and settings."""
    here = Here.of(setup.settings, plan_roots(setup.settings, setup.env).roots)
    key_of = _key_of(here)
    if key_of is None:
        return None
    with fastpath.opened(setup.path) as connection:
        if connection is None:
            return None
        found = read(connection, here.paths, key_of)
    return None if found is None else (found, here.roots)


class Fast:
    """The fast path's store: one sqlite3 connection to a SQLite index at the current schema.

    It answers a lookup only with a winner of the stored resolution, and raises Unanswered for
    everything else: no resolution stored, a root that quarantines, a name that does not win
    (the library then reports it, with its hint, and audits it)."""

    def __init__(self, connection: Connection, index_name: str) -> None:
        self.connection = connection
        self.index_name = index_name

    def stored_winner(self, here: Here, wanted: Sequence[tuple[str, str | None]]) -> Found | None:
        found = fastpath.stored_winner(self.connection, self.index_name, here.paths,
                                       here.key_of, wanted)
        if found is None:
            raise Unanswered  # nothing stored for these roots yet: the library stores it
        place, row, expected = found
        if row is None:
            raise Unanswered
        candidate = candidate_of(row[2:], {})
        specs = {spec.path: spec for spec in here.roots}
        winner = Winner(row[0], rebase(candidate, specs.get(candidate.root)),
                        stored_collision(row[1]))
        return place, winner, expected

    def stored_wins(self, here: Here, names: Sequence[str]) -> bool:
        wins = fastpath.stored_wins(self.connection, self.index_name, here.paths, here.key_of,
                                    names)
        if wins is None:
            raise Unanswered
        return wins

    def candidates(self, here: Here, names: Sequence[str], *,
                   all_findings: bool) -> list[Candidate]:
        raise Unanswered

    def winning_matches(self, here: Here, words: Sequence[str], *,
                        depth: int) -> tuple[Ranked, dict[int, list[Winner]]]:
        found = fastpath.stored_matches(self.connection, self.index_name, here.paths,
                                        here.key_of, words, depth)
        if found is None:
            raise Unanswered  # nothing stored for these roots yet: the library stores it
        ranked, rows = found
        specs = {spec.path: spec for spec in here.roots}
        cache: RootCache = {}
        winners: dict[int, list[Winner]] = {}
        for cid, name, collision, *columns in rows:
            candidate = candidate_of(columns, cache)
            winners.setdefault(int(cid), []).append(Winner(
                name, rebase(candidate, specs.get(candidate.root)), stored_collision(collision)))
        return ranked, winners

    def ranked(self, here: Here, words: Sequence[str], *, depth: int) -> Ranked:
        raise Unanswered

    def risky(self, here: Here, winners: Sequence[Winner]) -> Risky | None:
        raise Unanswered

    def feed(self, here: Here) -> advisories.Feed:
        raise Unanswered

    def skill_facts(self, candidate_ids: Sequence[int],
                    ) -> dict[int, tuple[str | None, str | None]]:
        raise Unanswered

    def uri_collision(self, candidate_id: int) -> str | None:
        found = fastpath.uri_collision(self.connection, candidate_id)
        if found is None:
            raise Unanswered
        return found or None

    def manifest_file(self, candidate_id: int, rel_path: str) -> ManifestFile | None:
        raise Unanswered

    def root_scans(self, here: Here) -> staleness.Scans:
        raise Unanswered

    def append(self, record: AuditRecord) -> None:
        if not fastpath.append_event(self.connection, self.index_name, record):
            raise Unanswered  # nothing is handed over: the library tries again and reports

    def audit_rows(self, here: Here, *, levels: bool, session: str | None, skill: str | None,
                   outcome: str | None,
                   since: datetime | None) -> AuditListing | list[SessionLevels]:
        if not all(is_text(value) for value in (session, skill) if value is not None):
            raise Unanswered  # sqlite3 cannot bind them; SQLAlchemy reports them
        statement, params = sql.audit_filter(
            sql.AUDIT_LEVELS if levels else sql.AUDIT_EVENTS, self.index_name,
            session=session, skill=skill, outcome=outcome,
            since=None if since is None else stored_time(since))
        rows = fastpath.audit_rows(self.connection, statement, params)
        if rows is None:
            raise Unanswered
        if levels:
            return [levels_of(row) for row in rows]
        return events_of(rows)


def _answered(setup: _Setup, flow: Callable[[Fast, Here], T], *,
              planned: bool = True) -> T | None:
    """What `flow` answers with the fast path's store and this directory's roots (none unless
    `planned`: the audit trail is the index's); None when it could not (Unanswered), or the
    index is not one this path reads."""
    with fastpath.opened(setup.path) as connection:
        if connection is None:
            return None
        roots = plan_roots(setup.settings, setup.env).roots if planned else ()
        here = Here.of(setup.settings, roots)
        try:
            return flow(Fast(connection, setup.index_name), here)
        except Unanswered:
            return None


def read(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
         index: str | None, uri: str, reason: str | None = None, session: str | None = None,
         max_bytes: int | None = None) -> Disclosure | None:
    """`SkillIndex.read(uri, ...)`, or None for the full path."""
    setup = _setup(config, db, cwd, index)
    if setup is None or (max_bytes is not None and max_bytes < 0):
        return None
    try:
        disclose.parse_uri_options(uri)
    except SkillIndexError:
        return None  # refused before any lookup: the full path audits and reports it
    return _answered(setup, lambda store, here: read_flow.read(
        store, here, uri, reason=reason, session=session, max_bytes=max_bytes))


def skill_command(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
                  index: str | None, name: str, args: str | Sequence[str] | None = None,
                  session: str | None = None,
                  reason: str | None = None) -> SkillCommand | None:
    """`SkillIndex.skill_command(name, args, ...)`, or None for the full path."""
    setup = _setup(config, db, cwd, index)
    if setup is None or not setup.settings.enable_skill_commands or not is_text(name):
        return None
    return _answered(setup, lambda store, here: command_flow.command(
        store, here, name, args, session=session, reason=reason))


def audit(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
          index: str | None, session: str | None = None, skill: str | None = None,
          outcome: str | None = None, since: str | None = None,
          levels: bool = False) -> list[AuditEvent] | list[SessionLevels] | None:
    """`SkillIndex.audit(...)`, or None for the full path (which also reports a filter it
    cannot take)."""
    setup = _setup(config, db, cwd, index)
    if setup is None:
        return None
    try:
        return _answered(setup, lambda store, here: audit_flow.rows(
            store, here, session=session, skill=skill, outcome=outcome, since=since,
            levels=levels), planned=False)
    except SkillIndexError:
        return None


@dataclass(frozen=True, slots=True)
class Listing:
    """What `skillindex list` prints: its table a column at a time (a cell a winner), the
    names several skills declare, and why the index may show fewer skills than the folders
    hold."""

    columns: list[Sequence[str]]  # name, scope, provider, precedence, finding codes, SKILL.md
    collisions: list[str]
    note: str | None
    hints: Sequence[str] = ()  # each winner's argument-hint ("" for none); () when none has one
    signers: Sequence[str] = ()  # each winner's verified signer ("" for none); () when none has one


def listing(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
            index: str | None) -> Listing | None:
    """The `list` table from the stored resolution, or None for the full path."""
    setup = _setup(config, db, cwd, index)
    if setup is None or not setup.settings.enabled:
        return None
    read = _from_stored_set(setup, lambda connection, paths, key_of: fastpath.stored_listing(
        connection, setup.index_name, paths, key_of))
    if read is None:
        return None
    (rows, stored_roots, findings, collided, scans, hosts, signed), roots = read
    codes: dict[int, set[tuple[bool, str]]] = {}
    for cid, code, severity in findings:
        codes.setdefault(cid, set()).add((severity != "error", code))
    shown = {cid: ",".join(code for _, code in sorted(found)) for cid, found in codes.items()}
    # Per root, once: the plan's scope, provider and precedence (rebase), else the stored ones.
    specs = {str(spec.path): spec for spec in roots}
    where: dict[int, tuple[str, str, str]] = {}
    for root_id, (root, *stored) in stored_roots.items():
        spec = specs.get(root)
        scope, provider, precedence = (stored if spec is None
                                       else (spec.scope, spec.provider, spec.precedence))
        where[root_id] = (str(scope), str(provider), str(precedence))
    # Then a column at a time, in C: a Python step per row costs more than reading it.
    names, cids, paths, root_ids = zip(*rows, strict=True) if rows else ((), (), (), ())
    places = list(zip(*map(where.__getitem__, root_ids), strict=True)) or [(), (), ()]
    columns: list[Sequence[str]] = [names, *places, list(map(shown.get, cids, repeat("-"))),
                                    paths]
    hinted = argument_hints(hosts)
    hints = list(map(hinted.get, cids, repeat(""))) if hinted else []
    signer_of = signers(signed)
    by = list(map(signer_of.get, cids, repeat(""))) if signer_of else []
    return Listing(columns, collided, staleness.note(
        setup.settings, lambda: staleness.stale_roots(roots, scans), roots), hints, by)


Entry = dict[str, object]
PAGE = 2_000  # candidates a read of `candidate_entries` holds at once


@contextmanager
def winner_entries(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
                   index: str | None) -> Iterator[Iterator[Entry] | None]:
    """What `list --json` prints of each winner (`Winner.as_dict`, its `argument_hint` where it
    declares one and its `signer` where its signature was verified), in catalog order, read
    from the stored resolution as they are printed (the block is one read transaction); None
    for the full path, as `listing`."""
    setup = _setup(config, db, cwd, index)
    roots = () if setup is None else plan_roots(setup.settings, setup.env).roots
    here = None if setup is None or not setup.settings.enabled else Here.of(setup.settings,
                                                                            roots)
    key_of = None if here is None else _key_of(here)
    if setup is None or here is None or key_of is None:
        yield None
        return
    with fastpath.opened(setup.path) as connection:
        if connection is None:
            yield None
            return
        with fastpath.stored_winners(connection, setup.index_name, here.paths,
                                     key_of) as stored:
            yield None if stored is None else _winners(stored, roots)


def _winners(stored: fastpath.StoredWinners, roots: Sequence[RootSpec]) -> Iterator[Entry]:
    specs = {str(spec.path): spec for spec in roots}
    where: dict[int, tuple[str, str, str, int]] = {}
    for root_id, (root, *kept) in stored.roots.items():
        spec = specs.get(root)  # rebased: the plan's scope, provider and precedence count
        scope, provider, precedence = (kept if spec is None
                                       else (str(spec.scope), spec.provider, spec.precedence))
        where[root_id] = (str(Path(root)), scope, provider, precedence)
    hints = argument_hints(stored.hosts)
    signer_of = signers(stored.signed)

    def winner(row: Sequence[Any]) -> Entry:
        # (ordinal, catalog name, collision, root id, then the candidate's entry columns)
        entry = _entry(row, 4, where[row[3]])
        entry["name"], entry["declared_name"] = row[1], entry["name"]  # in the same place
        entry["collision"] = None if row[2] is None else stored_collision_dict(row[2])
        if hint := hints.get(row[4]):
            entry["argument_hint"] = hint
        if signer := signer_of.get(row[4]):
            entry["signer"] = signer
        return entry

    return _entries(stored.rows, winner)


def _entry(row: Sequence[Any], at: int, place: tuple[str, str, str, int]) -> Entry:
    """`Candidate.as_dict` of the `sql.ENTRY_COLUMNS` that begin at `at` in `row`, found in
    the root `place` (path, scope, provider, precedence), with no findings yet."""
    root, scope, provider, precedence = place
    return {"name": row[at + 1], "description": row[at + 2], "path": row[at + 3], "root": root,
            "scope": scope, "provider": provider, "precedence": precedence,
            "status": row[at + 4], "enabled": bool(row[at + 5]),
            "model_invocation": not row[at + 6], "findings": []}


def _entries(pages: Iterator[list[Any]], start: Callable[[Sequence[Any]], Entry],
             ) -> Iterator[Entry]:
    """The entries of rows that end in `sql.ENTRY_COLUMNS`, a row per finding: `start` makes
    an entry of the first row of each (the rows of one entry share their first column), and
    the findings are added to it."""
    entry: Entry | None = None
    findings: list[Entry] = []
    current = None
    for rows in pages:
        for row in rows:
            if row[0] != current:
                if entry is not None:
                    yield entry
                current = row[0]
                entry = start(row)
                findings = entry["findings"]  # type: ignore[assignment]
            if row[-3] is not None:
                findings.append({"code": row[-3], "severity": row[-2], "message": row[-1]})
    if entry is not None:
        yield entry


@contextmanager
def candidate_entries(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
                      index: str | None, status: Status | None = None, code: str | None = None,
                      limit: int | None = None) -> Iterator[Iterator[Entry] | None]:
    """What `candidates --json` (`rejections --json` with `status`) prints of each candidate
    (`Candidate.as_dict`), in the order of `SkillIndex.iter_candidates`, read as they are
    printed (the block is one read transaction); None for the full path: not a SQLite index
    at this schema, the index switched off, a limit below 0 (which it reports)."""
    setup = _setup(config, db, cwd, index)
    if setup is None or not setup.settings.enabled or (limit is not None and limit < 0):
        yield None
        return
    roots = Here.of(setup.settings, plan_roots(setup.settings, setup.env).roots).by_precedence
    with fastpath.opened(setup.path) as connection:
        if connection is None:
            yield None
            return
        with fastpath.candidate_rows(connection, setup.index_name,
                                     [str(spec.path) for spec in roots],
                                     status=None if status is None else status.value,
                                     code=code) as found:
            yield None if found is None else islice(_candidates(found, roots), limit)


def _candidates(found: Iterator[tuple[str, Iterator[list[Any]]]],
                roots: Sequence[RootSpec]) -> Iterator[Entry]:
    for spec, (_root, pages) in zip(roots, found, strict=True):
        # Rebased on the plan's root, as the full path's are.
        yield from _entries(pages, partial(_entry, at=0, place=(
            str(spec.path), str(spec.scope), spec.provider, spec.precedence)))


def search(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
           index: str | None, query: str, limit: int) -> list[SearchHit] | None:
    """`SkillIndex.search(query, limit=limit)` by the library's own flow (query/find.py) from
    the stored resolution, or None for the full path (which also reports a query without words
    and a bad limit)."""
    setup = _setup(config, db, cwd, index)
    if setup is None or limit < 1 or not setup.settings.enabled:
        return None
    try:
        terms(query)
    except SkillIndexError:
        return None
    return _answered(setup, lambda store, here: find.search_hits(store, here, query,
                                                                 limit=limit))


def reindex(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
            index: str | None, all_roots: bool = False, jobs: int | None = None,
            progress: Callable[[int, int | None, str], None] | None = None,
            offline: bool = False) -> IndexReport | None:
    """`SkillIndex.reindex(all_roots=...)` when it finds every skill, root and problem as
    stored, which writes nothing but its run; None for the full path (whatever else there is
    to write). Up to `jobs` processes (default: a core each) share the walk."""
    from skillindex.index import parallel, recheck  # noqa: PLC0415  (this command's alone)

    setup = _setup(config, db, cwd, index)
    if setup is None or not setup.settings.enabled:
        return None
    started, clock = datetime.now(UTC), time.perf_counter()
    plan = plan_roots(setup.settings, setup.env)
    if not offline and any(spec.remote is not None for spec in plan.roots):
        return None  # a URL root is fetched first, by the full path
    # Unless a root quarantines, the stored resolution must be there for the roots as they
    # are, as the full path would leave it.
    key_of = _key_of(Here.of(setup.settings, plan.roots))
    found: list[tuple[dict[str, int], list[ScanProblem], int]] = []

    count = parallel.default_jobs() if jobs is None else jobs

    def check(stored: fastpath.StoredRoots) -> dict[str, object] | None:
        walked = recheck.unchanged(stored.roots, stored, limits=setup.settings.limits,
                                   progress=progress, jobs=count)
        if walked is None:
            return None
        found.append((*walked, len(stored.roots)))
        return run_row(index_name=setup.index_name, started_at=started,
                       finished_at=datetime.now(UTC), cwd=str(setup.env.cwd),
                       all_roots=all_roots, roots=len(stored.roots),
                       duration_s=time.perf_counter() - clock, counts=walked[0],
                       anchor=stored.anchor, as_text=True)

    with fastpath.opened(setup.path) as connection:
        if connection is None:
            if not os.path.exists(setup.path):  # a new index: every skill is new
                _workers_ahead(plan.roots, count, setup.settings.limits)
            return None
        run_id = fastpath.record_unchanged(connection, setup.index_name, plan.roots,
                                           all_roots=all_roots, key_of=key_of, check=check)
        if run_id is None:
            _workers_ahead(fastpath.never_indexed(connection, setup.index_name, plan.roots),
                           count, setup.settings.limits)
    if run_id is None:
        return None
    counts, problems, roots = found[0]
    return IndexReport(run_id=run_id, duration_s=time.perf_counter() - clock, roots=roots,
                       problems=(*plan.problems, *problems), fetches=(), **counts)


def _workers_ahead(new_roots: Sequence[RootSpec], jobs: int, limits: Limits) -> None:
    """Start the full path's workers now, on the roots it has never indexed, when these hold
    enough skills for them: they then scan while this process imports, not after."""
    from skillindex.index import parallel  # noqa: PLC0415

    if jobs > 1 and new_roots:
        parallel.start_ahead(jobs, [plan for _number, plan, _names in parallel.plan(
            [(spec, None) for spec in new_roots], {}, jobs, limits)])
