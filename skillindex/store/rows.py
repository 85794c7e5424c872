"""Values built from the rows of the statements in store/sql.py, whichever driver ran them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from skillindex import model
from skillindex.model import KnownSkill
from skillindex.store import sql
from skillindex.store.chain import stored_time, utc

RootCache = dict[str, tuple[Path, model.Scope]]


def candidate_of(row: Sequence[Any], roots: RootCache,
                 findings: tuple[model.Finding, ...] = ()) -> model.Candidate:
    """A Candidate from the columns of `sql.CANDIDATE_COLUMNS`, in their order.

    Parsing a path is the costliest step here: one Path per root (kept in `roots`), and per
    candidate only what cannot be derived from its SKILL.md path.
    """
    (cid, name, description, skill_path, dir_path, real_path, state, enabled, manual,
     root_path, scope, provider, precedence, position) = row
    root = roots.get(root_path)
    if root is None:
        root = roots[root_path] = (Path(root_path), model.Scope(scope))
    path = Path(skill_path)
    directory = path.parent if os.path.dirname(skill_path) == dir_path else Path(dir_path)
    real = directory if real_path == dir_path else Path(real_path)
    return model.Candidate(
        id=cid, name=name, description=description, path=path, directory=directory,
        real_path=real, root=root[0], scope=root[1], provider=provider,
        precedence=precedence, position=position, status=model.Status(state),
        enabled=bool(enabled), findings=findings, model_invocation=not manual)


def scans_of(rows: Iterable[Sequence[Any]]) -> dict[str, tuple[bool, datetime | None]]:
    """The rows of `sql.ROOT_SCANS`: per root path, whether it was there and when it was last
    scanned."""
    return {path: (bool(present), None if started is None else utc(started))
            for path, present, started in rows}


def manifest_file_of(row: Sequence[Any] | None) -> model.ManifestFile | None:
    """The row of `sql.MANIFEST_FILE`, if there was one."""
    return None if row is None else model.ManifestFile(*row)


def event_of(row: Sequence[Any]) -> model.AuditEvent:
    """An audit row of `sql.AUDIT_EVENTS` (SQLite gives its time as text)."""
    (time, event, level, outcome, skill, resource, size, digest, reason, session, path,
     principal) = row[:12]
    return model.AuditEvent(time=utc(time), event=event, level=level, outcome=outcome,
                            skill=skill, resource=resource, bytes=size, digest=digest,
                            reason=reason, session=session, path=path, principal=principal)


def events_of(rows: Iterable[Sequence[Any]]) -> model.AuditListing:
    """The rows of `sql.AUDIT_EVENTS`; one whose time is no time (only an edit of the file can
    leave one) is left out and its id kept, so the rest are still listed."""
    events: list[model.AuditEvent] = []
    skipped: list[int] = []
    for row in rows:
        try:
            events.append(event_of(row))
        except (TypeError, ValueError):
            skipped.append(int(row[12]))
    return model.AuditListing(events, skipped)


def levels_of(row: Sequence[Any]) -> model.SessionLevels:
    """A row of `sql.AUDIT_LEVELS`."""
    session, l1, l2, l3, count = row
    return model.SessionLevels(session, int(l1), int(l2), int(l3), int(count))


def add_known(known: dict[str, dict[str, KnownSkill]], rows: Iterable[Sequence[Any]]) -> None:
    """Rows of `sql.KNOWN_SKILLS` into `known`, per root path and skill directory."""
    rejected = model.Status.REJECTED.value
    for root_path, rel_dir, cid, tree_key, status in rows:
        known.setdefault(root_path, {})[rel_dir] = KnownSkill(cid, tree_key, status == rejected)


def root_values(spec: model.RootSpec, present: bool) -> dict[str, object]:
    """What a reindex stores of a root, by the column names of `sql.ROOT_VALUES`."""
    return dict(zip(sql.ROOT_VALUES, (
        spec.scope.value, spec.provider, spec.precedence, spec.position, spec.max_depth,
        spec.require_description, spec.validation.value, spec.name_prefix, present),
        strict=True))


def spec_of(row: Sequence[Any]) -> model.RootSpec:
    """The root a row of `sql.INDEX_ROOTS` describes (its path, then `sql.ROOT_VALUES`)."""
    (path, scope, provider, precedence, position, max_depth, require_description, validation,
     name_prefix, _present) = row
    return model.RootSpec(
        path=Path(path), scope=model.Scope(scope), provider=provider, precedence=precedence,
        position=position, max_depth=max_depth, require_description=bool(require_description),
        validation=model.Validation(validation), name_prefix=name_prefix)


def stored_form(values: Iterable[object]) -> tuple[object, ...]:
    """Values as a SQLite row holds them (a boolean as 0 or 1), to compare one with a row."""
    return tuple(int(value) if isinstance(value, bool) else value for value in values)


def issue_of(problem: model.ScanProblem) -> tuple[str, str, str]:
    """What a reindex stores of a scan problem: path, code, message (`sql.SCAN_ISSUES`)."""
    return str(problem.path), problem.code, problem.message


def run_row(*, index_name: str, started_at: datetime, finished_at: datetime, cwd: str,
            all_roots: bool, roots: int, duration_s: float, counts: dict[str, int],
            anchor: tuple[str | None, int], as_text: bool) -> dict[str, object]:
    """The parameters of `sql.INSERT_RUN`, with the audit chain's head and length
    (`chain.anchor`); `as_text` gives the times as SQLite keeps them (`chain.stored_time`),
    for a driver that would not convert them itself."""
    times: tuple[object, object] = ((stored_time(started_at), stored_time(finished_at))
                                    if as_text else (started_at, finished_at))
    row: dict[str, object] = {
        "index_name": index_name, "started_at": times[0], "finished_at": times[1], "cwd": cwd,
        "all_roots": all_roots, "roots": roots, "duration_s": duration_s,
        **{name: counts[name] for name in sql.RUN_COUNTS},
        "audit_head": anchor[0], "audit_events": anchor[1]}
    return row
