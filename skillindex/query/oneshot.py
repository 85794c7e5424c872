"""Answers one-shot reads, /skill: messages, audit listings and reindexes that find nothing new
through sqlite3, without SQLAlchemy.

Each function returns what the `SkillIndex` method of the same name would, or None when the
request needs the full path: not a plain SQLite file, another schema, no stored resolution for
these roots, a root that quarantines risky skills, a name that does not win, a database error
before anything is disclosed, anything for a reindex to write but its run. The full path then
answers, and reports errors, as it always does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import repeat
from pathlib import Path
from sqlite3 import Connection
from typing import TypeVar

from skillindex.config import Environment, Settings, check_index_name, database_url, load_settings
from skillindex.errors import SkillIndexError
from skillindex.index.skilldir import ENTRY
from skillindex.model import (
    AUDIT_OUTCOMES,
    AuditEvent,
    Candidate,
    Disclosure,
    IndexReport,
    Level,
    ManifestFile,
    RiskPolicy,
    RootSpec,
    ScanProblem,
    SessionLevels,
    SkillCommand,
)
from skillindex.providers import plan_roots
from skillindex.query import disclose, staleness
from skillindex.query.resolve import Rules, Winner, rebase, set_key, stored_collision
from skillindex.query.search import SearchHit, terms
from skillindex.store import fastpath, sql
from skillindex.store.chain import since_of, stored_time
from skillindex.store.rows import RootCache, candidate_of, events_of, levels_of, run_row
from skillindex.text import is_text

T = TypeVar("T")
KeyOf = Callable[[fastpath.RootRuns], str]


@dataclass(frozen=True, slots=True)
class _Here:
    settings: Settings
    env: Environment
    path: str  # the SQLite file

    @property
    def index_name(self) -> str:
        return self.settings.index_name


def _here(config: str | Path | None, db: str | None, cwd: str | Path | None,
          index: str | None) -> _Here | None:
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
    return _Here(settings, env, path)


def _key_of(here: _Here, roots: Sequence[RootSpec]) -> KeyOf | None:
    """How the stored resolution of these roots is named, given their runs; None where a
    root quarantines: what is withheld depends on approvals, so no resolution is stored."""
    if any(spec.risk_policy is RiskPolicy.QUARANTINE for spec in roots):
        return None
    rules = Rules.from_settings(here.settings)
    return lambda runs: set_key(runs, roots, rules)


def _winner(connection: Connection, here: _Here, roots: Sequence[RootSpec],
            wanted: Sequence[tuple[str, str]]) -> tuple[int, Candidate, ManifestFile | None] | None:
    """The first (name, file) of `wanted` whose name wins here, with its candidate and the
    file's manifest row, from the stored resolution of these roots."""
    key_of = _key_of(here, roots)
    if key_of is None:
        return None
    found = fastpath.stored_winner(connection, here.index_name, [str(s.path) for s in roots],
                                   key_of, wanted)
    if found is None:
        return None
    place, row, expected = found
    candidate = candidate_of(row[2:], {})
    specs = {spec.path: spec for spec in roots}
    return place, rebase(candidate, specs.get(candidate.root)), expected


def _from_stored_set(here: _Here, read: Callable[[Connection, list[str], KeyOf], T | None],
                     ) -> tuple[T, Sequence[RootSpec]] | None:
    """What `read` finds in the stored resolution of this directory's roots (given the
    connection, the roots' paths and the resolution's key of their runs), with the roots;
    None where no stored resolution applies: a root that quarantines, no index at this
    schema, nothing stored for these roots and settings."""
    roots = plan_roots(here.settings, here.env).roots
    key_of = _key_of(here, roots)
    if key_of is None:
        return None
    with fastpath.opened(here.path) as connection:
        if connection is None:
            return None
        found = read(connection, [str(spec.path) for spec in roots], key_of)
    return None if found is None else (found, roots)


