"""Runs one reindex: scan and judge outside any transaction, then write the diff in one."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from skillindex.index import parallel, policy
from skillindex.index.barrier import INTERNAL_ERROR, internal_error
from skillindex.index.judge import ResourceRow, Row, judge
from skillindex.index.scanner import (
    KnownFile,
    KnownSkill,
    RootScan,
    estimate_skills,
    scan_root,
)
from skillindex.model import (
    DEFAULT_LIMITS,
    IndexReport,
    Limits,
    RootSpec,
    ScanProblem,
    Status,
)
from skillindex.store import queries
from skillindex.store.engine import IMMEDIATE
from skillindex.store.lock import HeldLock
from skillindex.store.queries import RootWrite
from skillindex.store.resolved import Change
from skillindex.store.staging import Stage

Progress = Callable[[int, int | None, str], None]  # (skills done, expected or None, root)
# Per root path, the entries directly under it to rescan (None: all of them).
Targets = Mapping[str, frozenset[str] | None]
# After the writes, in their transaction: the roots whose candidates changed, the (old id, new
# id) of every replaced candidate when nothing resolution reads of them changed (else None),
# and what the write removed and added when it was small (else None).
AfterWrite = Callable[[Session, Sequence[str], Sequence[tuple[int, int]] | None,
                       Change | None], None]


def reindex(engine: Engine, roots: Sequence[RootSpec], *, index_name: str, cwd: Path,
            all_roots: bool = False, extra_problems: Sequence[ScanProblem] = (),
            progress: Progress | None = None, lock: HeldLock | None = None,
            after_write: AfterWrite | None = None,
            targets: Targets | None = None, jobs: int = 1,
            limits: Limits = DEFAULT_LIMITS) -> IndexReport:
    """Scan `roots` (with `targets`, only the named entries of the named roots) and write the
    difference to the store in one transaction; new skills are read, hashed and parsed by
    `jobs` worker processes when there are enough of them."""
    started = datetime.now(UTC)
    clock = time.perf_counter()
    with Session(engine) as session, session.begin():
        known = queries.known_skills(
            session, index_name, [str(r.path) for r in roots
                                  if targets is None or str(r.path) in targets], targets)
    with Session(engine) as reader, engine.connect() as connection:
        stage = Stage(connection)
        try:
            writes, problems, counts = _scan(
                roots, known, stage, extra_problems=extra_problems, progress=progress,
                lookup=lambda candidate_id: queries.manifest(reader, candidate_id),
                targets=targets, jobs=jobs, limits=limits)
            reader.close()  # its snapshot is not needed for the write
            # On SQLite the write lock is taken at BEGIN, so the lock check below cannot be
            # overtaken by another writer before this transaction commits.
            connection.execution_options(**IMMEDIATE)
            with connection.begin():
                session = Session(bind=connection)
                if lock is not None:
                    # Before any write: a reindex whose lock was taken over as stale may find
                    # its skills written meanwhile, and must say so, not fail on a duplicate.
                    lock.verify(session)
                run_id, replaced, change = queries.apply_reindex(
                    session, index_name=index_name, started_at=started,
                    finished_at=datetime.now(UTC), cwd=str(cwd), all_roots=all_roots,
                    roots=writes, stage=stage,
                    counts={k: v for k, v in counts.items() if k != "rejudged"},
                    duration_s=time.perf_counter() - clock)
                if after_write is not None:
                    after_write(session, [str(w.spec.path) for w in writes if w.changed],
                                replaced, change)
                session.close()
        except KeyboardInterrupt as exc:
            # A signal raised inside the driver, mid-write. SQLAlchemy closes the connection,
            # but the statement that the traceback's frames still hold keeps SQLite's handle,
            # and the write lock, open for as long as they live: the lock row could then not be
            # released, nor the stage dropped, while this unwinds. Their locals go now, and the
            # temporary stage goes with the closed connection.
            traceback.clear_frames(exc.__traceback__)
            if not connection.invalidated:
                stage.drop()
            raise
        except BaseException:
            stage.drop()
            raise
        stage.drop()
    if counts["added"] + counts["changed"] >= queries.ANALYZE_AFTER:
        queries.refresh_statistics(engine)
    return IndexReport(run_id=run_id, duration_s=time.perf_counter() - clock,
                       roots=len(writes), problems=tuple(problems), fetches=(), **counts)


def targets_of(paths: Iterable[str | os.PathLike[str]], roots: Sequence[RootSpec],
               indexed: Collection[str]) -> dict[str, frozenset[str] | None]:
    """Which entries of which roots a change to `paths` can affect.

    A path inside a root names the entry directly under the root that holds it (a skill
    directory, or a group of them); a root itself, a path above it, or a root that was never
    indexed means the whole root. Paths under no root affect nothing.
    """
    targets: dict[str, frozenset[str] | None] = {}
    for raw in paths:
        path = os.path.abspath(os.fspath(raw))
        for spec in roots:
            root = str(spec.path)
            inside = path.startswith(root + os.sep)
            above = path == root or root.startswith(path.rstrip(os.sep) + os.sep)
            if not inside and not above:
                continue
            if above or root not in indexed:
                targets[root] = None
            elif targets.get(root, frozenset()) is not None:
                entry = path[len(root) + 1:].split(os.sep, 1)[0]
                targets[root] = (targets.get(root) or frozenset()) | {entry}
    return targets


def _scan(roots: Sequence[RootSpec], known: dict[str, dict[str, KnownSkill]], stage: Stage, *,
          extra_problems: Sequence[ScanProblem], progress: Progress | None,
          lookup: Callable[[int], dict[str, KnownFile]], targets: Targets | None = None,
          jobs: int = 1, limits: Limits = DEFAULT_LIMITS,
          ) -> tuple[list[RootWrite], list[ScanProblem], dict[str, int]]:
    """Walk every root (or the targeted entries); stage each new or changed candidate as soon
    as it is judged."""
    # What the last run found; a root never indexed counts the folders it holds.
    expected = sum(len(known[str(spec.path)]) if str(spec.path) in known
                   else estimate_skills(spec.path) for spec in roots
                   if targets is None or str(spec.path) in targets) or None
    counts = {"seen": 0, "added": 0, "changed": 0, "unchanged": 0, "removed": 0, "rejected": 0,
              "files_read": 0, "rejudged": 0}
    writes: list[RootWrite] = []
    problems: list[ScanProblem] = list(extra_problems)
    workers = parallel.Workers(jobs) if jobs > 1 else None
    scanned = [(spec, None if targets is None else targets[str(spec.path)]) for spec in roots
               if targets is None or str(spec.path) in targets]
    try:
        shared = _share(scanned, known, workers, limits) if workers is not None else {}
        for number, (spec, only) in enumerate(scanned):
            write = _scan_root(spec, known.get(str(spec.path), {}), stage, counts, progress,
                               expected, lookup, only, shared.get(number), limits)
            problems.extend(write.problems)
            writes.append(write)
    finally:
        if workers is not None:
            workers.shutdown()
    return writes, problems, counts


@dataclass(slots=True)
class _Shared:
    """What workers scan of one root: its new entries in shards of `size`, and the entries
    this process walks itself."""

    new: list[str]
    size: int
    shards: Iterator[parallel.Shard]
    walk_only: frozenset[str]


def _share(scanned: Sequence[tuple[RootSpec, frozenset[str] | None]],
           known: dict[str, dict[str, KnownSkill]], workers: parallel.Workers,
           limits: Limits) -> dict[int, _Shared]:
    """The roots (by their place in `scanned`) whose new entries hold enough skills for the
    workers, all planned before the walk, so that their shards follow each other in the
    workers without a pause between roots."""
    # Workers read, hash and parse what no stored manifest spares; this process walks the
    # known skills meanwhile and stages every row.
    planned = parallel.plan(scanned, {path: {rel.split("/", 1)[0] for rel in root_known}
                                      for path, root_known in known.items()},
                            workers.jobs, limits)
    shared = {number: _Shared(plan.names, plan.size, iter(()), names.difference(plan.names))
              for number, plan, names in planned}
    if planned:
        pipe = workers.pipe([plan for _number, plan, _names in planned])
        for order, share in enumerate(shared.values()):
            share.shards = pipe.shards(order)
    return shared


def _scan_root(spec: RootSpec, root_known: dict[str, KnownSkill], stage: Stage,
               counts: dict[str, int], progress: Progress | None, expected: int | None,
               lookup: Callable[[int], dict[str, KnownFile]], only: frozenset[str] | None,
               shared: _Shared | None, limits: Limits) -> RootWrite:
    rules_key = policy.rules_key(spec)
    result = RootScan(spec)
    write = RootWrite(spec, True, result.problems, partial=only)
    seen: set[str] = set()
    shards: Iterator[parallel.Shard] = iter(())
    new: list[str] = []
    walk_only = only
    size = parallel.SHARD
    if shared is not None:
        new, size, shards, walk_only = shared.new, shared.size, shared.shards, shared.walk_only

    def staged(rel_dir: str, row: Row, findings: list[Row], resources: list[ResourceRow],
               previous: int | None, same_content: bool = False) -> None:
        counts["rejected"] += row["status"] == Status.REJECTED.value
        if previous is None:
            counts["added"] += 1
        else:
            counts["rejudged" if same_content else "changed"] += 1
            write.removed.append(previous)
        stage.add(str(spec.path), row, previous, findings, resources)
        write.staged += 1

    def walk(entries: frozenset[str] | None, known: Mapping[str, KnownSkill]) -> bool:
        """Walk (these entries of) the root, staging every changed skill; False when the walk
        itself failed (each skill's work has a barrier of its own): what it did not reach is
        left as stored, and the root records the problem. Store errors are not the walk's."""
        scans = scan_root(spec, result, known, rules_key, lookup, entries, limits=limits)
        while True:
            try:
                scan = next(scans, None)
            except Exception as exc:  # the barrier of the root
                result.problems.append(ScanProblem(
                    spec.path, spec.path, INTERNAL_ERROR,
                    internal_error(exc, "walking the root").message))
                return False
            if scan is None:
                return True
            seen.add(scan.rel_dir)
            counts["seen"] += 1
            counts["files_read"] += scan.files_read
            if scan.unchanged:
                counts["unchanged"] += 1
                counts["rejected"] += scan.known is not None and scan.known.rejected
            else:
                row, findings, resources = judge(scan, spec)
                staged(scan.rel_dir, row, findings, resources,
                       None if scan.known is None else scan.known.candidate_id,
                       scan.same_content)
            if progress is not None:
                progress(counts["seen"], expected, str(spec.path))

    whole = walk(walk_only, root_known)
    done = 0  # entries of `new` whose shards were staged
    while True:
        try:
            shard = next(shards, None)
        except Exception:  # the pool broke (a worker died): the rest is walked here
            whole = walk(frozenset(new[done:]), {}) and whole
            break
        if shard is None:
            break
        done += size
        result.problems.extend(shard.problems)
        for rel_dir, row, findings, resources, files_read in shard.judged:
            seen.add(rel_dir)
            counts["seen"] += 1
            counts["files_read"] += files_read
            staged(rel_dir, row, findings, resources, None)
            if progress is not None:
                progress(counts["seen"], expected, str(spec.path))
    gone = [skill.candidate_id for rel, skill in root_known.items()
            if whole and rel not in seen and (only is None or rel.split("/", 1)[0] in only)]
    counts["removed"] += len(gone)
    write.removed.extend(gone)
    write.present = result.present
    return write
