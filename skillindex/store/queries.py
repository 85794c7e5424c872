"""Every SQL statement skillindex runs; functions take a Session and never commit."""

from __future__ import annotations

import contextlib
import functools
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Engine,
    Executable,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from skillindex import model
from skillindex.model import KnownFile, KnownSkill
from skillindex.store import chain, resolved, sql
from skillindex.store.models import (
    Approval,
    Base,
    Candidate,
    CatalogCache,
    Finding,
    LoadEvent,
    Resource,
    Root,
    ScanIssue,
)
from skillindex.store.rows import (
    RootCache,
    add_known,
    candidate_of,
    events_of,
    issue_of,
    levels_of,
    manifest_file_of,
    root_values,
    run_row,
    scans_of,
    spec_of,
)
from skillindex.store.staging import Stage

# Bulk writes go through the Core tables: the ORM's per-row bookkeeping buys nothing here.
CACHED_CATALOGS = 64  # rendered catalogs kept per index between two reindexes
SCAN_ISSUE = Base.metadata.tables["scan_issue"]


@dataclass(slots=True)
class RootWrite:
    spec: model.RootSpec
    present: bool
    problems: Sequence[model.ScanProblem]
    removed: list[int] = field(default_factory=list)  # candidate ids that disappeared or changed
    staged: int = 0  # candidates of this root staged as new or changed
    partial: frozenset[str] | None = None  # only these entries under the root were scanned

    @property
    def changed(self) -> bool:
        return bool(self.removed or self.staged)


def known_skills(session: Session, index_name: str, paths: Iterable[str],
                 entries: Mapping[str, frozenset[str] | None] | None = None,
                 ) -> dict[str, dict[str, KnownSkill]]:
    """What the last reindex stored for these roots, keyed by root path and skill directory;
    for a root that `entries` maps to names, only the skills in those entries directly under
    it (a targeted reindex reads what it walks, not the whole index)."""
    wanted = list(paths)
    known: dict[str, dict[str, KnownSkill]] = {}
    whole = [path for path in wanted if entries is None or entries.get(path) is None]
    if whole:
        statement, params = sql.for_paths(sql.KNOWN_SKILLS, whole)
        add_known(known, session.execute(text(statement), {"index_name": index_name, **params}))
    columns = (Root.path, Candidate.rel_dir, Candidate.id, Candidate.tree_key, Candidate.status)
    for path in wanted:
        names = sorted(entries.get(path) or ()) if entries is not None else []
        for start in range(0, len(names), 200):  # a bounded OR a statement
            chunk = names[start:start + 200]
            inside = or_(Candidate.rel_dir.in_(chunk),
                         *(Candidate.rel_dir.startswith(f"{name}/", autoescape=True)
                           for name in chunk))
            add_known(known, session.execute(
                select(*columns).join(Candidate, Candidate.root_id == Root.id)
                .where(Root.index_name == index_name, Root.path == path, inside)))
    return known


# A reindex that wrote at least this many candidates on PostgreSQL refreshes the planner's
# statistics: until autovacuum analyzes a bulk-loaded table, the planner guesses its size and
# scans each root's candidates instead of using the full-text index (20-30 ms a search at
# 10,000 skills, against 3 ms).
ANALYZE_AFTER = 1_000
_ANALYZED = ("candidate", "resource", "finding", "resolved_winner")


def refresh_statistics(engine: Engine) -> None:
    """ANALYZE the tables a bulk reindex filled, on PostgreSQL (SQLite's planner needs no
    statistics for these queries). Only a help: a role that may not analyze a table gets a
    warning from PostgreSQL, and any error is ignored."""
    if engine.dialect.name != "postgresql":
        return
    with contextlib.suppress(SQLAlchemyError), engine.begin() as connection:
        connection.exec_driver_sql(f"ANALYZE {', '.join(_ANALYZED)}")


def checkpoint(engine: Engine) -> None:
    """Copy SQLite's write-ahead log into the database now, without waiting for a reader
    (PASSIVE), so that the next commit, often a reader's small write (a cached catalog, an
    audit row), does not find the log over SQLite's threshold and copy it first. Nothing on
    PostgreSQL; only a help: any error is ignored."""
    if engine.dialect.name != "sqlite":
        return
    with contextlib.suppress(SQLAlchemyError), engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")


