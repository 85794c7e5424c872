"""Drift: every indexed file of this directory's roots hashed again against its manifest row,
and every skill directory listed again for files a reindex would add."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from skillindex.errors import StoreError
from skillindex.index import parallel
from skillindex.model import Candidate, DriftItem, Limits, ManifestFile, VerifyReport
from skillindex.query import disclose, listing
from skillindex.query.library import Library
from skillindex.query.reader import Here
from skillindex.store import queries, reporting

if TYPE_CHECKING:
    from concurrent.futures import Future

PAGE = 1_000  # candidates whose manifests are read at once; fewer than this use no worker
SHARD = 125  # candidates a worker checks at once
AHEAD = 2  # pages handed to the workers before the oldest one's answers are waited for

Progress = Callable[[int, int | None, str], None]  # skills done, expected (None), the root
Manifests = dict[int, list[ManifestFile]]


def verify(store: Library, here: Here, limits: Limits, *, cwd: Path,
           progress: Progress | None = None, jobs: int | None = None) -> VerifyReport:
    """Every candidate, accepted or rejected, checked a page at a time: memory stays flat
    however many skills the roots hold. What it found is recorded (`verify_run`) for the
    report; a read-only database still verifies, unrecorded. `progress` is told after each page.

    With more than a page of skills, `jobs` worker processes (default: one per core; 1: none)
    hash the pages a shard at a time while this one reads the next pages' manifests. The
    answers are joined in the order of the candidates, so the report is the same at any
    `jobs`."""
    jobs = parallel.default_jobs() if jobs is None else jobs
    workers = parallel.Workers(jobs) if jobs > 1 else None
    skills = files = 0
    drift: list[DriftItem] = []
    try:
        for part, root in _checked(_pages(store, here), limits, workers):
            skills, files = skills + part.skills, files + part.files
            drift.extend(part.drift)
            if progress is not None:
                progress(skills, None, root)
    finally:
        if workers is not None:
            workers.shutdown()
    report = VerifyReport(skills=skills, files=files, drift=tuple(drift))
    try:
        with store.transaction("record the verify") as session:
            reporting.record_verify(session, here.index_name, str(cwd), here.paths, report,
                                    datetime.now(UTC))
    except StoreError:
        pass
    return report


def _pages(store: Library, here: Here) -> Iterator[tuple[list[Candidate], Manifests]]:
    """The candidates `PAGE` at a time, each page with its manifests."""
    page: list[Candidate] = []
    for candidate in listing.iter_candidates(store, here, status=None, code=None, limit=None,
                                             page=2_000):
        page.append(candidate)
        if len(page) >= PAGE:
            yield page, _manifests(store, page)
            page = []
    if page:
        yield page, _manifests(store, page)


def _manifests(store: Library, page: Sequence[Candidate]) -> Manifests:
    with store.session() as session:
        return queries.manifest_files(session, [candidate.id for candidate in page])


def _checked(pages: Iterable[tuple[list[Candidate], Manifests]], limits: Limits,
             workers: parallel.Workers | None) -> Iterator[tuple[VerifyReport, str]]:
    """Each page's report and its last root, in order: checked here, or, once a page is full
    (fewer skills are not worth starting a process), by the workers a shard at a time."""
    pending: deque[tuple[list[Future[VerifyReport]], str]] = deque()
    for number, (page, manifests) in enumerate(pages):
        root = str(page[-1].root)
        if workers is None or (number == 0 and len(page) < PAGE):
            yield disclose.verify(page, manifests, limits), root
            continue
        executor = workers.executor()
        shards = (page[start:start + SHARD] for start in range(0, len(page), SHARD))
        pending.append(([executor.submit(disclose.verify, shard,
                                         {c.id: manifests.get(c.id, []) for c in shard}, limits)
                         for shard in shards], root))
        while len(pending) > AHEAD:
            yield _joined(pending.popleft())
    while pending:
        yield _joined(pending.popleft())


def _joined(page: tuple[list[Future[VerifyReport]], str]) -> tuple[VerifyReport, str]:
    """One page's report from its shards' answers, in the shards' order."""
    futures, root = page
    parts = [future.result() for future in futures]
    return VerifyReport(skills=sum(part.skills for part in parts),
                        files=sum(part.files for part in parts),
                        drift=tuple(item for part in parts for item in part.drift)), root