def _audited(connection: Connection, here: _Here, attempt: disclose.Attempt, *,
             reason: str | None, session: str | None, act: Callable[[], T]) -> T | None:
    """`act()`, then its audit row, as `SkillIndex._audited` writes it; None, with nothing
    handed over, when the row cannot be written (the full path then tries again and reports)."""
    def logged(outcome: str) -> bool:
        record = attempt.record(outcome=outcome, reason=reason, session=session)
        return fastpath.append_event(connection, here.index_name, record)

    try:
        result = act()
    except SkillIndexError as exc:
        if not logged(exc.outcome):
            return None
        raise
    except Exception:
        if not logged("error"):
            return None
        raise
    except BaseException:
        logged("error")
        raise
    return result if logged(disclose.OK) else None


def read(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
         index: str | None, uri: str, reason: str | None = None, session: str | None = None,
         max_bytes: int | None = None) -> Disclosure | None:
    """`SkillIndex.read(uri, ...)`, or None for the full path."""
    here = _here(config, db, cwd, index)
    if here is None or (max_bytes is not None and max_bytes < 0):
        return None
    try:
        options = disclose.parse_uri_options(uri)
    except SkillIndexError:
        return None  # refused before any lookup: the full path audits and reports it
    with fastpath.opened(here.path) as connection:
        if connection is None:
            return None
        roots = plan_roots(here.settings, here.env).roots
        # Bytes of argv that are not UTF-8 name no skill (and sqlite3 cannot bind them).
        refs = [ref for ref in options if is_text(ref.name)]
        found = _winner(connection, here, roots, [(ref.name, ref.file) for ref in refs])
        if found is None:
            return None
        place, candidate, expected = found
        ref = refs[place]
        attempt = disclose.Attempt.of_uri(uri)
        attempt.aim(ref)
        rules = disclose.ReadRules.of_root(
            candidate.root, roots, allow_hardlinks=here.settings.allow_hardlinks,
            max_file_bytes=here.settings.max_file_bytes)
        return _audited(connection, here, attempt, reason=reason, session=session,
                        act=lambda: disclose.disclose(uri, ref, candidate, expected,
                                                      max_bytes=max_bytes, attempt=attempt,
                                                      rules=rules))


def skill_command(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
                  index: str | None, name: str, args: str | Sequence[str] | None = None,
                  session: str | None = None,
                  reason: str | None = None) -> SkillCommand | None:
    """`SkillIndex.skill_command(name, args, ...)`, or None for the full path."""
    here = _here(config, db, cwd, index)
    if here is None or not here.settings.enable_skill_commands or not is_text(name):
        return None
    joined = disclose.command_args(args)
    with fastpath.opened(here.path) as connection:
        if connection is None:
            return None
        roots = plan_roots(here.settings, here.env).roots
        found = _winner(connection, here, roots, [(name, ENTRY)])
        if found is None:
            return None
        _, candidate, expected = found
        attempt = disclose.Attempt(disclose.COMMAND, Level.BODY, skill=name)
        rules = disclose.ReadRules.of_root(
            candidate.root, roots, allow_hardlinks=here.settings.allow_hardlinks,
            max_file_bytes=here.settings.max_file_bytes)
        return _audited(connection, here, attempt, reason=reason, session=session,
                        act=lambda: disclose.skill_command(candidate, expected, joined,
                                                           attempt=attempt, rules=rules))


def audit(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
          index: str | None, session: str | None = None, skill: str | None = None,
          outcome: str | None = None, since: str | None = None,
          levels: bool = False) -> list[AuditEvent] | list[SessionLevels] | None:
    """`SkillIndex.audit(...)`, or None for the full path."""
    here = _here(config, db, cwd, index)
    if here is None or (outcome is not None and outcome not in AUDIT_OUTCOMES):
        return None
    try:
        start = since_of(since)
    except SkillIndexError:
        return None
    if not all(is_text(value) for value in (session, skill) if value is not None):
        return None
    statement, params = sql.audit_filter(
        sql.AUDIT_LEVELS if levels else sql.AUDIT_EVENTS, here.index_name, session=session,
        skill=skill, outcome=outcome, since=None if start is None else stored_time(start))
    with fastpath.opened(here.path) as connection:
        if connection is None:
            return None
        rows = fastpath.audit_rows(connection, statement, params)
    if rows is None:
        return None
    if levels:
        return [levels_of(row) for row in rows]
    return events_of(rows)