def manifest(session: Session, candidate_id: int) -> dict[str, KnownFile]:
    """The stored files of one candidate with their identity and hashes."""
    return {
        rel: KnownFile(model.FileStat(size, mtime, inode, device, ctime), xxh3, sha, risks)
        for rel, size, mtime, inode, device, xxh3, sha, risks, ctime in session.execute(
            select(Resource.rel_path, Resource.size, Resource.mtime_ns, Resource.inode,
                   Resource.device, Resource.xxh3, Resource.sha256, Resource.risks,
                   Resource.ctime_ns)
            .where(Resource.candidate_id == candidate_id))
    }


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def stored_roots(session: Session, index_name: str) -> list[model.RootSpec]:
    return [spec_of(row) for row in session.execute(text(sql.INDEX_ROOTS),
                                                     {"index_name": index_name})]


def _clear_scan_issues(session: Session, roots: Sequence[RootWrite],
                       root_ids: dict[str, int]) -> None:
    """Forget the problems of what was scanned again: whole roots, or the targeted entries."""
    whole = [root_ids[str(w.spec.path)] for w in roots if w.partial is None]
    session.execute(delete(ScanIssue).where(ScanIssue.root_id.in_(whole)))
    for write in roots:
        if write.partial is None:
            continue
        tops = [os.path.join(write.spec.path, name) for name in write.partial]
        stale = [issue for issue, path in session.execute(
            select(ScanIssue.id, ScanIssue.path)
            .where(ScanIssue.root_id == root_ids[str(write.spec.path)]))
            if any(path == top or path.startswith(top + os.sep) for top in tops)]
        if stale:
            session.execute(delete(ScanIssue).where(ScanIssue.id.in_(stale)))


def apply_reindex(session: Session, *, index_name: str, started_at: datetime,
                  finished_at: datetime, cwd: str, all_roots: bool, roots: Sequence[RootWrite],
                  stage: Stage, counts: dict[str, int], duration_s: float,
                  ) -> tuple[int, list[tuple[int, int]] | None, resolved.Change | None]:
    """Write one reindex as a whole: the run, its roots, removed and staged candidates.

    Returns the run's id; when every change replaced skills without touching what
    resolution reads of them (`Stage.keeps_resolution`), the (old id, new id) of each, else
    None; and the change itself (`resolved.Change`) when it removed and added at most
    `resolved.CHANGE_MAX` candidates, else None. `session` must be bound to the stage's
    connection: the staged rows live there.
    """
    run_id = session.execute(text(sql.INSERT_RUN), run_row(
        index_name=index_name, started_at=started_at, finished_at=finished_at, cwd=cwd,
        all_roots=all_roots, roots=len(roots), duration_s=duration_s, counts=counts,
        anchor=chain.anchor(lambda statement, params: session.execute(text(statement), params),
                            index_name),
        as_text=session.get_bind().dialect.name == "sqlite")).scalar_one()
    existing = dict(session.execute(
        select(Root.path, Root.id).where(Root.index_name == index_name,
                                         Root.path.in_([str(w.spec.path) for w in roots]))
    ).all())
    root_ids: dict[str, int] = {}
    for write in roots:
        spec = write.spec
        values = root_values(spec, write.present)
        # last_run_id names the last run that changed the root's candidates: a cached catalog
        # depends on it, so a reindex that finds nothing new keeps the cache valid.
        if write.changed or str(spec.path) not in existing:
            values["last_run_id"] = run_id
        path = str(spec.path)
        if path in existing:
            session.execute(update(Root).where(Root.id == existing[path]).values(**values))
            root_ids[path] = existing[path]
        else:
            root_ids[path] = session.execute(
                insert(Root).returning(Root.id),
                [{"index_name": index_name, "path": path, **values}],
            ).scalar_one()
    _clear_scan_issues(session, roots, root_ids)
    issues = [{"root_id": root_ids[str(w.spec.path)],
               **dict(zip(("path", "code", "message"), issue_of(p), strict=True))}
              for w in roots for p in w.problems]
    if issues:
        session.execute(insert(SCAN_ISSUE), issues)
    stage.prepare()
    if any(write.changed for write in roots):
        session.execute(delete(CatalogCache).where(CatalogCache.index_name == index_name))
    removed = [cid for write in roots for cid in write.removed]
    kept = stage.keeps_resolution(removed)
    small = len(removed) + stage.count <= resolved.CHANGE_MAX
    gone = resolved.removed_rows(session, removed) if small else ()
    for chunk in _chunks(removed, 20_000):
        session.execute(delete(Candidate).where(Candidate.id.in_(chunk)))
    stage.move(index_name, run_id)
    change = resolved.Change(gone, tuple(stage.added(index_name))) if small else None
    return int(run_id), stage.replacements(index_name) if kept else None, change


