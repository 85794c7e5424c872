"""A reindex of this directory's roots, as the library runs it: under the index's reindex lock
(store/lock.py), the walk, judgement and one write transaction of index/indexer.py, and in that
transaction the stored resolution of these roots brought up to date (query/winners.py), so that
the first listing after it is a lookup."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skillindex.index import indexer, parallel
from skillindex.index.indexer import Progress
from skillindex.model import IndexReport, RootSpec, ScanProblem
from skillindex.query import winners
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.store import queries, resolved, units
from skillindex.store.lock import OnWait, reindex_lock

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def reindex(store: Library, here: Here, problems: Sequence[ScanProblem], *, cwd: Path,
            all_roots: bool, paths: Iterable[str | Path] | None, progress: Progress | None,
            wait: bool, timeout: float | None, on_wait: OnWait | None,
            jobs: int | None, offline: bool = False) -> IndexReport:
    """Rescan `here`'s roots (every known root with `all_roots`; with `paths`, only the skill
    directories holding them), adding `problems` (the plan's) to the run's. A full rescan
    first brings each URL root's verified cache up to its publisher's index, unless
    `offline`."""
    limit = here.settings.reindex_timeout if timeout is None else timeout
    with units.failing_as(store.engine, "write the index"), reindex_lock(
            store.engine, here.index_name, wait=wait, timeout=limit, on_wait=on_wait) as lock:
        previous = _stored_key(store, here)
        roots = list(here.roots)
        targets = None
        fetched: list[dict[str, object]] = []
        if not offline and paths is None:
            problems = [*problems, *_fetch(roots, here, fetched)]
        if all_roots or paths is not None:
            with store.session() as session:
                stored = queries.stored_roots(session, here.index_name)
            if all_roots:
                planned = {spec.path for spec in roots}
                roots.extend(spec for spec in stored if spec.path not in planned)
            if paths is not None:
                targets = indexer.targets_of(paths, roots, {str(spec.path) for spec in stored})
        report = indexer.reindex(store.engine, roots, index_name=here.index_name, cwd=cwd,
                               all_roots=all_roots, limits=here.settings.limits,
                               extra_problems=problems, progress=progress, lock=lock,
                               after_write=functools.partial(_materialize, here=here,
                                                             previous=previous),
                               targets=targets,
                               jobs=parallel.default_jobs() if jobs is None else jobs)
        return dataclasses.replace(report, fetches=tuple(fetched)) if fetched else report


def _fetch(roots: Sequence[RootSpec], here: Here,
           fetched: list[dict[str, object]]) -> list[ScanProblem]:
    """Sync every URL root among `roots` (under the reindex lock, so no two processes write a
    cache at once); what could not be fetched is a problem of the run, the last good copy
    stays indexed."""
    problems: list[ScanProblem] = []
    for spec in roots:
        if spec.remote is None or spec.disabled_by:
            continue
        from skillindex.index import remote  # noqa: PLC0415 (only where a URL root is)

        report = remote.sync(spec, limits=here.settings.limits)
        fetched.append(report.as_dict())
        if report.stale:
            problems.append(ScanProblem(spec.path, spec.path, "remote-stale",
                                        f"{spec.remote.url}: the last good copy stays: "
                                        f"{report.stale}"))
        for name, why in sorted(report.failed.items()):
            problems.append(ScanProblem(spec.path, spec.path / name, "remote-stale",
                                        f"{name} from {spec.remote.url}: the last good copy "
                                        f"stays: {why}"))
    return problems


def _stored_key(store: Library, here: Here) -> str | None:
    """The key this directory's resolution has before a reindex writes (taken under its lock,
    so no other reindex can change it meanwhile); None where a root quarantines, since no
    resolution is stored then."""
    if here.quarantining:
        return None
    with store.session() as session:
        return winners.key(session, here.index_name, here.roots, here.rules)


def _materialize(session: Session, changed: Sequence[str],
                 replaced: Sequence[tuple[int, int]] | None, change: resolved.Change | None,
                 *, here: Here, previous: str | None) -> None:
    """In the reindex's write transaction: resolve this directory's roots. A write that only
    replaced skills without changing what resolution reads of them (an edited description or
    body) carries the stored resolution over; one that added, removed or renamed a few
    updates it in place, judging only the names it touched; any other resolves every skill
    again. Then the `uri-collision` warnings of the skills whose URIs that resolution makes
    meet."""
    carried = None
    if previous is not None and replaced is not None:  # none is stored when quarantining
        carried = winners.carry(session, here.index_name, here.roots, here.rules, previous,
                                replaced)
    if carried is None and previous is not None and change is not None:
        carried = winners.update(session, here.index_name, here.roots, here.rules, previous,
                                 change)
    resolved.drop_sets_over(session, here.index_name, changed, keep=carried)
    if carried is None and not here.quarantining:
        found = winners.lookup(session, here.index_name, here.roots, here.rules)
        if found is None:
            winners.ensure(session, here.index_name, here.roots, here.rules)  # records them
            return
        carried = found  # stored before, maybe with other warnings since
    # Under quarantine none is stored (what is withheld depends on approvals, which change
    # without a reindex): the warnings are resolved here.
    winners.record_collisions(session, here.index_name, here.roots, here.rules, carried)