@dataclass(frozen=True, slots=True)
class Listing:
    """What `skillindex list` prints: its table a column at a time (a cell a winner), the
    names several skills declare, and why the index may show fewer skills than the folders
    hold."""

    columns: list[Sequence[str]]  # name, scope, provider, precedence, finding codes, SKILL.md
    collisions: list[str]
    note: str | None


def listing(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
            index: str | None) -> Listing | None:
    """The `list` table from the stored resolution, or None for the full path."""
    here = _here(config, db, cwd, index)
    if here is None or not here.settings.enabled:
        return None
    read = _from_stored_set(here, lambda connection, paths, key_of: fastpath.stored_listing(
        connection, here.index_name, paths, key_of))
    if read is None:
        return None
    (rows, stored_roots, findings, collided, scans), roots = read
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
    return Listing(columns, collided, staleness.note(
        here.settings, lambda: staleness.stale_roots(roots, scans)))


def search(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
           index: str | None, query: str, limit: int) -> list[SearchHit] | None:
    """`SkillIndex.search(query, limit=limit)` from the stored resolution, or None for the
    full path (which also reports a query without words and a bad limit)."""
    here = _here(config, db, cwd, index)
    if here is None or limit < 1 or not here.settings.enabled:
        return None
    try:
        words = terms(query)
    except SkillIndexError:
        return None
    read = _from_stored_set(here, lambda connection, paths, key_of: fastpath.stored_search(
        connection, here.index_name, paths, key_of, words, limit))
    if read is None:
        return None
    found, roots = read
    specs = {spec.path: spec for spec in roots}
    cache: RootCache = {}
    hits = []
    for score, (_cid, name, collision, *columns) in found:
        candidate = candidate_of(columns, cache)
        winner = Winner(name, rebase(candidate, specs.get(candidate.root)),
                        stored_collision(collision))
        hits.append(SearchHit(score, winner))
    return hits


def reindex(config: str | Path | None, *, db: str | None, cwd: str | Path | None,
            index: str | None, all_roots: bool = False, jobs: int | None = None,
            progress: Callable[[int, int | None, str], None] | None = None,
            ) -> IndexReport | None:
    """`SkillIndex.reindex(all_roots=...)` when it finds every skill, root and problem as
    stored, which writes nothing but its run; None for the full path (whatever else there is
    to write). Up to `jobs` processes (default: a core each) share the walk."""
    from skillindex.index import parallel, recheck  # noqa: PLC0415  (this command's alone)

    here = _here(config, db, cwd, index)
    if here is None or not here.settings.enabled:
        return None
    started, clock = datetime.now(UTC), time.perf_counter()
    plan = plan_roots(here.settings, here.env)
    # Unless a root quarantines, the stored resolution must be there for the roots as they
    # are, as the full path would leave it.
    key_of = _key_of(here, plan.roots)
    found: list[tuple[dict[str, int], list[ScanProblem], int]] = []

    def check(stored: fastpath.StoredRoots) -> dict[str, object] | None:
        walked = recheck.unchanged(stored.roots, stored, limits=here.settings.limits,
                                   progress=progress,
                                   jobs=parallel.default_jobs() if jobs is None else jobs)
        if walked is None:
            return None
        found.append((*walked, len(stored.roots)))
        return run_row(index_name=here.index_name, started_at=started,
                       finished_at=datetime.now(UTC), cwd=str(here.env.cwd),
                       all_roots=all_roots, roots=len(stored.roots),
                       duration_s=time.perf_counter() - clock, counts=walked[0],
                       anchor=stored.anchor, as_text=True)

    with fastpath.opened(here.path) as connection:
        if connection is None:
            return None
        run_id = fastpath.record_unchanged(connection, here.index_name, plan.roots,
                                           all_roots=all_roots, key_of=key_of, check=check)
    if run_id is None:
        return None
    counts, problems, roots = found[0]
    return IndexReport(run_id=run_id, duration_s=time.perf_counter() - clock, roots=roots,
                       problems=(*plan.problems, *problems), **counts)