@functools.cache
def _candidates_query(by_paths: bool, status: str | None, by_names: bool,
                      by_code: bool = False, limited: bool = False,
                      in_root: bool = False) -> Executable:
    # One statement per shape, built once: reads run this for every request. Looking up names,
    # `root_id + 0` keeps SQLite from walking every candidate of the roots to test their names
    # (it starts from the name index instead).
    root_id: Any = Candidate.root_id + 0 if by_names else Candidate.root_id
    query: Any = (
        select(Candidate.id, Candidate.name, Candidate.description, Candidate.skill_path,
               Candidate.dir_path, Candidate.real_path, Candidate.status, Candidate.enabled,
               Candidate.disable_model_invocation, Root.path, Root.scope, Root.provider,
               Root.precedence, Root.position)
        .join(Root, Root.id == root_id)
        .where(Root.index_name == bindparam("index_name"))
    )
    if by_paths:
        query = query.where(Root.path.in_(bindparam("paths", expanding=True)))
    if status is not None:
        query = query.where(Candidate.status == status)
    if by_names:
        query = query.where(Candidate.name.in_(bindparam("names", expanding=True)))
    if by_code:
        query = query.where(Candidate.id.in_(
            select(Finding.candidate_id).where(Finding.code == bindparam("code"))))
    if limited:
        # The order the callers sort into (paths in the database's collation).
        query = query.order_by(Root.precedence.desc(), Root.position,
                               Candidate.skill_path).limit(bindparam("limit"))
    if in_root:
        query = query.where(Root.path == bindparam("root")).order_by(Candidate.skill_path)
    built: Executable = query
    return built


_FINDINGS_OF = (
    select(Finding.candidate_id, Finding.code, Finding.severity, Finding.message)
    .where(Finding.candidate_id.in_(bindparam("ids", expanding=True))).order_by(Finding.id))


def candidates(session: Session, index_name: str, paths: Sequence[str] | None = None, *,
               status: model.Status | None = None, names: Sequence[str] | None = None,
               all_findings: bool = True, code: str | None = None,
               limit: int | None = None) -> list[model.Candidate]:
    """Candidates of the given roots (all roots when None), in precedence order.

    `code` keeps those with a finding of that code, `limit` the first so many; both are
    applied by the database, so a narrow question loads a narrow answer.

    With `all_findings=False` only rejected candidates carry their findings: enough to resolve
    names and explain rejections, and much less to load for a large index.
    """
    query = _candidates_query(paths is not None, None if status is None else status.value,
                              names is not None, code is not None, limit is not None)
    rows = session.execute(query, {"index_name": index_name, "paths": list(paths or ()),
                                   "code": code, "limit": limit,
                                   "names": list(names or ())}).all()
    rejected = model.Status.REJECTED.value
    findings = findings_of(session, [row[0] for row in rows
                                     if all_findings or row[6] == rejected])
    roots: RootCache = {}
    result = [candidate_of(row, roots, tuple(findings.get(row[0], ()))) for row in rows]
    result.sort(key=lambda c: (-c.precedence, c.position, str(c.path)))
    return result


