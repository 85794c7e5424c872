"""Runs one reindex: scan and judge outside any transaction, then write the diff in one."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from skillindex import frontmatter, policy
from skillindex.model import IndexReport, RootSpec, ScanProblem, Status
from skillindex.scanner import ENTRY, RootScan, SkillScan, scan_root
from skillindex.store import queries
from skillindex.store.lock import HeldLock
from skillindex.store.queries import NewCandidate, RootWrite

Progress = Callable[[int, int | None, str], None]  # (skills done, expected or None, root)


def reindex(engine: Engine, roots: Sequence[RootSpec], *, index_name: str, cwd: Path,
            all_roots: bool = False, extra_problems: Sequence[ScanProblem] = (),
            progress: Progress | None = None, lock: HeldLock | None = None) -> IndexReport:
    started = datetime.now(UTC)
    clock = time.perf_counter()
    with Session(engine) as session, session.begin():
        known = queries.known_skills(session, index_name, [str(r.path) for r in roots])
    expected = sum(len(skills) for skills in known.values()) or None
    counts = {"seen": 0, "added": 0, "changed": 0, "unchanged": 0, "removed": 0, "rejected": 0,
              "files_read": 0}
    writes: list[RootWrite] = []
    problems: list[ScanProblem] = list(extra_problems)
    for spec in roots:
        root_known = known.get(str(spec.path), {})
        rules_key = policy.rules_key(spec)
        result = RootScan(spec)
        write = RootWrite(spec, True, result.problems)
        seen: set[str] = set()
        for scan in scan_root(spec, result, root_known, rules_key):
            seen.add(scan.rel_dir)
            counts["seen"] += 1
            counts["files_read"] += scan.files_read
            if scan.unchanged:
                counts["unchanged"] += 1
                counts["rejected"] += scan.known is not None and scan.known.rejected
            else:
                new = _judge(scan, spec, rules_key)
                if new.row["status"] == Status.REJECTED.value:
                    counts["rejected"] += 1
                if scan.known is None:
                    counts["added"] += 1
                else:
                    counts["changed"] += 1
                    write.removed.append(scan.known.candidate_id)
                write.added.append(new)
            if progress is not None:
                progress(counts["seen"], expected, str(spec.path))
        gone = [skill.candidate_id for rel, skill in root_known.items() if rel not in seen]
        counts["removed"] += len(gone)
        write.removed.extend(gone)
        write.present = result.present
        problems.extend(result.problems)
        writes.append(write)
    with Session(engine) as session, session.begin():
        duration = time.perf_counter() - clock
        run_id = queries.apply_reindex(
            session, index_name=index_name, started_at=started, finished_at=datetime.now(UTC),
            cwd=str(cwd), all_roots=all_roots, roots=writes, counts=counts, duration_s=duration)
        if lock is not None:
            lock.verify(session)  # after the first write, when SQLite has granted the write lock
    return IndexReport(run_id=run_id, duration_s=time.perf_counter() - clock,
                       roots=len(writes), problems=tuple(problems), **counts)


def _judge(scan: SkillScan, spec: RootSpec, rules_key: str) -> NewCandidate:
    findings = list(scan.walk_findings)
    fields: dict[str, Any] | None = None
    if scan.entry_problem is not None:
        verdict = policy.Verdict(f"{spec.name_prefix}{scan.dir_name}", None, True,
                                 Status.REJECTED, (scan.entry_problem,))
    else:
        parsed = frontmatter.parse(scan.entry_data or b"", lenient=spec.validation == "lenient")
        verdict = policy.judge(parsed, dir_name=scan.dir_name, root=spec)
        fields = parsed.fields
    findings = [*verdict.findings, *findings]
    entry = scan.entry_stat
    row: dict[str, Any] = {
        "rel_dir": scan.rel_dir,
        "dir_name": scan.dir_name,
        "dir_path": str(scan.directory),
        "skill_path": str(scan.directory / ENTRY),
        "real_path": str(scan.real_dir),
        "name": verdict.name,
        "description": verdict.description,
        "status": verdict.status.value,
        "enabled": verdict.enabled,
        "frontmatter": None if fields is None else _to_json(fields),
        "rules_key": rules_key,
        "size": entry.size if entry else None,
        "mtime_ns": entry.mtime_ns if entry else None,
        "inode": entry.inode if entry else None,
        "device": entry.device if entry else None,
        "xxh3": scan.entry_xxh3,
        "sha256": scan.entry_sha256,
    }
    return NewCandidate(row, findings, scan.resources,
                        scan.known.candidate_id if scan.known else None)


def _plain(value: Any) -> Any:
    """YAML values as JSON can hold them: keys become strings, dates and sets readable text."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _to_json(fields: dict[str, Any]) -> str:
    try:
        return json.dumps(_plain(fields), ensure_ascii=False, sort_keys=True)
    except (RecursionError, ValueError):
        return json.dumps({"unstorable": "frontmatter nests too deeply to store"})
