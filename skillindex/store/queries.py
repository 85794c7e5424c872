"""Every SQL statement skillindex runs; functions take a Session and never commit."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from skillindex import model
from skillindex.scanner import WALK_CODES, KnownFile, KnownSkill
from skillindex.store.models import (
    Candidate,
    Finding,
    IndexRun,
    Resource,
    Root,
    ScanIssue,
)


@dataclass(slots=True)
class NewCandidate:
    """A candidate row to insert, with its findings and manifest."""

    row: dict[str, Any]
    findings: Sequence[model.Finding]
    resources: Sequence[model.ResourceEntry]
    previous_id: int | None = None  # the row it replaces, whose first_run_id it keeps


@dataclass(slots=True)
class RootWrite:
    spec: model.RootSpec
    present: bool
    problems: Sequence[model.ScanProblem]
    removed: list[int] = field(default_factory=list)  # candidate ids that disappeared
    added: list[NewCandidate] = field(default_factory=list)


def known_skills(session: Session, index_name: str,
                 paths: Iterable[str]) -> dict[str, dict[str, KnownSkill]]:
    """What the last reindex stored for these roots, keyed by root path and skill directory."""
    wanted = list(paths)
    if not wanted:
        return {}
    rows = session.execute(
        select(Root.path, Candidate.id, Candidate.rel_dir, Candidate.rules_key, Candidate.size,
               Candidate.mtime_ns, Candidate.inode, Candidate.device, Candidate.status)
        .join(Candidate, Candidate.root_id == Root.id)
        .where(Root.index_name == index_name, Root.path.in_(wanted))
    ).all()
    ids = [row[1] for row in rows]
    files: dict[int, dict[str, KnownFile]] = defaultdict(dict)
    walk: dict[int, set[str]] = defaultdict(set)
    for chunk in _chunks(ids, 20_000):
        for cid, rel, size, mtime, inode, device, xxh3, sha in session.execute(
            select(Resource.candidate_id, Resource.rel_path, Resource.size, Resource.mtime_ns,
                   Resource.inode, Resource.device, Resource.xxh3, Resource.sha256)
            .where(Resource.candidate_id.in_(chunk))
        ):
            files[cid][rel] = KnownFile(model.FileStat(size, mtime, inode, device), xxh3, sha)
        for cid, message in session.execute(
            select(Finding.candidate_id, Finding.message)
            .where(Finding.candidate_id.in_(chunk), Finding.code.in_(WALK_CODES),
                   Finding.severity == model.Severity.WARNING.value)
        ):
            walk[cid].add(message)
    known: dict[str, dict[str, KnownSkill]] = defaultdict(dict)
    for root_path, cid, rel_dir, rules_key, e_size, e_mtime, e_inode, e_device, status in rows:
        entry = (None if e_size is None
                 else model.FileStat(e_size, e_mtime or 0, e_inode or 0, e_device or 0))
        known[root_path][rel_dir] = KnownSkill(
            cid, entry, rules_key, files.get(cid, {}), frozenset(walk.get(cid, ())),
            rejected=status == model.Status.REJECTED.value)
    return known


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def stored_roots(session: Session, index_name: str) -> list[model.RootSpec]:
    rows = session.scalars(
        select(Root).where(Root.index_name == index_name).order_by(Root.position, Root.id)
    ).all()
    return [_spec(root) for root in rows]


def _spec(root: Root) -> model.RootSpec:
    return model.RootSpec(
        path=Path(root.path), scope=model.Scope(root.scope), provider=root.provider,
        precedence=root.precedence, position=root.position, max_depth=root.max_depth,
        require_description=root.require_description,
        validation=model.Validation(root.validation), name_prefix=root.name_prefix)


def apply_reindex(session: Session, *, index_name: str, started_at: datetime,
                  finished_at: datetime, cwd: str, all_roots: bool, roots: Sequence[RootWrite],
                  counts: dict[str, int], duration_s: float) -> int:
    """Write one reindex as a whole: the run, its roots, removed and new candidates."""
    run_id = session.execute(
        insert(IndexRun).returning(IndexRun.id),
        [{"index_name": index_name, "started_at": started_at, "finished_at": finished_at,
          "cwd": cwd, "all_roots": all_roots, "roots": len(roots), "duration_s": duration_s,
          **counts}],
    ).scalar_one()
    existing = dict(session.execute(
        select(Root.path, Root.id).where(Root.index_name == index_name,
                                         Root.path.in_([str(w.spec.path) for w in roots]))
    ).all())
    root_ids: dict[str, int] = {}
    for write in roots:
        spec = write.spec
        values = {"scope": spec.scope.value, "provider": spec.provider,
                  "precedence": spec.precedence, "position": spec.position,
                  "max_depth": spec.max_depth, "require_description": spec.require_description,
                  "validation": spec.validation.value, "name_prefix": spec.name_prefix,
                  "present": write.present, "last_run_id": run_id}
        path = str(spec.path)
        if path in existing:
            session.execute(update(Root).where(Root.id == existing[path]).values(**values))
            root_ids[path] = existing[path]
        else:
            root_ids[path] = session.execute(
                insert(Root).returning(Root.id),
                [{"index_name": index_name, "path": path, **values}],
            ).scalar_one()
    ids = list(root_ids.values())
    session.execute(delete(ScanIssue).where(ScanIssue.root_id.in_(ids)))
    issues = [{"root_id": root_ids[str(w.spec.path)], "path": str(p.path), "code": p.code,
               "message": p.message} for w in roots for p in w.problems]
    if issues:
        session.execute(insert(ScanIssue), issues)
    replaced = [new.previous_id for w in roots for new in w.added if new.previous_id is not None]
    firsts = first_run_ids(session, replaced)
    removed = [cid for write in roots for cid in write.removed]
    for chunk in _chunks(removed, 20_000):
        session.execute(delete(Candidate).where(Candidate.id.in_(chunk)))
    added = [(root_ids[str(w.spec.path)], new) for w in roots for new in w.added]
    if added:
        rows = [{**new.row, "root_id": root_id, "changed_run_id": run_id,
                 "first_run_id": firsts.get(new.previous_id or 0, run_id)}
                for root_id, new in added]
        new_ids = session.execute(
            insert(Candidate).returning(Candidate.id, sort_by_parameter_order=True), rows
        ).scalars().all()
        findings = [{"candidate_id": cid, "code": f.code, "severity": f.severity.value,
                     "message": f.message}
                    for cid, (_, new) in zip(new_ids, added, strict=True) for f in new.findings]
        resources = [{"candidate_id": cid, "rel_path": r.rel_path, "kind": r.kind.value,
                      "size": r.stat.size, "mtime_ns": r.stat.mtime_ns, "inode": r.stat.inode,
                      "device": r.stat.device, "xxh3": r.xxh3, "sha256": r.sha256}
                     for cid, (_, new) in zip(new_ids, added, strict=True)
                     for r in new.resources]
        if findings:
            session.execute(insert(Finding), findings)
        if resources:
            session.execute(insert(Resource), resources)
    return int(run_id)


def first_run_ids(session: Session, ids: Sequence[int]) -> dict[int, int]:
    found: dict[int, int] = {}
    for chunk in _chunks(list(ids), 20_000):
        found.update(session.execute(
            select(Candidate.id, Candidate.first_run_id).where(Candidate.id.in_(chunk))
        ).all())
    return found


def candidates(session: Session, index_name: str, paths: Sequence[str] | None = None, *,
               status: model.Status | None = None,
               name: str | None = None) -> list[model.Candidate]:
    """Candidates of the given roots (all roots when None), in precedence order."""
    query = (
        select(Candidate, Root)
        .join(Root, Root.id == Candidate.root_id)
        .where(Root.index_name == index_name)
        .order_by(Root.precedence.desc(), Root.position, Candidate.rel_dir)
    )
    if paths is not None:
        query = query.where(Root.path.in_(list(paths)))
    if status is not None:
        query = query.where(Candidate.status == status.value)
    if name is not None:
        query = query.where(Candidate.name == name)
    pairs = session.execute(query).all()
    findings: dict[int, list[model.Finding]] = defaultdict(list)
    ids = [candidate.id for candidate, _ in pairs]
    for chunk in _chunks(ids, 20_000):
        for cid, code, severity, message in session.execute(
            select(Finding.candidate_id, Finding.code, Finding.severity, Finding.message)
            .where(Finding.candidate_id.in_(chunk)).order_by(Finding.id)
        ):
            findings[cid].append(model.Finding(code, model.Severity(severity), message))
    return [_candidate(candidate, root, findings.get(candidate.id, ()))
            for candidate, root in pairs]


def _candidate(row: Candidate, root: Root, findings: Iterable[model.Finding]) -> model.Candidate:
    return model.Candidate(
        id=row.id, name=row.name, description=row.description, path=Path(row.skill_path),
        directory=Path(row.dir_path), real_path=Path(row.real_path), root=Path(root.path),
        scope=model.Scope(root.scope), provider=root.provider, precedence=root.precedence,
        position=root.position, status=model.Status(row.status), enabled=row.enabled,
        findings=tuple(findings))


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