def candidate_count(session: Session, index_name: str, paths: Sequence[str], *,
                    status: model.Status | None = None) -> int:
    query: Any = (select(func.count(Candidate.id)).join(Root, Root.id == Candidate.root_id)
                  .where(Root.index_name == index_name, Root.path.in_(list(paths))))
    if status is not None:
        query = query.where(Candidate.status == status.value)
    return int(session.execute(query).scalar_one())


def finding_counts(session: Session, index_name: str, paths: Sequence[str], *,
                   status: model.Status | None = None) -> list[model.FindingCount]:
    """How many candidates carry each finding code, the most common first."""
    query: Any = (
        select(Finding.code, Finding.severity, func.count(func.distinct(Finding.candidate_id)))
        .join(Candidate, Candidate.id == Finding.candidate_id)
        .join(Root, Root.id == Candidate.root_id)
        .where(Root.index_name == index_name, Root.path.in_(list(paths))))
    if status is not None:
        query = query.where(Candidate.status == status.value)
    if status is model.Status.REJECTED:
        query = query.where(Finding.severity == model.Severity.ERROR.value)  # the reasons
    query = query.group_by(Finding.code, Finding.severity)
    counts = [model.FindingCount(code, model.Severity(severity), number)
              for code, severity, number in session.execute(query)]
    counts.sort(key=lambda c: (-c.candidates, c.severity != model.Severity.ERROR, c.code))
    return counts


def candidate_pages(session: Session, index_name: str, root: str, page: int, *,
                    status: model.Status | None = None,
                    code: str | None = None) -> Iterator[list[model.Candidate]]:
    """The candidates of one root in path order, with their findings, `page` at a time: one
    statement read as it goes (a server-side cursor on PostgreSQL), so that no page sorts
    the root's candidates again, and a long listing is never held whole."""
    query = _candidates_query(False, None if status is None else status.value, False,
                              code is not None, False, True)
    result = session.execute(query.execution_options(yield_per=page),
                             {"index_name": index_name, "root": root, "code": code})
    roots: RootCache = {}
    for rows in result.partitions():
        findings = findings_of(session, [row[0] for row in rows])
        yield [candidate_of(row, roots, tuple(findings.get(row[0], ()))) for row in rows]


def findings_of(session: Session, ids: list[int]) -> dict[int, list[model.Finding]]:
    """The findings of these candidates, in the order they were written."""
    found: dict[int, list[model.Finding]] = defaultdict(list)
    for chunk in _chunks(ids, 20_000):
        for cid, code, severity, message in session.execute(_FINDINGS_OF, {"ids": chunk}):
            found[cid].append(model.Finding(code, model.Severity(severity), message))
    return found


def root_states(session: Session, index_name: str,
                specs: Sequence[model.RootSpec]) -> list[model.RootState]:
    """The planned roots with what the store knows of each (never indexed: indexed=False)."""
    stored = {root.path: root for root in session.scalars(
        select(Root).where(Root.index_name == index_name))}
    totals = dict(session.execute(
        select(Candidate.root_id, func.count())
        .join(Root, Root.id == Candidate.root_id).where(Root.index_name == index_name)
        .group_by(Candidate.root_id)
    ).all())
    rejected = dict(session.execute(
        select(Candidate.root_id, func.count())
        .join(Root, Root.id == Candidate.root_id)
        .where(Root.index_name == index_name, Candidate.status == model.Status.REJECTED.value)
        .group_by(Candidate.root_id)
    ).all())
    problems: dict[int, list[model.ScanProblem]] = defaultdict(list)
    for root_id, path, code, message in session.execute(
        select(ScanIssue.root_id, ScanIssue.path, ScanIssue.code, ScanIssue.message)
        .join(Root, Root.id == ScanIssue.root_id).where(Root.index_name == index_name)
        .order_by(ScanIssue.id)
    ):
        problems[root_id].append(model.ScanProblem(Path(), Path(path), code, message))
    states = []
    for spec in specs:
        root = stored.get(str(spec.path))
        if root is None:
            states.append(model.RootState(spec, present=spec.path.is_dir(), candidates=0,
                                          rejected=0, indexed=False))
            continue
        states.append(model.RootState(
            spec, present=root.present, candidates=totals.get(root.id, 0),
            rejected=rejected.get(root.id, 0),
            problems=tuple(model.ScanProblem(spec.path, p.path, p.code, p.message)
                           for p in problems.get(root.id, ()))))
    return states


def root_scans(session: Session, index_name: str,
               paths: Sequence[str]) -> dict[str, tuple[bool, datetime | None]]:
    """For each stored root among `paths`: whether it was there, and when it was last scanned."""
    statement, params = sql.root_scans(paths)
    rows = session.execute(text(statement), {"index_name": index_name, **params})
    return scans_of(rows)


def cached_catalog(session: Session, index_name: str, key: str) -> str | None:
    return session.execute(text(sql.CACHED_CATALOG),
                           {"index_name": index_name, "key": key}).scalar()


def store_catalog(session: Session, index_name: str, key: str, payload: str) -> None:
    """Keep a rendered catalog; a concurrent writer of the same key is not an error."""
    exists = session.execute(
        select(CatalogCache.id).where(CatalogCache.index_name == index_name,
                                      CatalogCache.key == key)).first()
    if exists is None:
        new_id = session.execute(
            insert(CatalogCache).returning(CatalogCache.id),
            [{"index_name": index_name, "key": key, "payload": payload}]).scalar_one()
        # Hosts asking with ever new budgets must not grow the cache without bound.
        session.execute(delete(CatalogCache).where(CatalogCache.index_name == index_name,
                                                   CatalogCache.id <= new_id - CACHED_CATALOGS))


_MANIFEST_FILE = text(sql.MANIFEST_FILE)  # shared with the start-up path


def manifest_file(session: Session, candidate_id: int, rel_path: str) -> model.ManifestFile | None:
    """The manifest row a read of `rel_path` is checked against; None when it was not indexed."""
    row = session.execute(
        _MANIFEST_FILE, {"candidate_id": candidate_id, "rel_path": rel_path}).one_or_none()
    return manifest_file_of(row)


def risk_findings(session: Session, candidate_ids: Sequence[int],
                  codes: Sequence[str]) -> dict[int, list[model.Finding]]:
    """The findings with these codes of these candidates, by candidate."""
    found: dict[int, list[model.Finding]] = defaultdict(list)
    for chunk in _chunks(list(candidate_ids), 20_000):
        for cid, code, severity, message, path in session.execute(
            select(Finding.candidate_id, Finding.code, Finding.severity, Finding.message,
                   Finding.path)
            .where(Finding.candidate_id.in_(chunk), Finding.code.in_(codes))
            .order_by(Finding.candidate_id, Finding.id)
        ):
            found[cid].append(model.Finding(code, model.Severity(severity), message, path))
    return found


def risk_rows(session: Session, index_name: str, root_paths: Sequence[str],
              codes: Sequence[str]) -> list[tuple[str | None, str, str, str | None, int | None,
                                                  str]]:
    """(skill name, SKILL.md path, code, file, line, message) of every finding with these codes
    under these roots, by skill and file."""
    rows = session.execute(
        select(Candidate.name, Candidate.skill_path, Finding.code, Finding.path, Finding.line,
               Finding.message)
        .join(Finding, Finding.candidate_id == Candidate.id)
        .join(Root, Root.id == Candidate.root_id)
        .where(Root.index_name == index_name, Root.path.in_(root_paths),
               Finding.code.in_(codes))
        .order_by(Candidate.name, Candidate.skill_path, Finding.path, Finding.line, Finding.id))
    return [tuple(row) for row in rows]  # type: ignore[misc]


def approvals(session: Session, index_name: str,
              names: Sequence[str]) -> dict[str, frozenset[str]]:
    """The approved content digests of these skill names."""
    found: dict[str, set[str]] = defaultdict(set)
    for name, digest in session.execute(
            select(Approval.name, Approval.digest)
            .where(Approval.index_name == index_name, Approval.name.in_(names))):
        found[name].add(digest)
    return {name: frozenset(digests) for name, digests in found.items()}


def approve(session: Session, index_name: str, name: str, digest: str, *, at: datetime,
            note: str | None) -> bool:
    """Record an approval of this content; False when it was approved already."""
    exists = session.execute(select(Approval.id).where(
        Approval.index_name == index_name, Approval.name == name,
        Approval.digest == digest)).first()
    if exists is not None:
        return False
    session.add(Approval(index_name=index_name, name=name, digest=digest, approved_at=at,
                         note=note))
    # A cached catalog left the skill out; the next one must include it.
    session.execute(delete(CatalogCache).where(CatalogCache.index_name == index_name))
    return True


def uri_collision(session: Session, candidate_id: int) -> str | None:
    """The `uri-collision` warning recorded on the candidate (`sql.URI_COLLISION`), if any."""
    found = session.execute(text(sql.URI_COLLISION), {"candidate_id": candidate_id}).scalar()
    return None if found is None else str(found)


def manifest_files(session: Session,
                   candidate_ids: Sequence[int]) -> dict[int, list[model.ManifestFile]]:
    """The manifests of these candidates, each sorted by relative path."""
    found: dict[int, list[model.ManifestFile]] = defaultdict(list)
    for chunk in _chunks(list(candidate_ids), 20_000):
        for cid, rel, size, xxh3, sha, mode, mtime, inode, device, ctime in session.execute(
            select(Resource.candidate_id, Resource.rel_path, Resource.size, Resource.xxh3,
                   Resource.sha256, Resource.mode, Resource.mtime_ns, Resource.inode,
                   Resource.device, Resource.ctime_ns)
            .where(Resource.candidate_id.in_(chunk)).order_by(Resource.rel_path)
        ):
            found[cid].append(model.ManifestFile(
                rel, size, xxh3, sha, mode, model.FileStat(size, mtime, inode, device, ctime)))
    return found


def frontmatters(session: Session, candidate_ids: Sequence[int]) -> dict[int, str | None]:
    """The stored frontmatter (JSON text) of these candidates."""
    found: dict[int, str | None] = {}
    for chunk in _chunks(list(candidate_ids), 20_000):
        for cid, stored in session.execute(
                select(Candidate.id, Candidate.frontmatter).where(Candidate.id.in_(chunk))):
            found[cid] = stored
    return found


def _audit(statement: str, index_name: str, session_id: str | None, skill: str | None,
           outcome: str | None, since: datetime | None) -> tuple[Any, dict[str, Any]]:
    found, params = sql.audit_filter(statement, index_name, session=session_id, skill=skill,
                                     outcome=outcome, since=since)
    query = text(found)
    if since is not None:  # compared as each backend stores times (text on SQLite)
        query = query.bindparams(bindparam("since", type_=LoadEvent.__table__.c.time.type))
    return query, params


def events(session: Session, index_name: str, *, session_id: str | None = None,
           skill: str | None = None, outcome: str | None = None,
           since: datetime | None = None) -> model.AuditListing:
    """Audit rows in the order they were written (`rows.events_of`)."""
    query, params = _audit(sql.AUDIT_EVENTS, index_name, session_id, skill, outcome, since)
    return events_of(session.execute(query, params))


def session_levels(session: Session, index_name: str, *, session_id: str | None = None,
                   skill: str | None = None, outcome: str | None = None,
                   since: datetime | None = None) -> list[model.SessionLevels]:
    """Bytes per disclosure level for each session, sessions in order of their first event."""
    query, params = _audit(sql.AUDIT_LEVELS, index_name, session_id, skill, outcome, since)
    return [levels_of(row) for row in session.execute(query, params)]


def signatures(session: Session, candidate_ids: Sequence[int]) -> dict[int, str | None]:
    """The stored signature (JSON text, index/signing.py) of these candidates."""
    found: dict[int, str | None] = {}
    ids = list(candidate_ids)
    for start in range(0, len(ids), 500):
        for cid, stored in session.execute(
                select(Candidate.id, Candidate.signature)
                .where(Candidate.id.in_(ids[start:start + 500]))):
            found[int(cid)] = stored
    return found
